/*
 * spillway.h: the C ABI of libspillway.so, for native engines in the same process as the JVM
 * (a DataFusion or Velox plan inside a Spark executor) and for native programs on their own.
 *
 * The C ABI and the JNI entry points (spillway.NativeSpill) are two bindings onto the same code and
 * the same process-wide registry: a plan created here shares the executor-wide budget with the
 * JVM's plans, its framed files take the format the JVM configured (spillway_configure_format
 * for a process without a JVM), and a handle is the same number on both sides, so a C caller can
 * use a plan a JVM task created (TaskSpill / NativeSpill.createPlan) by its handle.
 *
 * ---- Conventions (hold for every function) ----
 *
 * Status: every function returns an int32_t status, SPILLWAY_OK (0) or one of SPILLWAY_ERR_*.
 *   On failure nothing was changed unless the function says otherwise, and every out-parameter
 *   is left as it was, except spillway_spill_file_path's len_out (see there).
 * Errors: the last parameter, err, is caller-owned and may be NULL. On failure its message is set
 *   to a NUL-terminated UTF-8 message (truncated at a character boundary to fit) naming what
 *   failed: the path and the OS cause for SPILLWAY_ERR_IO, the Spark config key for
 *   SPILLWAY_ERR_LIMIT_EXCEEDED. On success err is not touched.
 * Never a crash: every argument is checked (NULL pointers, negative lengths, unknown handles) and
 *   every internal failure (a Go panic included) becomes a status; no call raises a Java exception
 *   or touches a JNIEnv. The library needs no JVM: the Go runtime initialises when the library is
 *   loaded (linked or dlopen'ed), and JNI_OnLoad is never needed by these functions.
 * Loading: in a JVM the library is loaded already, without RTLD_GLOBAL (System.load), so
 *   dlsym(RTLD_DEFAULT, ...) does not find these symbols: dlopen(path, RTLD_NOW | RTLD_NOLOAD) with
 *   the path spillway.NativeLoader.loadedFrom() returns gives the loaded instance. Never load a
 *   second copy from another path: it would be a second Go runtime with its own registry.
 * Handles: int64_t, never 0. A handle that is unknown, released or forged gives
 *   SPILLWAY_ERR_INVALID_HANDLE; handles are never reused, so a stale one can never reach a newer
 *   plan or file. Plan, file, reader and local-dirs handles are distinct kinds.
 * Ownership: whoever created a handle releases it, once. Releasing a plan releases (deletes) its
 *   files and closes its readers too; their handles then give SPILLWAY_ERR_INVALID_HANDLE.
 *   A plan handle received from the JVM (a Spark task's plan) is the task's: the C side may create
 *   files in it and release those files, but must NEVER call spillway_plan_release on it, and must
 *   stop using it and everything in it when the task ends (the JVM releases it then).
 * Thread-safety: every function may be called from any thread, concurrently, including on the
 *   same handle (calls on one file or reader are serialised; concurrent writes to one file land
 *   in some order). Creating and releasing a plan that never spills takes no lock shared by all
 *   plans and makes no filesystem call.
 * Memory: the library never keeps a caller's pointer past the call, and never returns memory the
 *   caller must free (the counters' names are the library's own, static strings).
 */
#ifndef SPILLWAY_H
#define SPILLWAY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this ABI; spillway_abi_version returns it. A change that breaks a caller
 * compiled against an older header bumps it. Version 2: the counters are named
 * (spillway_stats_count, _describe, _read, _value) in place of version 1's fixed spillway_stats
 * struct and spillway_stats_get. Version 3: a file is a spill file, as on the JVM's side
 * (SpillFile, NativeSpill.createSpillFile): spillway_spill_file_* in place of spillway_file_*. */
#define SPILLWAY_ABI_VERSION 3

/* A limit that never refuses a write (INT64_MAX). */
#define SPILLWAY_UNLIMITED INT64_MAX

/* Status codes. */
#define SPILLWAY_OK 0
/* A filesystem failure (no local dir could take the file, disk full, ...); the message names the
 * path and the OS cause. */
#define SPILLWAY_ERR_IO 1
/* A bad argument (NULL pointer, negative length, bad dir list, buffer too small, bad format
 * setting); nothing was changed. */
#define SPILLWAY_ERR_INVALID_ARGUMENT 2
/* An unknown, released or forged handle, or one used out of order (read before finish, write
 * after finish, a file whose plan was released). */
#define SPILLWAY_ERR_INVALID_HANDLE 3
/* A write refused by the plan's limit (spark.spillway.maxTempDirectorySize) or the executor's
 * (spark.spillway.maxExecutorTempDirectorySize); the message names the key. */
#define SPILLWAY_ERR_LIMIT_EXCEEDED 4
/* A bug in the library (a recovered panic); the message has the details, please report it. */
#define SPILLWAY_ERR_INTERNAL 5

/* The error message of a failed call. */
#define SPILLWAY_ERROR_MESSAGE_SIZE 1024
typedef struct {
	char message[SPILLWAY_ERROR_MESSAGE_SIZE];
} spillway_error;

