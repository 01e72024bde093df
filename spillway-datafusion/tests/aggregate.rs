//! DataFusion's grouped hash aggregate spilling through Spillway's factory.

mod common;

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};
use arrow::compute::{concat_batches, sort_to_indices, take};
use common::*;
use datafusion_common::Result;
use datafusion_execution::disk_manager::DiskManagerBuilder;
use datafusion_physical_expr::expressions::col;
use datafusion_physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion_physical_plan::test::TestMemoryExec;
use datafusion_physical_plan::{collect, ExecutionPlan};
use spillway_datafusion::{SpillwayPlan, SpillwayTempFileFactory, UNLIMITED};

/// SELECT k, v FROM input GROUP BY k, v: many groups, so the hash table outgrows a small pool.
fn group_by(batches: &[RecordBatch]) -> Arc<AggregateExec> {
    let schema = schema();
    let source =
        TestMemoryExec::try_new_exec(&[batches.to_vec()], Arc::clone(&schema), None).unwrap();
    let keys = vec![
        (col("k", &schema).unwrap(), "k".to_string()),
        (col("v", &schema).unwrap(), "v".to_string()),
    ];
    Arc::new(
        AggregateExec::try_new(
            AggregateMode::Single,
            PhysicalGroupBy::new_single(keys),
            vec![],
            vec![],
            source,
            schema,
        )
        .unwrap(),
    )
}

/// The groups, ordered by k (a hash aggregate emits them in no order).
fn ordered_groups(batches: &[RecordBatch]) -> RecordBatch {
    let all = concat_batches(&batches[0].schema(), batches).unwrap();
    let order = sort_to_indices(all.column(0), None, None).unwrap();
    let columns = all
        .columns()
        .iter()
        .map(|c| take(c, &order, None).unwrap())
        .collect();
    RecordBatch::try_new(all.schema(), columns).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grouped_aggregate_spills_through_spillway_and_matches_an_unconstrained_one() -> Result<()>
{
    let roots = Roots::new(2);
    // 200,000 rows over 100,000 keys.
    let batches = input(200, 1000, 100_000);
    let expected = collect(group_by(&batches) as _, task_context(None, no_disk())?).await?;

    let plan = SpillwayPlan::create(spillway(), &roots.paths, 1 << 30, UNLIMITED)?;
    let factory = Watching::new(SpillwayTempFileFactory::new(Arc::clone(&plan)), &roots);
    let context = task_context(
        Some(2 << 20),
        DiskManagerBuilder::default().with_temp_file_factory(factory.clone()),
    )?;
    let aggregate = group_by(&batches);
    let actual = collect(Arc::clone(&aggregate) as Arc<dyn ExecutionPlan>, context).await?;

    let (expected, actual) = (ordered_groups(&expected), ordered_groups(&actual));
    assert!(expected.num_rows() > 50_000);
    let keys = |b: &RecordBatch| {
        b.column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .values()
            .to_vec()
    };
    assert_eq!(
        keys(&actual),
        keys(&expected),
        "the spilling aggregate's groups differ"
    );
    assert_eq!(actual, expected);
    let metrics = aggregate.metrics().unwrap();
    assert!(
        metrics.spill_count().unwrap() > 0,
        "the aggregate did not spill"
    );
    assert!(metrics.spilled_bytes().unwrap() > 0);
    assert_eq!(
        factory.created.lock().unwrap().len(),
        metrics.spill_count().unwrap()
    );

    drop(factory);
    drop(plan);
    roots.assert_empty("after the plan was dropped");
    Ok(())
}
