//! The Comet scenario in miniature: a JNI library that runs a DataFusion plan inside a Spark task
//! and spills through the task's Spillway plan.
//!
//! The task takes its plan from `spillway.TaskSpill` and passes `SpillPlan.nativeHandle` in; this
//! library adopts it (`SpillwayPlan::adopt`, never released here), gives DataFusion a
//! `SpillwayTempFileFactory` over it, and sorts the task's keys with DataFusion's own `SortExec`
//! under a small memory pool, so that the sort spills. The task reads the sorted batches one call
//! at a time, as Comet's `executePlan` does, and closes the sort from a task completion listener;
//! when the task ends, TaskSpill releases the plan and whatever is left in it.
//!
//! Java side: `spillway.DataFusionTaskSort` (test sources), driven by
//! `spillway.DataFusionTaskSortSuite` in Spark local mode.
//!
//! Nothing here may take the executor down: every entry point runs in `EnvUnowned::with_env`,
//! which catches panics, and [`ThrowJavaException`] turns errors and panics into Java exceptions.
//! Sorts are kept in a table by id, so a stale or forged id is an `IllegalStateException`, never a
//! dangling pointer.

use std::collections::HashMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock, PoisonError};

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion_common::DataFusionError;
use datafusion_execution::disk_manager::DiskManagerBuilder;
use datafusion_execution::{SendableRecordBatchStream, TaskContext};
use datafusion_physical_expr::LexOrdering;
use datafusion_physical_plan::sorts::sort::SortExec;
use datafusion_physical_plan::stream::RecordBatchStreamAdapter;
use datafusion_physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion_physical_plan::{execute_stream, ExecutionPlan};
use futures::StreamExt;
use jni::errors::ErrorPolicy;
use jni::objects::{JClass, JLongArray};
use jni::strings::JNIString;
use jni::sys::{jint, jlong};
use jni::{jni_str, Env, EnvUnowned};
use spillway_datafusion::{Spillway, SpillwayPlan, SpillwayTempFileFactory};

// The tests' schema (k: Int64, v: Utf8), batches, SortExec and task context, so that the Spark
// suite sorts what `cargo test` checks.
#[path = "../../tests/common/mod.rs"]
mod common;

const ROWS_PER_BATCH: usize = 1000;

/// A sort running for a task: DataFusion's output stream and the runtime that drives it.
struct TaskSort {
    // Dropped in this order: the stream (and the spill files it holds), then the runtime, whose
    // drop waits for reads still in its blocking pool.
    stream: SendableRecordBatchStream,
    sort: Arc<SortExec>,
    runtime: tokio::runtime::Runtime,
    // The stream has ended: it is not polled again (some streams panic if they are).
    done: bool,
}

static SORTS: LazyLock<Mutex<HashMap<i64, Arc<Mutex<TaskSort>>>>> = LazyLock::new(Default::default);
static NEXT_SORT: AtomicI64 = AtomicI64::new(1);

/// The library the JVM loaded (`Spillway::loaded`: never a second copy).
fn spillway() -> Result<Arc<Spillway>, Failure> {
    static LOADED: OnceLock<Arc<Spillway>> = OnceLock::new();
    if let Some(s) = LOADED.get() {
        return Ok(Arc::clone(s));
    }
    let s = Spillway::loaded().map_err(|e| Failure::IllegalState(e.to_string()))?;
    Ok(Arc::clone(LOADED.get_or_init(|| s)))
}

/// The table is never left inconsistent (nothing panics while holding it).
fn sorts() -> MutexGuard<'static, HashMap<i64, Arc<Mutex<TaskSort>>>> {
    SORTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A sort's lock; poisoned when a call panicked in it, and then the sort is unusable.
fn lock(task_sort: &Mutex<TaskSort>, sort: jlong) -> Result<MutexGuard<'_, TaskSort>, Failure> {
    task_sort
        .lock()
        .map_err(|_| Failure::IllegalState(format!("sort {sort} panicked in an earlier call")))
}

fn find(sort: jlong) -> Result<Arc<Mutex<TaskSort>>, Failure> {
    sorts()
        .get(&sort)
        .cloned()
        .ok_or_else(|| Failure::IllegalState(format!("no open sort {sort}")))
}