/* Returns SPILLWAY_ABI_VERSION of the loaded library (not a status). Check it equals the header's
 * before any other call. */
int32_t spillway_abi_version(void);

/* ---- Format ---- */

/* Sets the format of the framed files of plans created from now on, process-wide (the JVM's plans
 * too): codec "none", "lz4" or "zstd" (case-insensitive, as spark.spillway.compression.codec),
 * zstd_level 1 to 22 (used for zstd), and when encrypt is non-zero AES-GCM under a key of key_bits
 * (128, 192, 256) made in this process and never written anywhere. In an executor the JVM calls
 * this (from Spark's config); a process without a JVM may. Without any call, framed files are
 * neither compressed nor encrypted (each chunk still checked by CRC-32C).
 * Errors: INVALID_ARGUMENT (NULL or bad codec, level out of range, bad key size; format unchanged). */
int32_t spillway_configure_format(const char *codec, int32_t zstd_level, int32_t encrypt, int32_t key_bits,
                                  spillway_error *err);

/* ---- Plans ---- */

/* Creates a plan that may spill up to max_temp_directory_size bytes on disk under the local dirs,
 * and no more than would take the bytes of all plans of the process past
 * max_executor_temp_directory_size (SPILLWAY_UNLIMITED for no limit). Both limits are this plan's,
 * fixed now. No dir is created until the plan's first file, and then only in the root that file
 * lands in. local_dirs: n_dirs absolute paths, NUL-terminated, valid UTF-8, each at most 32 KiB;
 * copied, not kept. Touches no filesystem: an unusable dir is found out at the first file.
 * Writes *plan_out; release with spillway_plan_release.
 * Errors: INVALID_ARGUMENT (NULL local_dirs, a NULL element, n_dirs < 1 or too large, a path not
 * absolute or not valid UTF-8 or too long, a negative limit, NULL plan_out). */
int32_t spillway_plan_create(const char *const *local_dirs, int32_t n_dirs, int64_t max_temp_directory_size,
                             int64_t max_executor_temp_directory_size, int64_t *plan_out, spillway_error *err);

/* Validates local dirs once (as spillway_plan_create does) and writes to *dirs_out a handle that
 * spillway_plan_create_in takes, so that an engine creating many plans reads no strings per plan.
 * Release with spillway_local_dirs_release.
 * Errors: as spillway_plan_create's for local_dirs, n_dirs and the out-pointer. */
int32_t spillway_local_dirs_register(const char *const *local_dirs, int32_t n_dirs, int64_t *dirs_out,
                                     spillway_error *err);

/* Forgets a registration; plans created in it are not affected.
 * Errors: INVALID_HANDLE. */
int32_t spillway_local_dirs_release(int64_t dirs, spillway_error *err);

/* spillway_plan_create in the dirs registered under dirs: no string read, no filesystem call, no
 * lock shared by all plans.
 * Errors: INVALID_HANDLE (dirs), INVALID_ARGUMENT (negative limit, NULL plan_out). */
int32_t spillway_plan_create_in(int64_t dirs, int64_t max_temp_directory_size, int64_t max_executor_temp_directory_size,
                                int64_t *plan_out, spillway_error *err);

/* Releases a plan created by this caller: closes its readers, deletes its files and dirs, and
 * forgets every handle in it. Never call it on a plan the JVM created. The handle is released even
 * when a deletion fails (then ERR_IO naming what was left).
 * Errors: INVALID_HANDLE (unknown or already released), IO. */
int32_t spillway_plan_release(int64_t plan, spillway_error *err);

/* Writes to *bytes_out the bytes on disk of the plan's live files (framing included).
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (NULL bytes_out). */
int32_t spillway_plan_used_disk_space(int64_t plan, int64_t *bytes_out, spillway_error *err);

/* ---- Files ---- */

/* Creates a spill file in the plan, in the plan's format (compressed and sealed as
 * configured, each chunk checked), and writes its handle to *file_out. The plan's dir under the
 * chosen root is created here if this is the first file to land there; failing roots are skipped.
 * Release with spillway_spill_file_release (or with the plan).
 * Errors: INVALID_HANDLE (plan), IO (no local dir could take the file), INVALID_ARGUMENT (NULL
 * file_out). */
int32_t spillway_spill_file_create(int64_t plan, int64_t *file_out, spillway_error *err);

/* Appends len bytes of buf (copied before the call returns). The bytes are framed: whole chunks
 * are appended to disk as they fill, each all or nothing against the limits; the call returns
 * SPILLWAY_OK only if every byte was taken. After a failed write the file takes no more writes
 * (every later write and finish fails): release it. len 0 writes nothing (buf may then be NULL).
 * Errors: INVALID_ARGUMENT (NULL buf with len > 0, len < 0), INVALID_HANDLE (unknown file, or
 * finished), LIMIT_EXCEEDED, IO. */
int32_t spillway_spill_file_write(int64_t file, const uint8_t *buf, int64_t len, spillway_error *err);

/* Writes the file's last chunk; the file can then be read and takes no more writes. Calling it
 * again returns the first call's outcome.
 * Errors: INVALID_HANDLE, LIMIT_EXCEEDED (the last chunk would pass a limit), IO. */
