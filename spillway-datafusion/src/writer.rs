//! DataFusion's `SpillWriter` over `spillway_spill_file_write`.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use datafusion_common::{DataFusionError, Result};
use datafusion_execution::spill_file::SpillWriter;

use crate::error::to_io_error;
use crate::handle::FileHandle;

/// What the writer gathers of DataFusion's small writes before one call into the library. Arrow's
/// IPC writer makes many small writes (a message's length and header, padding, small buffers);
/// one C call for each would cost more than copying them.
pub const WRITE_BUFFER_BYTES: usize = 64 << 10;

/// Writes at least this large go to the library as they are, without a copy: a C call costs
/// about what copying 2 KiB does, and the library copies the bytes once anyway, into the chunk
/// it frames and checks.
const WRITE_THROUGH_BYTES: usize = 8 << 10;

/// Gathers DataFusion's small writes and hands large ones (Arrow's column buffers) straight to the
/// library. A piece is written whole or not at all; after a failure the writer takes nothing
/// more (what the file holds is no longer what DataFusion wrote).
pub(crate) struct SpillwayWriter {
    file: Arc<FileHandle>,
    buffer: Vec<u8>,
    failed: bool,
}

impl SpillwayWriter {
    pub(crate) fn new(file: Arc<FileHandle>) -> Self {
        SpillwayWriter {
            file,
            buffer: Vec::new(),
            failed: false,
        }
    }

    fn usable(&self) -> Result<()> {
        if self.failed {
            return Err(DataFusionError::Execution(
                "spillway: an earlier write to this spill file failed".to_string(),
            ));
        }
        Ok(())
    }

    fn write_through(&mut self, bytes: &[u8]) -> Result<()> {
        self.usable()?;
        if bytes.is_empty() {
            return Ok(());
        }
        self.file
            .plan
            .library()
            .spill_file_write(self.file.handle, bytes)
            .map_err(|e| {
                self.failed = true;
                e.into()
            })
    }

    fn drain(&mut self) -> Result<()> {
        let buffer = std::mem::take(&mut self.buffer);
        let result = self.write_through(&buffer);
        self.buffer = buffer;
        self.buffer.clear();
        result
    }
}

impl io::Write for SpillwayWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.usable().map_err(to_io_error)?;
        if buf.len() >= WRITE_THROUGH_BYTES || self.buffer.len() + buf.len() > WRITE_BUFFER_BYTES {
            self.drain().map_err(to_io_error)?;
        }
        if buf.len() >= WRITE_THROUGH_BYTES {
            self.write_through(buf).map_err(to_io_error)?;
        } else {
            if self.buffer.capacity() == 0 {
                self.buffer.reserve_exact(WRITE_BUFFER_BYTES);
            }
            self.buffer.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.drain().map_err(to_io_error)
    }
}

impl SpillWriter for SpillwayWriter {
    /// Writes what is buffered and ends the file's writing, so that it can be read.
    fn finish(&mut self) -> Result<()> {
        self.drain()?;
        self.file.plan.library().spill_file_finish(self.file.handle)?;
        self.file.finished.store(true, Ordering::Release);
        Ok(())
    }
}
