//! DataFusion's own SortExec spilling through Spillway's factory.

mod common;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use common::*;
use datafusion_common::{DataFusionError, Result};
use datafusion_execution::disk_manager::DiskManagerBuilder;
use datafusion_physical_plan::{collect, execute_stream, ExecutionPlan};
use futures::StreamExt;
use spillway_datafusion::{SpillwayLocalDirs, SpillwayPlan, SpillwayTempFileFactory, UNLIMITED};

/// About 7 MB of input, sorted in 2 MiB of memory: several spills.
const BATCHES: usize = 200;
const ROWS: usize = 1000;
const MEMORY: usize = 2 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sort_spills_through_spillway_and_matches_an_unconstrained_sort() -> Result<()> {
    let roots = Roots::new(4);
    let batches = input(BATCHES, ROWS, u64::MAX);
    let unconstrained = sort_plan(&batches);
    let expected = collect(
        Arc::clone(&unconstrained) as _,
        task_context(None, no_disk())?,
    )
    .await?;
    assert_eq!(unconstrained.metrics().unwrap().spill_count(), Some(0));

    let plan = SpillwayPlan::create(spillway(), &roots.paths, 1 << 30, UNLIMITED)?;
    let factory = Watching::new(SpillwayTempFileFactory::new(Arc::clone(&plan)), &roots);
    let context = task_context(
        Some(MEMORY),
        DiskManagerBuilder::default().with_temp_file_factory(factory.clone()),
    )?;
    roots.assert_empty("a plan and a DataFusion runtime that have not spilled");

    let sort = sort_plan(&batches);
    let actual = collect(Arc::clone(&sort) as _, context).await?;

    assert_eq!(
        concat(&actual),
        concat(&expected),
        "the spilling sort differs from the unconstrained one"
    );
    let metrics = sort.metrics().unwrap();
    let spills = metrics.spill_count().unwrap();
    assert!(
        spills >= 2,
        "the sort spilled {spills} times; the test wants several"
    );
    assert!(metrics.spilled_bytes().unwrap() > 0);
    assert!(metrics.spilled_rows().unwrap() > 0);
    let created = factory.created.lock().unwrap().clone();
    assert_eq!(
        created.len(),
        spills,
        "every spill file came from the factory"
    );
    factory.check_roots();
    assert_eq!(
        plan.used_disk_space()?,
        0,
        "DataFusion dropped its spill files after the merge"
    );
    for path in &created {
        assert!(!path.exists(), "{path:?} outlived its SpillFile");
    }

    drop(factory);
    drop(plan);
    roots.assert_empty("after the plan was dropped");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_limit_is_resources_exhausted_naming_its_setting() -> Result<()> {
    let roots = Roots::new(2);
    let batches = input(BATCHES, ROWS, u64::MAX);
    let plan = SpillwayPlan::create(spillway(), &roots.paths, 256 << 10, UNLIMITED)?;
    let factory = SpillwayTempFileFactory::new(Arc::clone(&plan));
    let context = task_context(
        Some(MEMORY),
        DiskManagerBuilder::default().with_temp_file_factory(factory.clone()),
    )?;

    let err = collect(sort_plan(&batches) as _, context)
        .await
        .expect_err("the sort spills past 256 KiB");

    match err.find_root() {
        DataFusionError::ResourcesExhausted(message) => assert!(
            message.contains("spark.spillway.maxTempDirectorySize"),
            "the message names no setting: {message}"
        ),
        other => panic!("not ResourcesExhausted: {other:?} (from {err})"),
    }
    drop(factory);
    plan.release()?;
    roots.assert_empty("after the plan was released");
    Ok(())
}

#[test]
fn a_panic_in_the_plan_leaves_nothing_on_disk() {
    let roots = Roots::new(2);
    let batches = input(BATCHES, ROWS, u64::MAX);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        runtime.block_on(async {
            // A lazy plan: created in the library at the sort's first spill, mid-stream.
            let dirs = Arc::new(SpillwayLocalDirs::register(spillway(), &roots.paths).unwrap());
            let plan = SpillwayPlan::lazy_in(&dirs, 1 << 30, UNLIMITED);
            let factory = SpillwayTempFileFactory::new(Arc::clone(&plan));
            let context = task_context(
                Some(MEMORY),
                DiskManagerBuilder::default().with_temp_file_factory(factory),
            )
            .unwrap();
            let sort = sort_plan(&batches);
            let mut sorted = execute_stream(Arc::clone(&sort) as _, context).unwrap();
            // The first output comes from merging the spill files, which are open now.
            sorted.next().await.unwrap().unwrap();
            assert!(sort.metrics().unwrap().spill_count().unwrap() > 0);
            assert!(plan.handle().is_some());
            assert!(plan.used_disk_space().unwrap() > 0);
            assert!(!roots.plan_dirs().is_empty());
            panic!("a panic in the middle of the plan (expected by the test)");
        })
    }));

    assert!(outcome.is_err());
    drop(runtime); // waits for reads still in the blocking pool, which hold their files
    roots.assert_empty("after a panic in the plan");
}
