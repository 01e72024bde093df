//! Finding libspillway in the process, or loading it, and binding its C ABI.
//!
//! libspillway carries a Go runtime, and a process must never hold two: in a Spark executor the
//! JVM has already loaded the library (`System.load`, often from a copy it extracted and then
//! unlinked), so [`Spillway::loaded`] binds the symbols of that very copy, found among the objects
//! the process has loaded (`dl_iterate_phdr`) and opened again with `RTLD_NOLOAD`, which only
//! returns an object already there. [`Spillway::load`] is for a process without a JVM (tests,
//! benchmarks, a pure native engine): it too returns the loaded copy if there is one, and only
//! otherwise loads the file it is given. Nothing here ever unloads the library: a Go runtime cannot
//! be unloaded.

use std::ffi::{c_char, c_int, c_void, CStr, CString, OsStr};
use std::mem::{ManuallyDrop, MaybeUninit};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use libloading::os::unix::{Library, RTLD_LAZY};

use crate::error::{SpillwayError, Status};

/// The version of the C ABI this crate was written against (`SPILLWAY_ABI_VERSION`).
pub const ABI_VERSION: i32 = 3;

/// The environment variable [`Spillway::from_env`] reads: the path of libspillway.so to load when
/// the process has none loaded yet.
pub const LIBRARY_ENV: &str = "SPILLWAY_LIBRARY";

/// glibc's RTLD_NOLOAD: dlopen returns the object only if it is already loaded.
const RTLD_NOLOAD: c_int = 0x4;

/// The symbol that tells libspillway apart from every other loaded object.
const VERSION_SYMBOL: &[u8] = b"spillway_abi_version\0";

/// The caller-owned error buffer of every call (`spillway_error`).
#[repr(C)]
pub(crate) struct RawError {
    message: [c_char; 1024],
}

type VersionFn = unsafe extern "C" fn() -> i32;
type PlanCreateFn =
    unsafe extern "C" fn(*const *const c_char, i32, i64, i64, *mut i64, *mut RawError) -> i32;
type HandleFn = unsafe extern "C" fn(i64, *mut RawError) -> i32;
type HandleOutFn = unsafe extern "C" fn(i64, *mut i64, *mut RawError) -> i32;
type FileWriteFn = unsafe extern "C" fn(i64, *const u8, i64, *mut RawError) -> i32;
type FileSizeFn = unsafe extern "C" fn(i64, *mut i64, *mut i64, *mut RawError) -> i32;
type FilePathFn = unsafe extern "C" fn(i64, *mut c_char, i64, *mut i64, *mut RawError) -> i32;
type ReaderReadFn = unsafe extern "C" fn(i64, *mut u8, i64, *mut i64, *mut RawError) -> i32;
type DirsRegisterFn =
    unsafe extern "C" fn(*const *const c_char, i32, *mut i64, *mut RawError) -> i32;
type PlanCreateInFn = unsafe extern "C" fn(i64, i64, i64, *mut i64, *mut RawError) -> i32;
type ConfigureFormatFn = unsafe extern "C" fn(*const c_char, i32, i32, i32, *mut RawError) -> i32;
type StatsCountFn = unsafe extern "C" fn(*mut i32, *mut RawError) -> i32;
type StatsDescribeFn =
    unsafe extern "C" fn(i32, *mut *const c_char, *mut i32, *mut RawError) -> i32;
type StatsReadFn = unsafe extern "C" fn(*mut i64, i32, *mut RawError) -> i32;
type StatsValueFn = unsafe extern "C" fn(*const c_char, *mut i64, *mut RawError) -> i32;

/// How a counter behaves (`SPILLWAY_STAT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatKind {
    /// It only grows while the process lives: report its rate.
    Count,
    /// It goes up and down: report it as it is.
    Level,
    /// A kind this crate does not know (a newer library).
    Unknown(i32),
}

impl StatKind {
    fn from_code(code: i32) -> StatKind {
        match code {
            1 => StatKind::Count,
            2 => StatKind::Level,
            other => StatKind::Unknown(other),
        }
    }
}

