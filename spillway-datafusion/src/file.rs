//! One Spillway spill file as DataFusion's `SpillFile`.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use datafusion_common::Result;
use datafusion_execution::spill_file::{SpillFile, SpillWriter};
use futures::Stream;

use crate::error::{SpillwayError, Status};
use crate::handle::FileHandle;
use crate::plan::LibraryPlan;
use crate::reader::read_stream;
use crate::writer::SpillwayWriter;

/// A spill file in Spillway's framed format: what DataFusion writes is compressed and sealed as
/// the process's format says, and read back as it was written.
#[derive(Debug)]
pub struct SpillwaySpillFile {
    handle: Arc<FileHandle>,
    path: PathBuf,
}

impl SpillwaySpillFile {
    pub(crate) fn create(plan: Arc<LibraryPlan>) -> std::result::Result<Self, SpillwayError> {
        let handle = FileHandle::create(plan)?;
        let path = handle.plan.library().spill_file_path(handle.handle)?;
        Ok(SpillwaySpillFile { handle, path })
    }

    /// The file's size on disk, after compression and framing.
    pub fn stored_size(&self) -> Option<u64> {
        self.sizes().map(|(_, stored)| stored)
    }

    fn sizes(&self) -> Option<(u64, u64)> {
        let (logical, stored) = self
            .handle
            .plan
            .library()
            .spill_file_size(self.handle.handle)
            .ok()?;
        Some((logical.max(0) as u64, stored.max(0) as u64))
    }
}

impl SpillFile for SpillwaySpillFile {
    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }

    /// The bytes written (what DataFusion wrote, before compression); None once the plan is gone.
    fn size(&self) -> Option<u64> {
        self.sizes().map(|(logical, _)| logical)
    }

    /// The file's bytes as written, in chunks of about 1 MiB. The file must be finished: its
    /// chunks are checked (and compressed, sealed) whole, so a file still being written, as
    /// DataFusion's spilling `RepartitionExec` reads its spill pool's files, fails here.
    fn read_stream(&self) -> Result<Pin<Box<dyn Stream<Item = Result<Bytes>> + Send>>> {
        if !self.handle.finished.load(Ordering::Acquire) {
            return Err(SpillwayError::new(
                Status::InvalidHandle,
                format!(
                    "spillway: {} is still being written, and a Spillway spill file can be read \
                     only once its writer finished (its chunks are checked, compressed and \
                     sealed whole). DataFusion's spilling RepartitionExec reads its spill files \
                     while writing them, which SpillwayTempFileFactory does not support: give \
                     plans whose RepartitionExec may spill DataFusion's own disk manager",
                    self.path.display()
                ),
            )
            .into());
        }
        read_stream(Arc::clone(&self.handle))
    }

    fn open_writer(&self) -> Result<Box<dyn SpillWriter>> {
        Ok(Box::new(SpillwayWriter::new(Arc::clone(&self.handle))))
    }
}
