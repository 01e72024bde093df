//! The `TempFileFactory` DataFusion's `DiskManager` calls in `Custom` mode.

use std::sync::Arc;

use datafusion_common::Result;
use datafusion_execution::spill_file::{SpillFile, TempFileFactory};

use crate::file::SpillwaySpillFile;
use crate::plan::SpillwayPlan;

/// Creates DataFusion's spill files as files of one Spillway plan. Give each DataFusion plan its
/// own factory over its own Spillway plan:
///
/// ```no_run
/// # use std::sync::Arc;
/// # use spillway_datafusion::*;
/// # use datafusion_execution::{disk_manager::DiskManagerBuilder, runtime_env::RuntimeEnvBuilder};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let spillway = Spillway::from_env()?;
/// let dirs = Arc::new(SpillwayLocalDirs::register(spillway, &["/mnt/disk1/spill".into()])?); // once
/// let plan = SpillwayPlan::lazy_in(&dirs, 10 << 30, UNLIMITED); // per DataFusion plan
/// let runtime = RuntimeEnvBuilder::new()
///     .with_disk_manager_builder(
///         DiskManagerBuilder::default().with_temp_file_factory(SpillwayTempFileFactory::new(plan)),
///     )
///     .build_arc()?;
/// # Ok(()) }
/// ```
///
/// The factory is the plan itself, seen as DataFusion's `TempFileFactory`: `new` allocates
/// nothing, so that a DataFusion plan that never spills pays for one allocation of Spillway's.
#[derive(Debug)]
#[repr(transparent)]
pub struct SpillwayTempFileFactory {
    plan: SpillwayPlan,
}

impl SpillwayTempFileFactory {
    /// A factory creating the files of `plan`, ready for `DiskManagerBuilder::with_temp_file_factory`.
    /// It shares `plan`'s allocation and reference count: the plan lives while either does.
    pub fn new(plan: Arc<SpillwayPlan>) -> Arc<SpillwayTempFileFactory> {
        // SAFETY: SpillwayTempFileFactory is a repr(transparent) SpillwayPlan, so it has the same
        // size and alignment, which is what Arc::from_raw asks of a pointer that
        // Arc::<SpillwayPlan>::into_raw returned; the drop of the last Arc drops the plan.
        unsafe { Arc::from_raw(Arc::into_raw(plan).cast::<SpillwayTempFileFactory>()) }
    }

    /// The plan the files go to.
    pub fn plan(&self) -> &SpillwayPlan {
        &self.plan
    }
}

impl TempFileFactory for SpillwayTempFileFactory {
    /// Spillway names and places the file itself (the plan's dir in one of its roots), so the
    /// description is not used.
    fn create_temp_file(&self, _description: &str) -> Result<Arc<dyn SpillFile>> {
        Ok(Arc::new(SpillwaySpillFile::create(
            self.plan.plan_for_file()?,
        )?))
    }
}
