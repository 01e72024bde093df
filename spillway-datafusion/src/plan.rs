//! A Spillway plan seen from Rust: one per DataFusion plan.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::SpillwayError;
use crate::library::Spillway;

/// No executor-wide limit (`plan_create`'s `max_executor`).
pub const UNLIMITED: i64 = i64::MAX;

/// A Spillway plan: the spill files of one DataFusion plan, under its limits.
///
/// A plan made by [`SpillwayPlan::create`] is owned: it is released (its files and dirs removed)
/// when the last reference to it goes, or by [`SpillwayPlan::release`]. A plan made by
/// [`SpillwayPlan::adopt`] belongs to someone else (a JVM task that created it and handed its
/// handle over): Rust never releases it, and once its owner has, calls on it fail with
/// `InvalidHandle` (its files are already gone).
#[derive(Debug)]
pub struct SpillwayPlan {
    library: Arc<Spillway>,
    handle: i64,
    owned: bool,
    released: AtomicBool,
}

impl SpillwayPlan {
    /// Creates a plan that may spill up to `max` bytes (`spark.spillway.maxTempDirectorySize`)
    /// under `dirs` (one dir per disk, like Spark's local dirs), and never take the bytes of all
    /// plans of the process past `max_executor` (`spark.spillway.maxExecutorTempDirectorySize`;
    /// [`UNLIMITED`] for none). No filesystem call: the plan's dir in a root is made with the
    /// first file that lands there.
    pub fn create(
        library: Arc<Spillway>,
        dirs: &[PathBuf],
        max: i64,
        max_executor: i64,
    ) -> Result<Arc<SpillwayPlan>, SpillwayError> {
        let handle = library.plan_create(dirs, max, max_executor)?;
        Ok(Arc::new(SpillwayPlan { library, handle, owned: true, released: AtomicBool::new(false) }))
    }

    /// [`SpillwayPlan::create`] in dirs registered once: no string is read and nothing allocated
    /// in the library but the plan, for an engine that makes a plan per query fragment.
    pub fn create_in(dirs: &SpillwayLocalDirs, max: i64, max_executor: i64) -> Result<Arc<SpillwayPlan>, SpillwayError> {
        let handle = dirs.library.plan_create_in(dirs.handle, max, max_executor)?;
        Ok(Arc::new(SpillwayPlan {
            library: Arc::clone(&dirs.library),
            handle,
            owned: true,
            released: AtomicBool::new(false),
        }))
    }

    /// The plan `handle` another owner created and will release (a Spark task's `TaskSpill` plan).
    pub fn adopt(library: Arc<Spillway>, handle: i64) -> Arc<SpillwayPlan> {
        Arc::new(SpillwayPlan { library, handle, owned: false, released: AtomicBool::new(false) })
    }

    /// The plan's handle in libspillway.
    pub fn handle(&self) -> i64 {
        self.handle
    }

    /// Whether Rust releases this plan (created here) or its owner does (adopted).
    pub fn is_owned(&self) -> bool {
        self.owned
    }

    /// The bytes in the plan's live spill files.
    pub fn used_disk_space(&self) -> Result<u64, SpillwayError> {
        self.library.plan_used_disk_space(self.handle).map(|n| n.max(0) as u64)
    }

    /// Releases an owned plan now, removing its files and dirs; files still referenced then fail
    /// their next call. Done once: a later call, or the drop, does nothing. An adopted plan is
    /// left to its owner.
    pub fn release(&self) -> Result<(), SpillwayError> {
        if !self.owned || self.released.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.library.plan_release(self.handle)
    }

    pub(crate) fn library(&self) -> &Spillway {
        &self.library
    }
}

impl Drop for SpillwayPlan {
    fn drop(&mut self) {
        // A failure here (a file or dir that could not be removed) has no one to report to;
        // call release() first to see it.
        let _ = self.release();
    }
}

/// Local dirs checked once by the library (absolute, valid UTF-8), for
/// [`SpillwayPlan::create_in`]. Forgotten when dropped; plans created in them are not affected.
#[derive(Debug)]
pub struct SpillwayLocalDirs {
    library: Arc<Spillway>,
    handle: i64,
}

impl SpillwayLocalDirs {
    /// Registers `dirs` (one per disk, like Spark's local dirs). No filesystem call.
    pub fn register(library: Arc<Spillway>, dirs: &[PathBuf]) -> Result<SpillwayLocalDirs, SpillwayError> {
        let handle = library.local_dirs_register(dirs)?;
        Ok(SpillwayLocalDirs { library, handle })
    }
}

impl Drop for SpillwayLocalDirs {
    fn drop(&mut self) {
        // Cannot fail for a handle registered here and released once.
        let _ = self.library.local_dirs_release(self.handle);
    }
}
