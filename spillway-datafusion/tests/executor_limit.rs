//! The executor limit, shared by every plan of the process. Its own test binary: the bytes of
//! plans in other tests running at the same time would count against it.

mod common;

use std::io::Write;
use std::sync::Arc;

use common::*;
use datafusion_common::{DataFusionError, Result};
use datafusion_execution::disk_manager::DiskManagerBuilder;
use datafusion_execution::spill_file::{SpillFile, TempFileFactory};
use datafusion_physical_plan::collect;
use spillway_datafusion::{SpillwayPlan, SpillwayTempFileFactory};

const EXECUTOR_LIMIT: i64 = 4 << 20;
const KEY: &str = "spark.spillway.maxExecutorTempDirectorySize";

fn assert_executor_limit(err: &DataFusionError) {
    match err.find_root() {
        DataFusionError::ResourcesExhausted(message) => {
            assert!(
                message.contains(KEY),
                "the message does not name {KEY}: {message}"
            )
        }
        other => panic!("not ResourcesExhausted: {other:?} (from {err})"),
    }
}

fn write_file(factory: &SpillwayTempFileFactory, len: usize) -> Result<Arc<dyn SpillFile>> {
    let file = factory.create_temp_file("test")?;
    let mut writer = file.open_writer()?;
    writer
        .write_all(&vec![7u8; len])
        .map_err(DataFusionError::from)?;
    writer.finish()?;
    Ok(file)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_plans_share_the_executor_limit() -> Result<()> {
    let roots = Roots::new(2);
    // Each plan may spill 1 GiB alone; together they may not pass 4 MiB.
    let first = SpillwayPlan::create(spillway(), &roots.paths, 1 << 30, EXECUTOR_LIMIT)?;
    let second = SpillwayPlan::create(spillway(), &roots.paths, 1 << 30, EXECUTOR_LIMIT)?;
    let first_factory = SpillwayTempFileFactory::new(Arc::clone(&first));
    let second_factory = SpillwayTempFileFactory::new(Arc::clone(&second));

    let held = write_file(&first_factory, 3 << 20)?;
    let refused = write_file(&second_factory, 2 << 20)
        .err()
        .expect("3 + 2 MiB pass the 4 MiB executor limit");
    assert_executor_limit(&refused);

    // A sort of the second plan spills several MiB: refused while the first plan holds 3 MiB.
    let context = task_context(
        Some(2 << 20),
        DiskManagerBuilder::default().with_temp_file_factory(second_factory.clone()),
    )?;
    let err = collect(sort_plan(&input(200, 1000, u64::MAX)) as _, context)
        .await
        .expect_err("the executor limit");
    assert_executor_limit(&err);

    // The first plan's bytes go back to the executor: the second plan's write fits now.
    drop(held);
    assert_eq!(first.used_disk_space()?, 0);
    let fits = write_file(&second_factory, 2 << 20)?;
    drop(fits);

    drop((first_factory, second_factory));
    drop((first, second));
    roots.assert_empty("after both plans were dropped");
    Ok(())
}
