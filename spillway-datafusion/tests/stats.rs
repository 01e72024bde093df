//! The process's counters, read by name through the C ABI. Its own test binary: plans of other
//! tests running at the same time would move the counters.

mod common;

use std::io::Write;
use std::sync::Arc;

use common::*;
use datafusion_common::{DataFusionError, Result};
use datafusion_execution::spill_file::TempFileFactory;
use spillway_datafusion::{SpillwayPlan, SpillwayTempFileFactory, StatKind, Status, UNLIMITED};

#[test]
fn a_plan_that_spills_moves_the_counters_found_by_name() -> Result<()> {
    let spillway = spillway();
    let before = spillway.stats()?;
    // The JVM's metric names, with their kinds.
    for (name, kind) in [
        ("plansCreated", StatKind::Count),
        ("plansSpilled", StatKind::Count),
        ("spillFiles", StatKind::Count),
        ("bytesSpilled", StatKind::Count),
        ("livePlans", StatKind::Level),
        ("bytesInUse", StatKind::Level),
    ] {
        assert_eq!(before.kind(name), Some(kind), "{name}");
    }
    assert_eq!(before.get("live_plans"), None, "no counter of that name");
    let delta = |after: &spillway_datafusion::SpillwayStats, name: &str| {
        after.get(name).unwrap() - before.get(name).unwrap()
    };

    let roots = Roots::new(1);
    let plan = SpillwayPlan::create(Arc::clone(&spillway), &roots.paths, UNLIMITED, UNLIMITED)?;
    let factory = SpillwayTempFileFactory::new(Arc::clone(&plan));
    let file = factory.create_temp_file("test")?;
    let mut writer = file.open_writer()?;
    writer
        .write_all(&[5u8; 100_000])
        .map_err(DataFusionError::IoError)?;
    writer.finish()?;
    drop(writer);

    let spilling = spillway.stats()?;
    assert_eq!(delta(&spilling, "plansCreated"), 1);
    assert_eq!(delta(&spilling, "livePlans"), 1);
    assert_eq!(delta(&spilling, "plansSpilled"), 1);
    assert_eq!(delta(&spilling, "spillFiles"), 1);
    assert_eq!(
        delta(&spilling, "bytesInUse"),
        plan.used_disk_space()? as i64
    );
    assert_eq!(delta(&spilling, "logicalBytesSpilled"), 100_000);
    assert_eq!(
        spillway.stat("livePlans")?,
        spilling.get("livePlans").unwrap()
    );

    drop(file);
    plan.release()?;
    let after = spillway.stats()?;
    assert_eq!(delta(&after, "livePlans"), 0);
    assert_eq!(delta(&after, "bytesInUse"), 0);
    assert_eq!(delta(&after, "plansCreated"), 1, "a count only grows");
    assert_eq!(
        after.iter().map(|(n, _, _)| n).collect::<Vec<_>>(),
        before.iter().map(|(n, _, _)| n).collect::<Vec<_>>(),
        "the list is fixed while the library is loaded"
    );
    roots.assert_empty("after the release");

    let err = spillway.stat("live_plans").unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("livePlans"), "{}", err.message);
    Ok(())
}
