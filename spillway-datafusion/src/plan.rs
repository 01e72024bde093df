//! A Spillway plan seen from Rust: one per DataFusion plan.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{SpillwayError, Status};
use crate::library::Spillway;

/// No executor-wide limit (`plan_create`'s `max_executor`).
pub const UNLIMITED: i64 = i64::MAX;

/// A Spillway plan: the spill files of one DataFusion plan, under its limits.
///
/// A plan made by [`SpillwayPlan::create`], [`SpillwayPlan::create_in`] or
/// [`SpillwayPlan::lazy_in`] is owned: it is released (its files and dirs removed) when the last
/// reference to it goes, or by [`SpillwayPlan::release`]. A plan made by [`SpillwayPlan::adopt`]
/// belongs to someone else (a JVM task that created it and handed its handle over): Rust never
/// releases it, and once its owner has, calls on it fail with `InvalidHandle` (its files are
/// already gone).
#[derive(Debug)]
pub struct SpillwayPlan {
    library: Arc<Spillway>,
    kind: Kind,
    state: Mutex<State>,
}

#[derive(Debug)]
enum Kind {
    /// Created here, released here.
    Owned,
    /// Created here at its first file (if it has one), released here.
    Lazy {
        dirs: Arc<SpillwayLocalDirs>,
        max: i64,
        max_executor: i64,
    },
    /// Someone else's.
    Adopted,
}

#[derive(Debug)]
struct State {
    handle: Option<i64>, // None: a lazy plan with no file yet
    released: bool,
}

impl SpillwayPlan {
    fn new(library: Arc<Spillway>, kind: Kind, handle: Option<i64>) -> Arc<SpillwayPlan> {
        Arc::new(SpillwayPlan {
            library,
            kind,
            state: Mutex::new(State {
                handle,
                released: false,
            }),
        })
    }

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
        Ok(SpillwayPlan::new(library, Kind::Owned, Some(handle)))
    }

    /// [`SpillwayPlan::create`] in dirs registered once: no string is read per plan.
    pub fn create_in(
        dirs: &SpillwayLocalDirs,
        max: i64,
        max_executor: i64,
    ) -> Result<Arc<SpillwayPlan>, SpillwayError> {
        let handle = dirs
            .library
            .plan_create_in(dirs.handle, max, max_executor)?;
        Ok(SpillwayPlan::new(
            Arc::clone(&dirs.library),
            Kind::Owned,
            Some(handle),
        ))
    }

    /// A plan created in the library only when DataFusion asks for its first spill file: a
    /// DataFusion plan that never spills makes no call into the library at all (creating and
    /// releasing a plan there are two calls from C into Go). Its limits are fixed now, and the
    /// executor's budget is shared from its first file on, which is when it first holds bytes.
    pub fn lazy_in(
        dirs: &Arc<SpillwayLocalDirs>,
        max: i64,
        max_executor: i64,
    ) -> Arc<SpillwayPlan> {
        let kind = Kind::Lazy {
            dirs: Arc::clone(dirs),
            max,
            max_executor,
        };
        SpillwayPlan::new(Arc::clone(&dirs.library), kind, None)
    }

    /// The plan `handle` another owner created and will release (a Spark task's `TaskSpill` plan).
    pub fn adopt(library: Arc<Spillway>, handle: i64) -> Arc<SpillwayPlan> {
        SpillwayPlan::new(library, Kind::Adopted, Some(handle))
    }

    /// The plan's handle in libspillway; None for a lazy plan that has made no file yet.
    pub fn handle(&self) -> Option<i64> {
        self.state().handle
    }

    /// Whether Rust releases this plan (created here) or its owner does (adopted).
    pub fn is_owned(&self) -> bool {
        !matches!(self.kind, Kind::Adopted)
    }

    /// The bytes on disk of the plan's live spill files.
    pub fn used_disk_space(&self) -> Result<u64, SpillwayError> {
        match self.state().handle {
            None => Ok(0),
            Some(h) => self
                .library
                .plan_used_disk_space(h)
                .map(|n| n.max(0) as u64),
        }
    }

    /// Releases an owned plan now, removing its files and dirs; files still referenced then fail
    /// their next call. Done once: a later call, or the drop, does nothing. An adopted plan is
    /// left to its owner.
    pub fn release(&self) -> Result<(), SpillwayError> {
        let mut state = self.state();
        if !self.is_owned() || std::mem::replace(&mut state.released, true) {
            return Ok(());
        }
        match state.handle {
            Some(h) => self.library.plan_release(h),
            None => Ok(()),
        }
    }

    /// The handle to create a file in, creating a lazy plan in the library now if it has none.
    pub(crate) fn handle_for_file(&self) -> Result<i64, SpillwayError> {
        let mut state = self.state();
        if state.released {
            return Err(SpillwayError::new(
                Status::InvalidHandle,
                "spillway: the plan was released",
            ));
        }
        if let Some(h) = state.handle {
            return Ok(h);
        }
        let Kind::Lazy {
            dirs,
            max,
            max_executor,
        } = &self.kind
        else {
            return Err(SpillwayError::new(
                Status::Internal,
                "spillway: a plan without a handle",
            ));
        };
        let h = self
            .library
            .plan_create_in(dirs.handle, *max, *max_executor)?;
        state.handle = Some(h);
        Ok(h)
    }

    pub(crate) fn library(&self) -> &Spillway {
        &self.library
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state stays consistent across a panic elsewhere: nothing panics while holding it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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
/// [`SpillwayPlan::create_in`] and [`SpillwayPlan::lazy_in`]. Forgotten when dropped; plans created in them are not affected.
#[derive(Debug)]
pub struct SpillwayLocalDirs {
    library: Arc<Spillway>,
    handle: i64,
}

impl SpillwayLocalDirs {
    /// Registers `dirs` (one per disk, like Spark's local dirs). No filesystem call.
    pub fn register(
        library: Arc<Spillway>,
        dirs: &[PathBuf],
    ) -> Result<SpillwayLocalDirs, SpillwayError> {
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
