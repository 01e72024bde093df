//! What the tests share: the library, temp roots, an input to sort, DataFusion runtimes.
#![allow(dead_code)] // each test binary uses its own part

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion_common::Result;
use datafusion_execution::config::SessionConfig;
use datafusion_execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion_execution::memory_pool::FairSpillPool;
use datafusion_execution::runtime_env::RuntimeEnvBuilder;
use datafusion_execution::spill_file::{SpillFile, TempFileFactory};
use datafusion_execution::TaskContext;
use datafusion_physical_expr::expressions::col;
use datafusion_physical_expr::PhysicalSortExpr;
use datafusion_physical_plan::sorts::sort::SortExec;
use datafusion_physical_plan::test::TestMemoryExec;
use datafusion_physical_plan::ExecutionPlan;
use spillway_datafusion::{Spillway, LIBRARY_ENV};

/// libspillway: `$SPILLWAY_LIBRARY` (make sets it), else the repository's build/libspillway.so.
pub fn spillway() -> Arc<Spillway> {
    let path = std::env::var_os(LIBRARY_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../build/libspillway.so"));
    Spillway::load(&path)
        .unwrap_or_else(|e| panic!("{e} (build it with `make lib`, or set {LIBRARY_ENV})"))
}

/// `n` empty spill roots in a temp dir removed on drop.
pub struct Roots {
    dir: tempfile::TempDir,
    pub paths: Vec<PathBuf>,
}

impl Roots {
    pub fn new(n: usize) -> Roots {
        let dir = tempfile::Builder::new()
            .prefix("spillway-df-test-")
            .tempdir()
            .unwrap();
        let paths: Vec<PathBuf> = (0..n)
            .map(|i| dir.path().join(format!("root{i}")))
            .collect();
        for p in &paths {
            std::fs::create_dir(p).unwrap();
        }
        Roots { dir, paths }
    }

    /// Every entry under the roots (recursively), as paths.
    pub fn entries(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                out.push(p.clone());
                if p.is_dir() {
                    walk(&p, out);
                }
            }
        }
        let mut out = Vec::new();
        for r in &self.paths {
            walk(r, &mut out);
        }
        out
    }

    /// The dirs right under the roots (the plans' dirs).
    pub fn plan_dirs(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for r in &self.paths {
            for e in std::fs::read_dir(r).unwrap() {
                out.push(e.unwrap().path());
            }
        }
        out
    }

    pub fn assert_empty(&self, when: &str) {
        let left = self.entries();
        assert!(left.is_empty(), "{when}: left in the roots: {left:?}");
    }
}

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Utf8, false),
    ]))
}

/// `batches` batches of `rows` rows: a pseudo-random key (with repeats, so the aggregate has
/// groups to merge) and a string payload.
pub fn input(batches: usize, rows: usize, distinct_keys: u64) -> Vec<RecordBatch> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..batches)
        .map(|_| {
            let keys: Vec<i64> = (0..rows)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % distinct_keys) as i64
                })
                .collect();
            batch(keys)
        })
        .collect()
}

/// A batch of the schema: the keys, and a string payload derived from each.
pub fn batch(keys: Vec<i64>) -> RecordBatch {
    let values: Vec<String> = keys.iter().map(|k| format!("value-{k:020}")).collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(keys)),
            Arc::new(StringArray::from(values)),
        ],
    )
    .unwrap()
}

/// A SortExec on k over the batches in memory, in one partition.
pub fn sort_plan(batches: &[RecordBatch]) -> Arc<SortExec> {
    let source = TestMemoryExec::try_new_exec(&[batches.to_vec()], schema(), None).unwrap();
    sort_over(source)
}

/// A SortExec on k over `source` (of the schema).
pub fn sort_over(source: Arc<dyn ExecutionPlan>) -> Arc<SortExec> {
    let ordering = [PhysicalSortExpr::new_default(col("k", &schema()).unwrap())];
    Arc::new(SortExec::new(ordering.into(), source))
}

/// A task context with a memory pool of `memory` bytes (None: unlimited) and the disk manager.
pub fn task_context(memory: Option<usize>, disk: DiskManagerBuilder) -> Result<Arc<TaskContext>> {
    let mut config = SessionConfig::new().with_batch_size(1024);
    // A small reservation for the merge, so that a small pool still leaves room to sort.
    config.options_mut().execution.sort_spill_reservation_bytes = 256 << 10;
    let mut runtime = RuntimeEnvBuilder::new().with_disk_manager_builder(disk);
    if let Some(bytes) = memory {
        runtime = runtime.with_memory_pool(Arc::new(FairSpillPool::new(bytes)));
    }
    Ok(Arc::new(
        TaskContext::default()
            .with_session_config(config)
            .with_runtime(runtime.build_arc()?),
    ))
}

/// A disk manager that cannot spill: the reference runs must not.
pub fn no_disk() -> DiskManagerBuilder {
    DiskManagerBuilder::default().with_mode(DiskManagerMode::Disabled)
}

/// The batches as one.
pub fn concat(batches: &[RecordBatch]) -> RecordBatch {
    concat_batches(&schema(), batches).unwrap()
}

/// A factory that records the path of every file the inner one creates, and checks, at each
/// creation, that the roots hold nothing but the dirs of the files created so far.
pub struct Watching {
    pub inner: Arc<dyn TempFileFactory>,
    pub roots: Vec<PathBuf>,
    pub created: Mutex<Vec<PathBuf>>,
}

impl Watching {
    pub fn new(inner: Arc<dyn TempFileFactory>, roots: &Roots) -> Arc<Watching> {
        Arc::new(Watching {
            inner,
            roots: roots.paths.clone(),
            created: Mutex::new(Vec::new()),
        })
    }

    /// Panics if a root holds anything but the dirs of the files created so far and their
    /// owner locks (`.<dir name>...`, beside each dir).
    pub fn check_roots(&self) {
        let created = self.created.lock().unwrap();
        let dirs: Vec<&Path> = created.iter().map(|p| p.parent().unwrap()).collect();
        let is_lock_of_dir = |p: &Path| {
            let name = p.file_name().unwrap().to_string_lossy();
            dirs.iter().any(|d| {
                d.parent() == p.parent()
                    && name.starts_with(&format!(".{}", d.file_name().unwrap().to_string_lossy()))
            })
        };
        for root in &self.roots {
            for e in std::fs::read_dir(root).unwrap() {
                let p = e.unwrap().path();
                assert!(
                    dirs.contains(&p.as_path()) || is_lock_of_dir(&p),
                    "{p:?} is in a root, but no spill file was created there ({created:?})"
                );
            }
        }
    }
}

impl TempFileFactory for Watching {
    fn create_temp_file(&self, description: &str) -> Result<Arc<dyn SpillFile>> {
        self.check_roots();
        let file = self.inner.create_temp_file(description)?;
        let path = file
            .path()
            .expect("a Spillway file has a path")
            .to_path_buf();
        assert!(path.exists(), "{path:?} does not exist");
        assert!(
            self.roots
                .iter()
                .any(|r| path.parent().and_then(Path::parent) == Some(r.as_path())),
            "{path:?} is not in a plan dir right under a root ({:?})",
            self.roots
        );
        self.created.lock().unwrap().push(path);
        self.check_roots();
        Ok(file)
    }
}
