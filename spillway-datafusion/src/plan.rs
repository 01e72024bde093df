//! A Spillway plan seen from Rust: one per DataFusion plan.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
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
///
/// A plan that never spills costs one allocation (this struct, with its lazy state inline, which
/// [`SpillwayTempFileFactory::new`](crate::SpillwayTempFileFactory::new) takes over as the
/// factory), no call into the library and no lock: the library is held as `&'static` (it is
/// never unloaded), and the plan's state in the library, which its files share, is made with the
/// first file.
#[derive(Debug)]
pub struct SpillwayPlan {
    library: &'static Spillway,
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
    plan: Option<Arc<LibraryPlan>>, // None: a lazy plan with no file yet
    released: bool,
}

/// The plan in the library, shared by the [`SpillwayPlan`] and its files: an owned one is released
/// when the last of them goes (files outlive the plan they came from), or by
/// [`SpillwayPlan::release`].
#[derive(Debug)]
pub(crate) struct LibraryPlan {
    library: &'static Spillway,
    pub(crate) handle: i64,
    owned: bool,
    released: AtomicBool,
}

impl LibraryPlan {
    fn new(library: &'static Spillway, handle: i64, owned: bool) -> Arc<LibraryPlan> {
        Arc::new(LibraryPlan {
            library,
            handle,
            owned,
            released: AtomicBool::new(false),
        })
    }

    pub(crate) fn library(&self) -> &'static Spillway {
        self.library
    }

    /// Releases the plan in the library once, if it is ours.
    fn release(&self) -> Result<(), SpillwayError> {
        if !self.owned || self.released.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.library.plan_release(self.handle)
    }
}

impl Drop for LibraryPlan {
    fn drop(&mut self) {
        // A failure here (a file or dir that could not be removed) has no one to report to;
        // call SpillwayPlan::release() first to see it.
        let _ = self.release();
    }
}

impl SpillwayPlan {
    fn new(library: &'static Spillway, kind: Kind, handle: Option<i64>) -> Arc<SpillwayPlan> {
        let owned = !matches!(kind, Kind::Adopted);
        Arc::new(SpillwayPlan {
            library,
            kind,
            state: Mutex::new(State {
                plan: handle.map(|h| LibraryPlan::new(library, h, owned)),
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
        Ok(SpillwayPlan::new(
            Spillway::forever(&library),
            Kind::Owned,
            Some(handle),
        ))
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
        Ok(SpillwayPlan::new(dirs.library, Kind::Owned, Some(handle)))
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
        SpillwayPlan::new(dirs.library, kind, None)
    }

    /// The plan `handle` another owner created and will release (a Spark task's `TaskSpill` plan).
    pub fn adopt(library: Arc<Spillway>, handle: i64) -> Arc<SpillwayPlan> {
        SpillwayPlan::new(Spillway::forever(&library), Kind::Adopted, Some(handle))
    }

    /// The plan's handle in libspillway; None for a lazy plan that has made no file yet.
    pub fn handle(&self) -> Option<i64> {
        self.state().plan.as_ref().map(|p| p.handle)
    }

    /// Whether Rust releases this plan (created here) or its owner does (adopted).
    pub fn is_owned(&self) -> bool {
        !matches!(self.kind, Kind::Adopted)
    }

    /// The bytes on disk of the plan's live spill files.
    pub fn used_disk_space(&self) -> Result<u64, SpillwayError> {
        match self.handle() {
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
        match &state.plan {
            Some(plan) => plan.release(),
            None => Ok(()),
        }
    }

    /// The plan in the library to create a file in, creating a lazy plan there now if it has none.
    pub(crate) fn plan_for_file(&self) -> Result<Arc<LibraryPlan>, SpillwayError> {
        let mut state = self.state();
        if state.released {
            return Err(SpillwayError::new(
                Status::InvalidHandle,
                "spillway: the plan was released",
            ));
        }
        if let Some(plan) = &state.plan {
            return Ok(Arc::clone(plan));
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
        Ok(Arc::clone(state.plan.insert(LibraryPlan::new(
            self.library,
            h,
            true,
        ))))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state stays consistent across a panic elsewhere: nothing panics while holding it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Local dirs checked once by the library (absolute, valid UTF-8), for
/// [`SpillwayPlan::create_in`] and [`SpillwayPlan::lazy_in`]. Forgotten when dropped; plans created in them are not affected.
#[derive(Debug)]
pub struct SpillwayLocalDirs {
    library: &'static Spillway,
    handle: i64,
}

impl SpillwayLocalDirs {
    /// Registers `dirs` (one per disk, like Spark's local dirs). No filesystem call.
    pub fn register(
        library: Arc<Spillway>,
        dirs: &[PathBuf],
    ) -> Result<SpillwayLocalDirs, SpillwayError> {
        let handle = library.local_dirs_register(dirs)?;
        Ok(SpillwayLocalDirs {
            library: Spillway::forever(&library),
            handle,
        })
    }
}

impl Drop for SpillwayLocalDirs {
    fn drop(&mut self) {
        // Cannot fail for a handle registered here and released once.
        let _ = self.library.local_dirs_release(self.handle);
    }
}
