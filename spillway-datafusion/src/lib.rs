//! DataFusion 55 spill files through Spillway.
//!
//! [`SpillwayTempFileFactory`] is a `datafusion_execution::spill_file::TempFileFactory` (give it
//! to `DiskManagerBuilder::with_temp_file_factory`) whose files are files of a Spillway plan,
//! created, written, read and released through libspillway's C ABI (`include/spillway.h`). So a
//! DataFusion plan in a Spark executor spills as the executor's JVM plans do: no dir until the
//! first spill file, and then only in the root it lands in; the plan's and the executor's limits
//! (a refused write is DataFusion's `ResourcesExhausted`, naming the Spark setting); failing roots
//! skipped; the process's compression and encryption, transparent to DataFusion; everything
//! removed when the plan is released, and orphans of killed executors swept.
//!
//! The library is found, not linked: see [`Spillway`]. In an executor, [`Spillway::loaded`] binds
//! the copy the JVM loaded, and [`SpillwayPlan::adopt`] takes the plan a Spark task already has;
//! elsewhere, [`Spillway::load`] (or [`Spillway::from_env`] with `SPILLWAY_LIBRARY`). Plans made
//! here are released on drop: [`SpillwayPlan::lazy_in`] makes one the library sees only from its
//! first spill file on, so that a DataFusion plan that never spills costs no call into the library.

mod error;
mod factory;
mod file;
mod handle;
mod library;
mod plan;
mod reader;
mod writer;

pub use error::{SpillwayError, Status};
pub use factory::SpillwayTempFileFactory;
pub use file::SpillwaySpillFile;
pub use library::{Spillway, SpillwayStats, StatKind, ABI_VERSION, LIBRARY_ENV};
pub use plan::{SpillwayLocalDirs, SpillwayPlan, UNLIMITED};
pub use reader::READ_CHUNK_BYTES;
pub use writer::WRITE_BUFFER_BYTES;