/// One read of the process's counters (what its plans, the JVM's and native ones, hold and have
/// done), by name: the library owns the list and its names (the JVM's metric names, e.g.
/// `livePlans`, `bytesSpilled`), so a counter is found by its name, never by a position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillwayStats {
    counters: Vec<(&'static str, StatKind, i64)>,
}

impl SpillwayStats {
    /// The value of the counter named `name`, or None if the library has none of that name.
    pub fn get(&self, name: &str) -> Option<i64> {
        self.counters
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|&(_, _, v)| v)
    }

    /// The kind of the counter named `name`, or None as for [`SpillwayStats::get`].
    pub fn kind(&self, name: &str) -> Option<StatKind> {
        self.counters
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|&(_, k, _)| k)
    }

    /// Every counter as (name, kind, value), in the library's order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, StatKind, i64)> + '_ {
        self.counters.iter().copied()
    }
}

// The C ABI's functions this crate binds, each declared once here: its field (the symbol without
// `spillway_`) and its type. `Functions` and its binding are made from this list, and a test
// checks it against include/spillway.h, function for function and type for type.
macro_rules! c_abi {
    ($($field:ident: $ty:ty,)*) => {
        /// The C ABI's entry points, copied out of the library (which is never unloaded).
        struct Functions {
            $($field: $ty,)*
        }

        /// Binds every function of the list, or names the first symbol the library lacks.
        fn bind_functions(
            library: &Library,
            missing: impl Fn(&str, libloading::Error) -> SpillwayError,
        ) -> Result<Functions, SpillwayError> {
            Ok(Functions {
                $($field: {
                    let name = concat!("spillway_", stringify!($field));
                    // SAFETY: the symbol's type is the one include/spillway.h declares for it
                    // (checked by the tests below).
                    *unsafe { library.get::<$ty>(concat!("spillway_", stringify!($field), "\0").as_bytes()) }
                        .map_err(|e| missing(name, e))?
                },)*
            })
        }

        /// Each bound symbol and the name of its Rust type, for the test against the header.
        #[cfg(test)]
        const BOUND_FUNCTIONS: &[(&str, fn() -> &'static str)] = &[
            $((concat!("spillway_", stringify!($field)), || std::any::type_name::<$ty>()),)*
        ];
    };
}

// spillway_abi_version, a VersionFn, is bound alone first (in `bind`): a library of another version
// is told so, not that it lacks a function.
c_abi! {
    configure_format: ConfigureFormatFn,
    stats_count: StatsCountFn,
    stats_describe: StatsDescribeFn,
    stats_read: StatsReadFn,
    stats_value: StatsValueFn,
    local_dirs_register: DirsRegisterFn,
    local_dirs_release: HandleFn,
    plan_create_in: PlanCreateInFn,
    plan_create: PlanCreateFn,
    plan_release: HandleFn,
    plan_used_disk_space: HandleOutFn,
    spill_file_create: HandleOutFn,
    spill_file_write: FileWriteFn,
    spill_file_finish: HandleFn,
    spill_file_size: FileSizeFn,
    spill_file_path: FilePathFn,
    spill_file_release: HandleFn,
    reader_open: HandleOutFn,
    reader_read: ReaderReadFn,
    reader_close: HandleFn,
}

/// libspillway, bound. Cheap to share (`Arc`); every plan and file keeps one.
pub struct Spillway {
    fns: Functions,
    // The counters' names and kinds, asked once: they are fixed while the library is loaded, and
    // their strings are the library's, which is never unloaded.
    counters: Vec<(&'static str, StatKind)>,
    path: PathBuf,
    // Never dlclose'd: unloading a Go runtime would pull its code from under its own threads.
    _library: ManuallyDrop<Library>,
}

impl std::fmt::Debug for Spillway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spillway")
            .field("path", &self.path)
            .finish()
    }
}

/// The bound library, once found or loaded: every later call returns the same one, and it is
/// never dropped, so plans and files hold it as a `&'static` (no reference count per plan).
static BOUND: OnceLock<Arc<Spillway>> = OnceLock::new();