/// Starts sorting `keys` in the task whose Spillway plan is `plan`, with `memory_pool_bytes` of
/// DataFusion memory; returns the sort's id. Nothing runs until the first `next`.
/// `panic_at_input_batch` (>= 0) makes the input panic when DataFusion pulls that batch: a bug in
/// an operator, for the tests.
#[no_mangle]
pub extern "system" fn Java_spillway_DataFusionTaskSort_open<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    plan: jlong,
    keys: JLongArray<'local>,
    memory_pool_bytes: jlong,
    panic_at_input_batch: jint,
) -> jlong {
    env.with_env(|env| -> Result<jlong, Failure> {
        if keys.is_null() {
            return Err(Failure::IllegalArgument("keys is null".into()));
        }
        if memory_pool_bytes <= 0 {
            return Err(Failure::IllegalArgument(format!(
                "memory pool of {memory_pool_bytes} bytes"
            )));
        }
        let mut all = vec![0; keys.len(env)?];
        keys.get_region(env, 0, &mut all)?;

        let plan = SpillwayPlan::adopt(spillway()?, plan);
        // Checks the handle now (the library refuses unknown and released plans), rather than
        // at the first spill.
        plan.used_disk_space()
            .map_err(|e| Failure::IllegalArgument(e.to_string()))?;
        let factory = SpillwayTempFileFactory::new(plan);
        let context = common::task_context(
            Some(memory_pool_bytes as usize),
            DiskManagerBuilder::default().with_temp_file_factory(factory),
        )?;
        let input = TaskKeys {
            schema: common::schema(),
            batches: all
                .chunks(ROWS_PER_BATCH)
                .map(|c| common::batch(c.to_vec()))
                .collect(),
            panic_at_batch: usize::try_from(panic_at_input_batch).ok(),
        };
        let source = StreamingTableExec::try_new(
            common::schema(),
            vec![Arc::new(input) as Arc<dyn PartitionStream>],
            None,
            Vec::<LexOrdering>::new(),
            false,
            None,
        )?;
        let sort = common::sort_over(Arc::new(source));
        // One thread, the task's: DataFusion's work runs in the JNI calls, reads in its blocking pool.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::IllegalState(format!("tokio runtime: {e}")))?;
        let stream = {
            let _in_runtime = runtime.enter();
            execute_stream(Arc::clone(&sort) as Arc<dyn ExecutionPlan>, context)?
        };
        let id = NEXT_SORT.fetch_add(1, Ordering::Relaxed);
        let task_sort = TaskSort {
            stream,
            sort,
            runtime,
            done: false,
        };
        sorts().insert(id, Arc::new(Mutex::new(task_sort)));
        Ok(id)
    })
    .resolve::<ThrowJavaException>()
}

/// The next sorted batch's keys, or null when the sort is done.
#[no_mangle]
pub extern "system" fn Java_spillway_DataFusionTaskSort_next<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    sort: jlong,
) -> JLongArray<'local> {
    env.with_env(|env| -> Result<JLongArray<'local>, Failure> {
        let task_sort = find(sort)?;
        let mut task_sort = lock(&task_sort, sort)?;
        let TaskSort {
            stream,
            runtime,
            done,
            ..
        } = &mut *task_sort;
        let next = if *done {
            None
        } else {
            runtime.block_on(stream.next())
        };
        let Some(batch) = next else {
            *done = true;
            return Ok(JLongArray::default());
        };
        // A failed stream is not polled again either: the error is the sort's last word.
        let batch = batch.inspect_err(|_| *done = true)?;
        let keys = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| Failure::IllegalState("the sort's key column is not Int64".into()))?
            .values()
            .to_vec();
        let out = JLongArray::new(env, keys.len())?;
        out.set_region(env, 0, &keys)?;
        Ok(out)
    })
    .resolve::<ThrowJavaException>()
}

/// How many spill files the sort has written so far (DataFusion's `spill_count`).
#[no_mangle]
pub extern "system" fn Java_spillway_DataFusionTaskSort_spillCount<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    sort: jlong,
) -> jlong {
    env.with_env(|_| -> Result<jlong, Failure> {
        let task_sort = find(sort)?;
        let task_sort = lock(&task_sort, sort)?;
        let spills = task_sort
            .sort
            .metrics()
            .and_then(|m| m.spill_count())
            .unwrap_or(0);
        Ok(spills as jlong)
    })
    .resolve::<ThrowJavaException>()
}