int32_t spillway_spill_file_finish(int64_t file, spillway_error *err);

/* Writes the plain bytes written so far to *logical_out and the bytes on disk (compressed, framing
 * included) to *stored_out; either may be NULL.
 * Errors: INVALID_HANDLE. */
int32_t spillway_spill_file_size(int64_t file, int64_t *logical_out, int64_t *stored_out, spillway_error *err);

/* Copies the file's absolute path, NUL-terminated, into buf of cap bytes, and writes its length
 * (without the NUL) to *len_out. If cap < length + 1 the call fails with INVALID_ARGUMENT, buf
 * untouched but *len_out still set, so a caller can size the buffer (buf may be NULL when cap is
 * 0). The path is for display and diagnostics: the file's bytes are framed, read them with
 * spillway_reader_*.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (NULL len_out, cap < 0, NULL buf with cap > 0, cap too
 * small). */
int32_t spillway_spill_file_path(int64_t file, char *buf, int64_t cap, int64_t *len_out, spillway_error *err);

/* Deletes the file, returns its bytes to the plan and forgets the handle. Close its readers first:
 * once the file is gone their reads fail (with ERR_IO or INVALID_HANDLE), they still need closing.
 * The handle is released even when the deletion fails.
 * Errors: INVALID_HANDLE (unknown or already released), IO (naming the file). */
int32_t spillway_spill_file_release(int64_t file, spillway_error *err);

/* ---- Readers ---- */

/* Opens a finished file for reading from its start (with read-ahead) and writes a reader handle to
 * *reader_out. A file may have several readers at once. Close with spillway_reader_close (or with
 * the plan).
 * Errors: INVALID_HANDLE (unknown file, not finished), IO, INVALID_ARGUMENT (NULL reader_out). */
int32_t spillway_reader_open(int64_t file, int64_t *reader_out, spillway_error *err);

/* Reads the next bytes (at most cap) into buf and writes how many to *n_out: at least 1 while
 * there are bytes left, -1 at the end of the file, 0 only when cap is 0. Every byte returned is
 * from a chunk that verified; a file changed, cut or sealed under another key fails with ERR_IO
 * naming the file and the chunk, and so does every later read. At the start of a chunk, a buf with
 * room for a whole stored chunk (the chunk size + 25 bytes: 262,169 for the default 256 KiB) gets
 * that chunk read, verified and decoded in buf itself, with no copy through the library's
 * buffers; buf past the bytes returned may then be overwritten (it is scratch space), and after
 * a failed read all of buf is unspecified (it may hold the bytes that failed the check).
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (NULL buf with cap > 0, cap < 0, NULL n_out), IO. */
int32_t spillway_reader_read(int64_t reader, uint8_t *buf, int64_t cap, int64_t *n_out, spillway_error *err);

/* Closes a reader and forgets its handle.
 * Errors: INVALID_HANDLE (unknown or already closed). */
int32_t spillway_reader_close(int64_t reader, spillway_error *err);

/* ---- Process-wide counters ----
 *
 * What the process's plans (the JVM's and the C side's) hold and have done, as named counters:
 * the same counters, under the same names, as the JVM's (spillway.NativeStats and the plugin's
 * metrics). The library owns the list (plan/stats.go in its sources): find a counter by its name,
 * never by an index or a count written into the caller, since a newer library may have more.
 * Indexes run from 0 to the count - 1 and stay fixed while the library is loaded. */

/* A counter's kind: it only grows while the process lives (report its rate)... */
#define SPILLWAY_STAT_COUNT 1
/* ...or it goes up and down (report it as it is). */
#define SPILLWAY_STAT_LEVEL 2

/* Writes the number of counters to *count_out.
 * Errors: INVALID_ARGUMENT (NULL count_out). */
int32_t spillway_stats_count(int32_t *count_out, spillway_error *err);

/* Writes counter index's name to *name_out and its kind (SPILLWAY_STAT_*) to *kind_out; either
 * may be NULL. The name is a NUL-terminated ASCII string owned by the library, valid while it is
 * loaded: never free or change it.
 * Errors: INVALID_ARGUMENT (index < 0 or not below the count). */
int32_t spillway_stats_describe(int32_t index, const char **name_out, int32_t *kind_out, spillway_error *err);

/* Writes the values of counters 0 to n - 1, read at one moment, to values[0] to values[n - 1]:
 * with n the count, every counter (index i named by spillway_stats_describe(i, ...)). n 0 writes
 * nothing (values may then be NULL).
 * Errors: INVALID_ARGUMENT (n < 0 or above the count, NULL values with n > 0). */
int32_t spillway_stats_read(int64_t *values, int32_t n, spillway_error *err);

/* Writes the value of the counter named name (e.g. "livePlans") to *value_out.
 * Errors: INVALID_ARGUMENT (NULL name or value_out, no counter of that name: the message lists
 * the names there are). */
int32_t spillway_stats_value(const char *name, int64_t *value_out, spillway_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SPILLWAY_H */