/// Held while binding, so that two threads binding at once find or load the library once.
static BINDING: Mutex<()> = Mutex::new(());

impl Spillway {
    /// The libspillway the process has already loaded (in an executor, the JVM's), or an error
    /// saying none is loaded.
    pub fn loaded() -> Result<Arc<Spillway>, SpillwayError> {
        bind_once(|| {
            find_loaded()?.ok_or_else(|| {
                SpillwayError::new(
                    Status::InvalidArgument,
                    "libspillway is not loaded in this process: load it first (in Spark the \
                     spillway plugin does), or use Spillway::load with its path",
                )
            })
        })
    }

    /// The libspillway the process has already loaded if there is one (never a second copy: two
    /// Go runtimes in one process would fight over signals and threads), else the library at
    /// `path`, loaded now.
    pub fn load(path: impl AsRef<Path>) -> Result<Arc<Spillway>, SpillwayError> {
        bind_once(|| match find_loaded()? {
            Some(s) => Ok(s),
            None => open(path.as_ref(), RTLD_LAZY),
        })
    }

    /// `library` for the rest of the process: the one bound copy, which is never dropped.
    pub(crate) fn forever(library: &Arc<Spillway>) -> &'static Spillway {
        match BOUND.get() {
            Some(bound) if Arc::ptr_eq(bound, library) => bound,
            // Every Spillway is made by bind_once, which keeps it in BOUND for good.
            _ => unreachable!("a Spillway that is not the bound library"),
        }
    }

    /// [`Spillway::load`] of the path in `$SPILLWAY_LIBRARY` if it is set, else
    /// [`Spillway::loaded`].
    pub fn from_env() -> Result<Arc<Spillway>, SpillwayError> {
        match std::env::var_os(LIBRARY_ENV) {
            Some(path) if !path.is_empty() => Spillway::load(PathBuf::from(path)),
            _ => Spillway::loaded(),
        }
    }

    /// The file the library was loaded from, as the dynamic loader names it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    // The calls below are the C ABI, one by one, with the status and message made a Result.

    pub(crate) fn plan_create(
        &self,
        dirs: &[PathBuf],
        max: i64,
        max_executor: i64,
    ) -> Result<i64, SpillwayError> {
        let (_owned, ptrs, n) = c_strings(dirs)?;
        let mut plan = 0i64;
        // SAFETY: ptrs holds n valid C strings that outlive the call; plan and err are writable.
        call(|err| unsafe {
            (self.fns.plan_create)(ptrs.as_ptr(), n, max, max_executor, &mut plan, err)
        })?;
        Ok(plan)
    }

    pub(crate) fn local_dirs_register(&self, dirs: &[PathBuf]) -> Result<i64, SpillwayError> {
        let (_owned, ptrs, n) = c_strings(dirs)?;
        let mut handle = 0i64;
        // SAFETY: ptrs holds n valid C strings that outlive the call; handle and err are writable.
        call(|err| unsafe { (self.fns.local_dirs_register)(ptrs.as_ptr(), n, &mut handle, err) })?;
        Ok(handle)
    }

    pub(crate) fn local_dirs_release(&self, dirs: i64) -> Result<(), SpillwayError> {
        // SAFETY: a plain handle; err is writable.
        call(|err| unsafe { (self.fns.local_dirs_release)(dirs, err) })
    }

    pub(crate) fn plan_create_in(
        &self,
        dirs: i64,
        max: i64,
        max_executor: i64,
    ) -> Result<i64, SpillwayError> {
        let mut plan = 0i64;
        // SAFETY: plan and err are writable.
        call(|err| unsafe { (self.fns.plan_create_in)(dirs, max, max_executor, &mut plan, err) })?;
        Ok(plan)
    }

    /// Sets the format of the framed files of plans created from now on, process-wide (in an
    /// executor the JVM does this from Spark's config; call it only in a process without a JVM):
    /// `codec` "none", "lz4" or "zstd", `zstd_level` 1 to 22 (for zstd), and with `encrypt`
    /// AES-GCM under a process key of `key_bits` (128, 192 or 256).
    pub fn configure_format(
        &self,
        codec: &str,
        zstd_level: i32,
        encrypt: bool,
        key_bits: i32,
    ) -> Result<(), SpillwayError> {
        let codec = CString::new(codec).map_err(|_| {
            SpillwayError::new(
                Status::InvalidArgument,
                "the codec name contains a NUL byte",
            )
        })?;
        // SAFETY: codec is a valid C string for the call; err is writable.
        call(|err| unsafe {
            (self.fns.configure_format)(
                codec.as_ptr(),
                zstd_level,
                i32::from(encrypt),
                key_bits,
                err,
            )
        })
    }

    /// Every counter of the process's plans (the JVM's and native ones), read at one moment.
    pub fn stats(&self) -> Result<SpillwayStats, SpillwayError> {
        let mut values = vec![0i64; self.counters.len()];
        // The library's count, which is an int32_t.
        let n = values.len() as i32;
        // SAFETY: values is writable for n values; err is writable.
        call(|err| unsafe { (self.fns.stats_read)(values.as_mut_ptr(), n, err) })?;
        Ok(SpillwayStats {
            counters: self
                .counters
                .iter()
                .zip(values)
                .map(|(&(name, kind), v)| (name, kind, v))
                .collect(),
        })
    }

    /// The counter named `name` now (e.g. `"livePlans"`); an unknown name is an
    /// InvalidArgument error whose message lists the names there are.
    pub fn stat(&self, name: &str) -> Result<i64, SpillwayError> {
        let name = CString::new(name).map_err(|_| {
            SpillwayError::new(
                Status::InvalidArgument,
                "the counter name contains a NUL byte",
            )
        })?;
        let mut value = 0i64;
        // SAFETY: name is a valid C string for the call; value and err are writable.
        call(|err| unsafe { (self.fns.stats_value)(name.as_ptr(), &mut value, err) })?;
        Ok(value)
    }

    pub(crate) fn plan_release(&self, plan: i64) -> Result<(), SpillwayError> {
        // SAFETY: a plain handle; err is writable.
        call(|err| unsafe { (self.fns.plan_release)(plan, err) })
    }

    pub(crate) fn plan_used_disk_space(&self, plan: i64) -> Result<i64, SpillwayError> {
        let mut used = 0i64;
        // SAFETY: used and err are writable.
        call(|err| unsafe { (self.fns.plan_used_disk_space)(plan, &mut used, err) })?;
        Ok(used)
    }

    pub(crate) fn spill_file_create(&self, plan: i64) -> Result<i64, SpillwayError> {
        let mut file = 0i64;
        // SAFETY: file and err are writable.
        call(|err| unsafe { (self.fns.spill_file_create)(plan, &mut file, err) })?;
        Ok(file)
    }

    pub(crate) fn spill_file_write(&self, file: i64, buf: &[u8]) -> Result<(), SpillwayError> {
        // SAFETY: buf is valid for its length during the call; err is writable.
        call(|err| unsafe { (self.fns.spill_file_write)(file, buf.as_ptr(), buf.len() as i64, err) })
    }

    pub(crate) fn spill_file_finish(&self, file: i64) -> Result<(), SpillwayError> {
        // SAFETY: a plain handle; err is writable.
        call(|err| unsafe { (self.fns.spill_file_finish)(file, err) })
    }

    /// The file's logical size (the bytes written) and stored size (on disk, after the format).
    pub(crate) fn spill_file_size(&self, file: i64) -> Result<(i64, i64), SpillwayError> {
        let (mut logical, mut stored) = (0i64, 0i64);
        // SAFETY: both outputs and err are writable.
        call(|err| unsafe { (self.fns.spill_file_size)(file, &mut logical, &mut stored, err) })?;
        Ok((logical, stored))
    }

    pub(crate) fn spill_file_path(&self, file: i64) -> Result<PathBuf, SpillwayError> {
        let mut buf = vec![0u8; 512];
        loop {
            let mut len = -1i64;
            // SAFETY: buf is writable for its length; len and err are writable.
            let result = call(|err| unsafe {
                (self.fns.spill_file_path)(
                    file,
                    buf.as_mut_ptr().cast(),
                    buf.len() as i64,
                    &mut len,
                    err,
                )
            });
            match (result, usize::try_from(len)) {
                (Ok(()), Ok(len)) if len < buf.len() => {
                    buf.truncate(len);
                    return Ok(PathBuf::from(OsStr::from_bytes(&buf)));
                }
                // Too small a buffer: len is the path's length, which needs one more for the NUL.
                (Err(e), Ok(len)) if e.status == Status::InvalidArgument && len >= buf.len() => {
                    buf.resize(len + 1, 0)
                }
                (Err(e), _) => return Err(e),
                (Ok(()), _) => {
                    return Err(SpillwayError::new(
                        Status::Internal,
                        format!("spillway_spill_file_path gave length {len}"),
                    ))
                }
            }
        }
    }

    pub(crate) fn spill_file_release(&self, file: i64) -> Result<(), SpillwayError> {
        // SAFETY: a plain handle; err is writable.
        call(|err| unsafe { (self.fns.spill_file_release)(file, err) })
    }

    pub(crate) fn reader_open(&self, file: i64) -> Result<i64, SpillwayError> {
        let mut reader = 0i64;
        // SAFETY: reader and err are writable.
        call(|err| unsafe { (self.fns.reader_open)(file, &mut reader, err) })?;
        Ok(reader)
    }

    /// Reads into `buf` (the library only writes it, so it need not be initialized): the number
    /// of bytes read, now initialized at its start, or None at the end of the file.
    pub(crate) fn reader_read(
        &self,
        reader: i64,
        buf: &mut [MaybeUninit<u8>],
    ) -> Result<Option<usize>, SpillwayError> {
        let mut n = 0i64;
        // SAFETY: buf is writable for its length; n and err are writable.
        call(|err| unsafe {
            (self.fns.reader_read)(
                reader,
                buf.as_mut_ptr().cast(),
                buf.len() as i64,
                &mut n,
                err,
            )
        })?;
        match n {
            -1 => Ok(None),
            n if n >= 0 && n as usize <= buf.len() => Ok(Some(n as usize)),
            n => Err(SpillwayError::new(
                Status::Internal,
                format!(
                    "spillway_reader_read gave {n} bytes for a {}-byte buffer",
                    buf.len()
                ),
            )),
        }
    }

    pub(crate) fn reader_close(&self, reader: i64) -> Result<(), SpillwayError> {
        // SAFETY: a plain handle; err is writable.
        call(|err| unsafe { (self.fns.reader_close)(reader, err) })
    }
}

