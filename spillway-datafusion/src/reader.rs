//! `SpillFile::read_stream` over a Spillway reader.

use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use datafusion_common::{DataFusionError, Result};
use futures::{Stream, StreamExt};

use crate::error::SpillwayError;
use crate::handle::FileHandle;

/// The size of the chunks the stream yields (the last may be shorter; a file framed in chunks
/// larger than this, which the library is not configured for by default, may give up to 64 bytes
/// more). DataFusion's own files are read 128 KiB at a time; larger chunks halve nothing there but
/// here save C calls and blocking-pool hand-offs.
pub const READ_CHUNK_BYTES: usize = 1 << 20;

/// Room past READ_CHUNK_BYTES for a chunk's integrity check and the next chunk's header: with it,
/// the library reads, verifies and decodes each of the file's chunks (a power of two up to 1 MiB)
/// straight into the buffer DataFusion gets, with no copy through a buffer of its own.
const READ_SLACK_BYTES: usize = 64;

/// An open reader of a finished file; closed when dropped (it keeps the file alive until then).
struct Reader {
    file: Arc<FileHandle>,
    handle: i64,
    at_end: bool,
}

impl Drop for Reader {
    fn drop(&mut self) {
        // Fails only if the plan went first, which closed the reader.
        let _ = self.file.plan.library().reader_close(self.handle);
    }
}

impl Reader {
    /// The next READ_CHUNK_BYTES of the file (see there), or None at its end.
    fn next_chunk(&mut self) -> std::result::Result<Option<Bytes>, SpillwayError> {
        // Not zeroed: the library writes what it returns, and zeroing 1 MiB per chunk would show.
        let mut chunk = Vec::with_capacity(READ_CHUNK_BYTES + READ_SLACK_BYTES);
        while !self.at_end && chunk.len() < READ_CHUNK_BYTES {
            let spare = chunk.spare_capacity_mut();
            match self.file.plan.library().reader_read(self.handle, spare)? {
                // SAFETY: the library initialized the first n bytes of the spare capacity.
                Some(n) => unsafe { chunk.set_len(chunk.len() + n) },
                None => self.at_end = true,
            }
        }
        if chunk.is_empty() {
            return Ok(None);
        }
        Ok(Some(Bytes::from(chunk)))
    }
}

/// Opens a reader now (an unfinished or released file fails here, not at the first poll) and
/// streams the file through it. Each chunk is read in tokio's blocking pool when there is a
/// runtime, as DataFusion reads its own files (`tokio::fs`): a read never stalls a worker thread,
/// and no thread is held between chunks.
pub(crate) fn read_stream(
    file: Arc<FileHandle>,
) -> Result<Pin<Box<dyn Stream<Item = Result<Bytes>> + Send>>> {
    let handle = file.plan.library().reader_open(file.handle)?;
    let reader = Reader {
        file,
        handle,
        at_end: false,
    };
    let chunks = futures::stream::unfold(Some(reader), |reader| async move {
        let mut reader = reader?; // None: the stream ended, or failed
        let (reader, chunk) = blocking(move || {
            let chunk = reader.next_chunk();
            (reader, chunk)
        })
        .await?;
        match chunk {
            Ok(Some(bytes)) => Some((Ok(bytes), Some(reader))),
            Ok(None) => None,
            Err(e) => Some((Err(DataFusionError::from(e)), None)),
        }
    });
    // Fused: polled again after its end, it says None again (unfold would panic).
    Ok(Box::pin(chunks.fuse()))
}

/// Runs f in the blocking pool of the current tokio runtime, or right here without one. None if
/// the runtime dropped the task (it is shutting down); what f owned is dropped with it.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => runtime.spawn_blocking(f).await.ok(),
        Err(_) => Some(f()),
    }
}
