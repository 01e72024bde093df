//! A spill file's handle in the library: what the file, its writer and its readers share, so that
//! each depends on it and none on another.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::error::SpillwayError;
use crate::plan::LibraryPlan;

/// The file's handle, released when the file, its writer and its readers are all gone.
#[derive(Debug)]
pub(crate) struct FileHandle {
    pub(crate) plan: Arc<LibraryPlan>,
    pub(crate) handle: i64,
    /// Set once a writer finished the file: only then can it be read.
    pub(crate) finished: AtomicBool,
}

impl FileHandle {
    /// Creates a file in the plan (its dir in the chosen root on the plan's first file).
    pub(crate) fn create(plan: Arc<LibraryPlan>) -> Result<Arc<Self>, SpillwayError> {
        let handle = plan.library().spill_file_create(plan.handle)?;
        Ok(Arc::new(FileHandle {
            plan,
            handle,
            finished: AtomicBool::new(false),
        }))
    }
}

impl Drop for FileHandle {
    fn drop(&mut self) {
        // Fails only if the plan went first (released by its owner): the file went with it.
        let _ = self.plan.library().spill_file_release(self.handle);
    }
}