/// The bound library, binding it with `bind` if no library is bound yet.
fn bind_once(
    bind: impl FnOnce() -> Result<Spillway, SpillwayError>,
) -> Result<Arc<Spillway>, SpillwayError> {
    if let Some(s) = BOUND.get() {
        return Ok(Arc::clone(s));
    }
    let _binding = BINDING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = BOUND.get() {
        return Ok(Arc::clone(s));
    }
    let s = Arc::new(bind()?);
    Ok(Arc::clone(BOUND.get_or_init(|| s)))
}

/// The dirs as C strings, and the array of pointers to them the C ABI takes (valid while the
/// strings live) with its length.
fn c_strings(dirs: &[PathBuf]) -> Result<(Vec<CString>, Vec<*const c_char>, i32), SpillwayError> {
    let owned: Vec<CString> = dirs
        .iter()
        .map(|d| CString::new(d.as_os_str().as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| {
            SpillwayError::new(Status::InvalidArgument, "a local dir contains a NUL byte")
        })?;
    let ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
    let n = i32::try_from(ptrs.len())
        .map_err(|_| SpillwayError::new(Status::InvalidArgument, "too many local dirs"))?;
    Ok((owned, ptrs, n))
}

/// Runs one C ABI call with an error buffer; a non-zero status becomes a SpillwayError with the
/// library's message.
fn call(f: impl FnOnce(*mut RawError) -> i32) -> Result<(), SpillwayError> {
    let mut err = std::mem::MaybeUninit::<RawError>::uninit();
    // Only the first byte is set: a 1 KiB memset per call would show on the per-plan path.
    // SAFETY: err is a local of the right size; the library fills it only on failure.
    unsafe { (*err.as_mut_ptr()).message[0] = 0 };
    let code = f(err.as_mut_ptr());
    if code == 0 {
        return Ok(());
    }
    // SAFETY: message[0] was initialized; the library writes a NUL-terminated message that fits.
    let raw = unsafe { &(*err.as_ptr()).message };
    let message = if raw.iter().any(|&c| c == 0) {
        // SAFETY: a NUL lies within the buffer.
        unsafe { CStr::from_ptr(raw.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    } else {
        String::from_utf8_lossy(&raw.map(|c| c as u8)).into_owned()
    };
    let status = Status::from_code(code);
    let message = if message.is_empty() {
        format!("spillway: call failed with status {code}")
    } else {
        message
    };
    Err(SpillwayError::new(status, message))
}

/// Opens the library at `path` with `flags` and binds the C ABI, after checking its version.
fn open(path: &Path, flags: c_int) -> Result<Spillway, SpillwayError> {
    // SAFETY: loading libspillway runs its initializers (the Go runtime's), which is what we want;
    // with RTLD_NOLOAD nothing new is loaded.
    let library = unsafe { Library::open(Some(path.as_os_str()), flags) }.map_err(|e| {
        SpillwayError::new(Status::Io, format!("cannot load {}: {e}", path.display()))
    })?;
    bind(library, path.to_path_buf())
}

fn bind(library: Library, path: PathBuf) -> Result<Spillway, SpillwayError> {
    // Not closed even when refused below: a library just loaded has started its Go runtime.
    let library = ManuallyDrop::new(library);
    let missing = |name: &str, e: libloading::Error| {
        SpillwayError::new(
            Status::InvalidArgument,
            format!(
                "{} has no {name} ({e}): not libspillway, or one built before the C ABI",
                path.display()
            ),
        )
    };
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the symbol's type is the one include/spillway.h declares for it.
            *unsafe { library.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| missing($name, e))?
        };
    }
    let version: VersionFn = sym!("spillway_abi_version");
    // SAFETY: takes nothing, returns an int.
    let found = unsafe { version() };
    if found != ABI_VERSION {
        return Err(SpillwayError::new(
            Status::InvalidArgument,
            format!(
                "{} speaks C ABI version {found}, this crate version {ABI_VERSION}: use a library and \
                 a spillway-datafusion from the same Spillway release",
                path.display()
            ),
        ));
    }
    let fns = bind_functions(&library, missing)?;
    let counters = counters(fns.stats_count, fns.stats_describe)?;
    Ok(Spillway {
        fns,
        counters,
        path,
        _library: library,
    })
}

/// The library's counters, as (name, kind) by index.
fn counters(
    count: StatsCountFn,
    describe: StatsDescribeFn,
) -> Result<Vec<(&'static str, StatKind)>, SpillwayError> {
    let mut n = 0i32;
    // SAFETY: n and err are writable.
    call(|err| unsafe { count(&mut n, err) })?;
    (0..n)
        .map(|i| {
            let (mut name, mut kind) = (std::ptr::null::<c_char>(), 0i32);
            // SAFETY: name, kind and err are writable.
            call(|err| unsafe { describe(i, &mut name, &mut kind, err) })?;
            if name.is_null() {
                return Err(SpillwayError::new(
                    Status::Internal,
                    format!("spillway_stats_describe gave counter {i} no name"),
                ));
            }
            // SAFETY: a NUL-terminated string the library owns while it is loaded, and it is
            // never unloaded.
            let name: &'static CStr = unsafe { CStr::from_ptr(name) };
            let name = name.to_str().map_err(|_| {
                SpillwayError::new(
                    Status::Internal,
                    format!("counter {i} has a name that is not UTF-8"),
                )
            })?;
            Ok((name, StatKind::from_code(kind)))
        })
        .collect()
}

/// The already-loaded object that exports the C ABI, if any.
fn find_loaded() -> Result<Option<Spillway>, SpillwayError> {
    let mut names = loaded_objects();
    // Look at likely names first; the symbol, not the name, decides (the JVM's copy is named
    // libspillway-<random>.so, and may be unlinked).
    names.sort_by_key(|n| !n.to_bytes().windows(8).any(|w| w == b"spillway"));
    for name in names {
        let path = PathBuf::from(OsStr::from_bytes(name.to_bytes()));
        // SAFETY: RTLD_NOLOAD loads nothing; it returns a handle to an object already loaded.
        let Ok(library) =
            (unsafe { Library::open(Some(path.as_os_str()), RTLD_LAZY | RTLD_NOLOAD) })
        else {
            continue;
        };
        // SAFETY: only looks the symbol up.
        if unsafe { library.get::<VersionFn>(VERSION_SYMBOL) }.is_ok() {
            return bind(library, path).map(Some);
        }
        // Another library: dropping the handle gives back the reference RTLD_NOLOAD took.
    }
    Ok(None)
}

/// The names of the objects the process has loaded (the dynamic loader's own names, so that
/// dlopen with RTLD_NOLOAD matches them even when the file was unlinked since).
fn loaded_objects() -> Vec<CString> {
    #[repr(C)]
    struct DlPhdrInfo {
        addr: usize,
        name: *const c_char,
        // the rest of struct dl_phdr_info is not read
    }
    extern "C" {
        fn dl_iterate_phdr(
            callback: unsafe extern "C" fn(*mut DlPhdrInfo, usize, *mut c_void) -> c_int,
            data: *mut c_void,
        ) -> c_int;
    }
    unsafe extern "C" fn collect(info: *mut DlPhdrInfo, _size: usize, data: *mut c_void) -> c_int {
        // No panic may unwind into the C loader.
        let _ = std::panic::catch_unwind(|| {
            // SAFETY: the loader passes a valid info and our data pointer.
            let (info, names) = unsafe { (&*info, &mut *(data as *mut Vec<CString>)) };
            if !info.name.is_null() {
                // SAFETY: a NUL-terminated name owned by the loader for the callback's duration.
                let name = unsafe { CStr::from_ptr(info.name) };
                if !name.is_empty() {
                    names.push(name.to_owned());
                }
            }
        });
        0
    }
    let mut names: Vec<CString> = Vec::new();
    // SAFETY: the callback only reads info and appends to names, which outlives the call.
    unsafe { dl_iterate_phdr(collect, (&mut names as *mut Vec<CString>).cast()) };
    names
}

/// The bindings against the header they are written from: include/spillway.h, read as the
/// compiler reads it. A function added to, removed from or changed in the header, or a constant
/// that differs, fails here until this file follows.
#[cfg(test)]
mod header_tests {
    use super::*;

    const HEADER: &str = include_str!("../../include/spillway.h");

    /// The header without its comments.
    fn code() -> String {
        let mut out = String::new();
        let mut rest = HEADER;
        while let Some(start) = rest.find("/*") {
            out.push_str(&rest[..start]);
            let end = rest[start..].find("*/").expect("a comment that ends") + start + 2;
            rest = &rest[end..];
        }
        out.push_str(rest);
        out
    }

    /// The header's functions, each as its symbol and the Rust type that binds it.
    fn header_functions() -> Vec<(String, String)> {
        let c_char = std::any::type_name::<c_char>();
        let code = code();
        code.split(';')
            .map(|decl| decl.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter_map(|decl| {
                decl.find("int32_t spillway_")
                    .map(|at| decl[at..].to_string())
            })
            .map(|decl| {
                let open = decl.find('(').expect("a prototype");
                let name = decl["int32_t ".len()..open].to_string();
                let params = decl[open + 1..decl.rfind(')').expect("a prototype")].trim();
                let rust: Vec<String> = if params == "void" {
                    Vec::new()
                } else {
                    params
                        .split(',')
                        .map(|p| rust_type(p.trim(), c_char))
                        .collect()
                };
                (
                    name,
                    format!("unsafe extern \"C\" fn({}) -> i32", rust.join(", ")),
                )
            })
            .collect()
    }

    /// The Rust type of one C parameter (`const char *const *local_dirs`): each `*` is `*const`
    /// when what it points to is const, `*mut` otherwise.
    fn rust_type(param: &str, c_char: &str) -> String {
        let spaced = param.replace('*', " * ");
        let mut tokens: Vec<&str> = spaced.split_whitespace().collect();
        tokens.pop(); // the parameter's name
        let mut pointee_const = tokens[0] == "const";
        let base = if pointee_const { tokens[1] } else { tokens[0] };
        let mut rust = match base {
            "int32_t" => "i32".to_string(),
            "int64_t" => "i64".to_string(),
            "uint8_t" => "u8".to_string(),
            "char" => c_char.to_string(),
            "spillway_error" => "RawError".to_string(),
            other => panic!("no Rust type for the C type {other} in {param:?}"),
        };
        for (i, t) in tokens
            .iter()
            .enumerate()
            .skip(if pointee_const { 2 } else { 1 })
        {
            if *t == "*" {
                rust = format!("*{} {rust}", if pointee_const { "const" } else { "mut" });
                pointee_const = tokens.get(i + 1) == Some(&"const");
            }
        }
        rust
    }

    /// A type's name without module paths (`spillway_datafusion::library::RawError` is `RawError`).
    fn unqualified(name: &str) -> String {
        let mut out = String::new();
        for (i, part) in name.split("::").enumerate() {
            if i > 0 {
                let keep = out
                    .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .map_or(0, |at| at + 1);
                out.truncate(keep);
            }
            out.push_str(part);
        }
        out
    }

    #[test]
    fn every_function_of_the_header_is_bound_with_its_type() {
        let mut header = header_functions();
        header.sort();
        let version: (&str, fn() -> &'static str) = ("spillway_abi_version", || {
            std::any::type_name::<VersionFn>()
        });
        let mut bound: Vec<(String, String)> = BOUND_FUNCTIONS
            .iter()
            .chain([&version])
            .map(|(name, ty)| (name.to_string(), unqualified(ty())))
            .collect();
        bound.sort();
        assert!(
            header.len() >= 20,
            "found only {} functions in the header",
            header.len()
        );
        let only_header: Vec<_> = header.iter().filter(|f| !bound.contains(f)).collect();
        let only_bound: Vec<_> = bound.iter().filter(|f| !header.contains(f)).collect();
        assert!(
            only_header.is_empty() && only_bound.is_empty(),
            "the bindings differ from include/spillway.h:\n in the header: {only_header:#?}\n bound here: {only_bound:#?}"
        );
    }

    /// `#define NAME value` of the header, as written.
    fn define(name: &str) -> String {
        let code = code();
        let line = code
            .lines()
            .find(|l| l.split_whitespace().take(2).eq(["#define", name]))
            .unwrap_or_else(|| panic!("the header defines no {name}"));
        line.split_whitespace().nth(2).expect("a value").to_string()
    }

    #[test]
    fn the_constants_are_the_headers() {
        assert_eq!(define("SPILLWAY_ABI_VERSION"), ABI_VERSION.to_string());
        assert_eq!(
            define("SPILLWAY_ERROR_MESSAGE_SIZE"),
            std::mem::size_of::<RawError>().to_string()
        );
        for (name, status) in [
            ("SPILLWAY_ERR_IO", Status::Io),
            ("SPILLWAY_ERR_INVALID_ARGUMENT", Status::InvalidArgument),
            ("SPILLWAY_ERR_INVALID_HANDLE", Status::InvalidHandle),
            ("SPILLWAY_ERR_LIMIT_EXCEEDED", Status::LimitExceeded),
            ("SPILLWAY_ERR_INTERNAL", Status::Internal),
        ] {
            assert_eq!(
                Status::from_code(define(name).parse().unwrap()),
                status,
                "{name}"
            );
        }
        assert_eq!(
            StatKind::from_code(define("SPILLWAY_STAT_COUNT").parse().unwrap()),
            StatKind::Count
        );
        assert_eq!(
            StatKind::from_code(define("SPILLWAY_STAT_LEVEL").parse().unwrap()),
            StatKind::Level
        );
    }
}