/// Ends the sort, dropping its spill files (a sort that panicked included). Once only.
#[no_mangle]
pub extern "system" fn Java_spillway_DataFusionTaskSort_close<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
    sort: jlong,
) {
    env.with_env(|_| -> Result<(), Failure> {
        let task_sort = sorts()
            .remove(&sort)
            .ok_or_else(|| Failure::IllegalState(format!("no open sort {sort}")))?;
        drop(task_sort); // outside the table's lock: it waits for the sort's reads
        Ok(())
    })
    .resolve::<ThrowJavaException>()
}

/// Sorts opened and not yet closed, in this process.
#[no_mangle]
pub extern "system" fn Java_spillway_DataFusionTaskSort_openSorts<'local>(
    mut env: EnvUnowned<'local>,
    _class: JClass<'local>,
) -> jint {
    env.with_env(|_| -> Result<jint, Failure> { Ok(sorts().len() as jint) })
        .resolve::<ThrowJavaException>()
}

/// The task's keys as DataFusion's input, in batches of the tests' schema.
#[derive(Debug)]
struct TaskKeys {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    panic_at_batch: Option<usize>,
}

impl PartitionStream for TaskKeys {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _: Arc<TaskContext>) -> SendableRecordBatchStream {
        let panic_at = self.panic_at_batch;
        let batches = self
            .batches
            .clone()
            .into_iter()
            .enumerate()
            .map(move |(i, b)| {
                if Some(i) == panic_at {
                    panic!("a panic in the sort's input at batch {i} (injected by the test)");
                }
                Ok(b)
            });
        Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            futures::stream::iter(batches),
        ))
    }
}

/// What an entry point failed with; each becomes a Java exception.
#[derive(Debug)]
enum Failure {
    IllegalArgument(String),
    IllegalState(String),
    DataFusion(DataFusionError),
    Jni(jni::errors::Error),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::IllegalArgument(m) | Failure::IllegalState(m) => f.write_str(m),
            // A spill refused by Spillway's limit is DataFusion's resources-exhausted error deep
            // under Arrow's I/O error: its own message names the Spark setting to raise.
            Failure::DataFusion(e) => match e.find_root() {
                root @ DataFusionError::ResourcesExhausted(_) => write!(f, "{root}"),
                _ => write!(f, "{e}"),
            },
            Failure::Jni(e) => write!(f, "JNI: {e}"),
        }
    }
}

impl std::error::Error for Failure {}

impl From<DataFusionError> for Failure {
    fn from(e: DataFusionError) -> Self {
        Failure::DataFusion(e)
    }
}

impl From<jni::errors::Error> for Failure {
    fn from(e: jni::errors::Error) -> Self {
        Failure::Jni(e)
    }
}

/// Errors and panics as Java exceptions: IllegalArgumentException, IllegalStateException, and
/// RuntimeException for DataFusion's errors and for panics. An exception already pending (a
/// failed JNI call) is left to propagate.
struct ThrowJavaException;

impl<T: Default> ErrorPolicy<T, Failure> for ThrowJavaException {
    type Captures<'unowned_env_local: 'native_method, 'native_method> = ();

    fn on_error<'unowned_env_local: 'native_method, 'native_method>(
        env: &mut Env<'unowned_env_local>,
        _: &mut (),
        err: Failure,
    ) -> jni::errors::Result<T> {
        if env.exception_check() {
            return Ok(T::default());
        }
        let message = JNIString::from(err.to_string());
        // throw_new returns Err(JavaException) once thrown: the exception is what we want.
        let _ = match err {
            Failure::IllegalArgument(_) => {
                env.throw_new(jni_str!("java/lang/IllegalArgumentException"), message)
            }
            Failure::IllegalState(_) => {
                env.throw_new(jni_str!("java/lang/IllegalStateException"), message)
            }
            Failure::DataFusion(_) | Failure::Jni(_) => {
                env.throw_new(jni_str!("java/lang/RuntimeException"), message)
            }
        };
        Ok(T::default())
    }

    fn on_panic<'unowned_env_local: 'native_method, 'native_method>(
        env: &mut Env<'unowned_env_local>,
        _: &mut (),
        payload: Box<dyn std::any::Any + Send + 'static>,
    ) -> jni::errors::Result<T> {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        // A payload of another type may panic in its drop: leaked then, as jni's own policies do.
        if let Err(again) = catch_unwind(AssertUnwindSafe(|| drop(payload))) {
            std::mem::forget(again);
        }
        if env.exception_check() {
            return Ok(T::default());
        }
        let message = JNIString::from(format!("panic in the DataFusion sort: {what}"));
        let _ = env.throw_new(jni_str!("java/lang/RuntimeException"), message);
        Ok(T::default())
    }
}
