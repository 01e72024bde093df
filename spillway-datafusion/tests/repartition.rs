//! DataFusion's spilling RepartitionExec reads its spill pool's files while it still writes them;
//! a Spillway spill file can be read only once finished, so the read fails, with an error that
//! says so (the limitation in README.md), and the plan still cleans up.

mod common;

use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use common::*;
use datafusion_common::{DataFusionError, Result};
use datafusion_execution::disk_manager::DiskManagerBuilder;
use datafusion_execution::TaskContext;
use datafusion_physical_plan::repartition::RepartitionExec;
use datafusion_physical_plan::stream::RecordBatchStreamAdapter;
use datafusion_physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion_physical_plan::{ExecutionPlan, Partitioning, SendableRecordBatchStream};
use futures::channel::mpsc;
use futures::StreamExt;
use spillway_datafusion::{SpillwayLocalDirs, SpillwayPlan, SpillwayTempFileFactory, UNLIMITED};

/// An input partition fed by the test, which stays open until the test closes it: the
/// repartition's spill files are then still being written when its output reads them.
#[derive(Debug)]
struct Fed {
    schema: SchemaRef,
    batches: Mutex<Option<mpsc::UnboundedReceiver<Result<RecordBatch>>>>,
}

impl PartitionStream for Fed {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _: Arc<TaskContext>) -> SendableRecordBatchStream {
        let batches = self.batches.lock().unwrap().take().expect("executed once");
        Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            batches,
        ))
    }
}

#[tokio::test]
async fn a_spilling_repartition_fails_with_an_error_naming_the_limitation() -> Result<()> {
    let roots = Roots::new(2);
    let dirs = Arc::new(SpillwayLocalDirs::register(spillway(), &roots.paths)?);
    let plan = SpillwayPlan::lazy_in(&dirs, 1 << 30, UNLIMITED);
    let disk = DiskManagerBuilder::default()
        .with_temp_file_factory(SpillwayTempFileFactory::new(Arc::clone(&plan)));
    // One byte of memory: every batch the repartition routes goes to its spill pool.
    let context = task_context(Some(1), disk)?;

    let (feed, batches) = mpsc::unbounded();
    let source = Arc::new(Fed {
        schema: schema(),
        batches: Mutex::new(Some(batches)),
    });
    let input = StreamingTableExec::try_new(schema(), vec![source], None, [], false, None)?;
    let repartition = RepartitionExec::try_new(Arc::new(input), Partitioning::RoundRobinBatch(2))?;
    for batch in input_batches() {
        feed.unbounded_send(Ok(batch)).unwrap();
    }

    let mut output = repartition.execute(0, Arc::clone(&context))?;
    let err = output
        .next()
        .await
        .expect("an answer while the input is open")
        .expect_err("a file still being written cannot be read");
    let message = DataFusionError::find_root(&err).to_string();
    assert!(
        message.contains("still being written") && message.contains("RepartitionExec"),
        "{err}"
    );
    assert!(repartition.metrics().unwrap().spill_count().unwrap() > 0);

    drop(feed);
    drop(output);
    drop(repartition);
    drop(context);
    // The repartition's input task, aborted with it, lets go of its spill files (and with them
    // the plan) when the runtime next runs it.
    for _ in 0..100_000 {
        if Arc::strong_count(&plan) == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(Arc::strong_count(&plan), 1, "the repartition kept the plan");
    drop(plan);
    roots.assert_empty("after the plan was dropped");
    Ok(())
}

fn input_batches() -> Vec<RecordBatch> {
    input(4, 1000, 100)
}
