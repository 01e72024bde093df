//! Errors of the C ABI, and how they become DataFusion's.

use std::fmt;

use datafusion_common::DataFusionError;

/// The status a C ABI call returns (`SPILLWAY_*` in `include/spillway.h`); 0 is success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// A filesystem failure; the message names the path and the OS cause.
    Io,
    /// A bad argument or configuration; nothing was changed.
    InvalidArgument,
    /// An unknown or released handle, or one used out of order (e.g. read before finish).
    InvalidHandle,
    /// A write refused by the plan's or the executor's spill limit; nothing was written.
    LimitExceeded,
    /// A failure inside the library.
    Internal,
    /// A status this crate does not know (a newer library).
    Unknown(i32),
}

impl Status {
    pub(crate) fn from_code(code: i32) -> Status {
        match code {
            1 => Status::Io,
            2 => Status::InvalidArgument,
            3 => Status::InvalidHandle,
            4 => Status::LimitExceeded,
            5 => Status::Internal,
            other => Status::Unknown(other),
        }
    }
}

/// A failed call into libspillway (or a failure to find it): the status and the library's message.
#[derive(Debug, Clone)]
pub struct SpillwayError {
    pub status: Status,
    pub message: String,
}

impl SpillwayError {
    pub(crate) fn new(status: Status, message: impl Into<String>) -> Self {
        SpillwayError {
            status,
            message: message.into(),
        }
    }
}

impl fmt::Display for SpillwayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SpillwayError {}

/// A refused write is DataFusion's resources-exhausted error, with the library's message, which
/// names the Spark setting to raise (`spark.spillway.maxTempDirectorySize` or
/// `spark.spillway.maxExecutorTempDirectorySize`); a filesystem failure is an I/O error; the rest
/// are external errors carrying the library's message.
impl From<SpillwayError> for DataFusionError {
    fn from(e: SpillwayError) -> Self {
        match e.status {
            Status::LimitExceeded => DataFusionError::ResourcesExhausted(e.message),
            Status::Io => DataFusionError::IoError(std::io::Error::other(e)),
            _ => DataFusionError::External(Box::new(e)),
        }
    }
}

/// The `std::io::Error` a `SpillWriter` must return, keeping the DataFusion error inside it
/// reachable: `io::Error::source` yields its payload's *source*, so the payload is this wrapper
/// whose source is the DataFusion error, and `DataFusionError::find_root` on the error DataFusion
/// finally returns finds `ResourcesExhausted` under Arrow's I/O error.
#[derive(Debug)]
pub(crate) struct WriteFailure(pub DataFusionError);

impl fmt::Display for WriteFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for WriteFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

pub(crate) fn to_io_error(e: DataFusionError) -> std::io::Error {
    std::io::Error::other(WriteFailure(e))
}
