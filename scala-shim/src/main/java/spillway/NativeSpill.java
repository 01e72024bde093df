package spillway;

import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * The JNI contract of libspillway (see docs/design/architecture.md). Clients outside this
 * repository call these methods directly: signatures and semantics are fixed.
 *
 * <p>Handles are opaque {@code long}s. Errors: {@link IllegalArgumentException} for bad arguments,
 * {@link IllegalStateException} for unknown, released or forged handles (double release included),
 * {@link SpillLimitExceededException} when a write would exceed the plan's limit,
 * {@link IOException} for filesystem failures, and {@link OutOfMemoryError} when the process has
 * no memory left outside the Java heap for a copy.
 *
 * <p>Paths cross as Java strings and are used exactly: one that no file name can hold exactly (an
 * unpaired UTF-16 surrogate, a NUL) is an {@link IllegalArgumentException}, never replaced.
 *
 * <p>Call {@link NativeLoader#load()} before first use to get a descriptive error if the library
 * cannot be loaded: if this class's initialisation fails, the JVM reports later uses as a bare
 * {@link NoClassDefFoundError}.
 */
public final class NativeSpill {
  static {
    NativeLoader.load();
  }

  private NativeSpill() {}

  /**
   * Validates an executor's local dirs once and returns a handle for {@link #createPlanIn}, which
   * builds plans in them without reading or validating a path again. Touches no filesystem.
   * Release it with {@link #releaseLocalDirs} when no more plans will be created in these dirs.
   *
   * @param localDirs absolute paths of the roots plans may spill into (not null, not empty, no
   *     null element, no duplicate); each element is read once
   * @return a handle for {@link #createPlanIn} and {@link #releaseLocalDirs}
   * @throws IllegalArgumentException for invalid dirs, naming the element
   */
  public static native long registerLocalDirs(String[] localDirs);

  /**
   * Forgets a registration of {@link #registerLocalDirs}. Plans already created in its dirs are
   * not affected; a later {@link #createPlanIn} with this handle is an {@link
   * IllegalStateException}, and so is a second release.
   */
  public static native void releaseLocalDirs(long localDirs);

  /**
   * Returns a plan handle for a plan in registered local dirs: the executor's usual path, which
   * reads no array and touches no filesystem (the plan's directory under a local dir is created
   * by its first {@link #createTmpFile}).
   *
   * @param localDirs a live handle of {@link #registerLocalDirs}
   * @param maxTempDirectorySize the plan's limit in bytes over all its live files (not negative)
   * @param maxExecutorTempDirectorySize bytes for all plans of the JVM together ({@code
   *     Long.MAX_VALUE}: no executor limit); not negative. Both limits are this plan's own, fixed
   *     now: a plan created later with other values never changes this one.
   * @throws IllegalStateException if {@code localDirs} is not a live registration
   */
  public static native long createPlanIn(
      long localDirs, long maxTempDirectorySize, long maxExecutorTempDirectorySize);

  /**
   * Validates the arguments and returns a plan handle. Touches no filesystem: the plan's directory
   * under a local dir is created by its first {@link #createTmpFile}. The array is read once, each
   * element once, and only what was read is used, so a caller that changes its array between calls
   * gets a plan in exactly the dirs the array holds at the call, or the exception they deserve. A
   * list accepted before is recognised by its content (every char of every element, never the
   * identity of the array or of its strings; at most 64 lists of up to 32 Ki chars are kept) and its
   * paths are not converted or validated again. A caller that can keep a handle does a little
   * better still to register its dirs once ({@link #registerLocalDirs}) and call {@link
   * #createPlanIn}, which reads no array.
   *
   * @param localDirs absolute paths of the roots the plan may spill into (not null, not empty, no
   *     null element, no duplicate)
   * @param maxTempDirectorySize the plan's limit in bytes over all its live files (not negative)
   * @throws IllegalArgumentException for invalid dirs (naming the element) or a negative limit
   */
  public static native long createPlan(String[] localDirs, long maxTempDirectorySize);

  /**
   * {@link #createPlan} with a second limit: the plan's writes are also refused when they would
   * take the bytes in the live files of all plans of this JVM past {@code
   * maxExecutorTempDirectorySize}. Both limits are this plan's own, fixed now: a plan created
   * later with other values never changes this one.
   *
   * @param maxExecutorTempDirectorySize bytes for all plans of the JVM together ({@code
   *     Long.MAX_VALUE}: no executor limit); not negative
   */
  public static native long createPlanWithExecutorLimit(
      String[] localDirs, long maxTempDirectorySize, long maxExecutorTempDirectorySize);

  /** Creates a spill file for the plan, and on first use the plan's directory under the chosen root. */
  public static native long createTmpFile(long plan) throws IOException;

  /** Absolute path of the file. */
  public static native String path(long file);

  /**
   * Appends {@code length} bytes of {@code buf} starting at the absolute index {@code offset}
   * (not the buffer's position, which is left unchanged); requires
   * {@code 0 <= offset, 0 <= length, offset + length <= buf.limit()}. Direct or heap buffers.
   * To a file from {@link #createTmpFile}: all or nothing against the plan's limits, and a failed
   * write leaves the file as it was. To a spill file ({@link #createSpillFile}): the bytes are
   * framed, and each chunk that fills is appended all or nothing (see there). A heap buffer is
   * copied in bounded chunks, so a write of any size needs no memory in proportion to it outside
   * the Java heap.
   *
   * @return {@code length}
   */
  public static native int write(long file, ByteBuffer buf, int offset, int length)
      throws IOException;

  /**
   * Deletes a file of {@link #createTmpFile} and returns its bytes to the plan. The handle is
   * released even when the deletion fails.
   *
   * @throws IllegalStateException if {@code file} is not a live file, or is a spill file ({@link
   *     #createSpillFile}: release it with {@link #releaseSpillFile}); the file is then untouched
   * @throws IOException if the file could not be deleted (naming it and the OS cause)
   */
  public static native void releaseTmpFile(long file) throws IOException;

  // ---- Spill files: compressed, sealed and checked by the library, read back through it. ----
  //
  // A spill file is framed: cut into chunks, each compressed with the process's codec (stored as
  // is when that does not shrink it), then sealed with AES-GCM under a key made in this process's
  // memory and never written anywhere, or checked by CRC-32C when encryption is off. The format is
  // specified in docs/design/spill-file-format.md. Limits and usedDiskSpace count a spill file's
  // bytes on disk: compressed, with framing. The shim's spillway.SpillFile is one.

  /**
   * Sets the format of the spill files of plans created from now on; call it once per executor,
   * before creating plans. Plans created earlier keep their format. Without a call, spill files
   * are neither compressed nor encrypted (each chunk still checked by CRC-32C).
   *
   * @param codec {@code none}, {@code lz4} or {@code zstd} (case-insensitive; Spark's class names
   *     of the lz4 and zstd codecs are accepted too), as {@code spark.spillway.compression.codec}
   * @param zstdLevel 1 to 22, used when {@code codec} is zstd ({@code spark.io.compression.zstd.level})
   * @param encrypt seal every chunk with AES-GCM ({@code spark.io.encryption.enabled})
   * @param keyBits 128, 192 or 256 ({@code spark.io.encryption.keySizeBits}); used when encrypting.
   *     The key is made once per size per process, by a cryptographic random source.
   * @throws IllegalArgumentException for an unknown codec (the message lists the valid ones), a
   *     zstd level out of range, or a key size AES does not take; the format is then unchanged
   */
  public static native void configureFormat(String codec, int zstdLevel, boolean encrypt, int keyBits);

  /**
   * Puts an object store behind the local dirs of the plans created from now on: a spill file
   * ({@link #createSpillFile}) that no local dir can take (every dir full, given up or out of the
   * rotation) goes there, sealed with AES-GCM whatever {@link #configureFormat} says, counted
   * against the plan's limits and {@code maxSize}, and deleted at its release or its plan's. A
   * tmp file ({@link #createTmpFile}) never goes there. The store is probed first: one small
   * object is written and removed. Call it once per executor, before creating plans. No message
   * carries a setting's value but the URI and the endpoint. An empty URI takes the tier away from
   * the plans created from now on, and probes nothing.
   *
   * @param settings six strings, {@code ""} for unset: {@code spark.spillway.remote.uri}
   *     ({@code s3a://bucket/prefix} or {@code s3://bucket/prefix}), then Hadoop's {@code
   *     fs.s3a.endpoint}, {@code fs.s3a.endpoint.region}, {@code fs.s3a.access.key} and {@code
   *     fs.s3a.secret.key} (both keys or neither: neither takes the standard credential chain),
   *     then the application's name in the store, which the driver's plugin chose: the
   *     executor's files go under the application's prefix, {@code spillway-app-<name>/}, which
   *     the driver marks alive and removes at its end
   * @param pathStyle {@code fs.s3a.path.style.access}
   * @param ssl {@code fs.s3a.connection.ssl.enabled}, for an endpoint given without a scheme
   * @param maxSize {@code spark.spillway.remote.maxSize}: bytes all remote files may hold together
   * @throws IllegalArgumentException for a bad URI, endpoint or size, naming the key; the tier is
   *     then unchanged
   * @throws IOException if the probe failed: the message says what failed (an endpoint nothing
   *     answers at, a missing bucket, refused credentials) and names the key to fix
   */
  public static native void configureRemote(String[] settings, boolean pathStyle, boolean ssl, long maxSize)
      throws IOException;

  // ---- The remote tier's sweep, for the driver. Each call builds its own store from the
  // settings (as configureRemote takes them) and changes no tier of this process. ----

  /** How many longs {@link #sweepRemote} and {@link #removeRemoteApplication} fill. */
  public static final int SWEEP_RESULT_LEN = 4;

  /**
   * Marks the settings' application alive in the store: rewrites one small object under its
   * prefix, so that no other application's sweep takes the prefix. Call it more often than the
   * sweeps' age.
   *
   * @throws IllegalArgumentException for a bad setting, naming the key
   * @throws IOException if the store refused the call
   */
  public static native void markRemoteApplication(String[] settings, boolean pathStyle, boolean ssl)
      throws IOException;

  /**
   * Marks the settings' application alive, then removes what killed applications left: every other
   * prefix of Spillway's under the URI whose newest object or upload is older than {@code
   * olderThanMillis} by the store's clock (objects deleted, uploads aborted).
   *
   * @param out at least {@link #SWEEP_RESULT_LEN} longs, filled even when the sweep throws: prefixes
   *     removed, objects deleted, uploads aborted, and 1 if the store cannot list uploads (abandoned
   *     ones are then left to the bucket's lifecycle rule)
   * @throws IllegalArgumentException for a bad setting or a non-positive age
   * @throws IOException if some calls failed; what could be removed was
   */
  public static native void sweepRemote(String[] settings, boolean pathStyle, boolean ssl, long olderThanMillis,
      long[] out) throws IOException;

  /**
   * Removes every object and upload under the settings' application prefix, its marker included:
   * the driver's call at the application's end.
   *
   * @param out as {@link #sweepRemote}'s
   * @throws IllegalArgumentException for a bad setting
   * @throws IOException if some calls failed; what could be removed was
   */
  public static native void removeRemoteApplication(String[] settings, boolean pathStyle, boolean ssl, long[] out)
      throws IOException;

  /**
   * Creates a spill file for the plan, in the plan's format, and returns a file handle: {@link
   * #write}, {@link #path} and {@link #fileSizes} take it as they take {@link #createTmpFile}'s.
   * Its writes are framed: {@link #write} appends whole chunks as they fill (a chunk is all or
   * nothing against the limits; after a failed write the file takes no more writes: release it).
   * {@link #finishWrite} writes the last chunk; then {@link #openReader} reads it back. Release it
   * with {@link #releaseSpillFile}.
   *
   * @throws IllegalStateException if {@code plan} is not a live plan
   * @throws IOException if no local dir could take the file
   */
  public static native long createSpillFile(long plan) throws IOException;

  /**
   * Deletes a spill file ({@link #createSpillFile}) and returns its bytes to the plan; its readers
   * fail from then on. The handle is released even when the deletion fails.
   *
   * @throws IllegalStateException if {@code file} is not a live file, or is a file of {@link
   *     #createTmpFile} (release it with {@link #releaseTmpFile}); the file is then untouched
   * @throws IOException if the file could not be deleted (naming it and the OS cause)
   */
  public static native void releaseSpillFile(long file) throws IOException;

  /**
   * Writes a spill file's last chunk: the file can then be read, and takes no more writes.
   * Calling it again returns the first call's outcome.
   *
   * @throws IllegalStateException if {@code file} is not a live file, or is a tmp file ({@link
   *     #createTmpFile})
   * @throws SpillLimitExceededException if the last chunk would pass a limit (the file keeps its
   *     whole chunks and cannot be read: release it)
   * @throws IOException if the last chunk could not be written
   */
  public static native void finishWrite(long file) throws IOException;

  /**
   * Fills {@code out[0..1]} with a file's plain bytes written so far and its bytes on disk (equal
   * for a tmp file).
   *
   * @throws IllegalArgumentException if {@code out} is null or shorter than 2
   * @throws IllegalStateException if {@code file} is not a live file
   */
  public static native void fileSizes(long file, long[] out);

  /**
   * Opens a finished spill file for reading from its start and returns a reader handle. The
   * reader decodes the next chunk while the caller consumes the current one. Close it with
   * {@link #closeReader}; releasing the plan closes it too. A file may have several readers.
   *
   * @throws IllegalStateException if {@code file} is not a live file, is a tmp file, or its writing was
   *     not finished ({@link #finishWrite})
   * @throws IOException if the file's header is not that of a file of this process's format
   *     (a foreign, cut or changed file), naming the file
   */
  public static native long openReader(long file) throws IOException;

  /**
   * Reads the file's next bytes into {@code buf} at absolute index {@code offset} (the buffer's
   * position is left unchanged), at most {@code length}; requires {@code 0 <= offset, 0 <= length,
   * offset + length <= buf.limit()} and a writable buffer, direct or heap. A heap buffer is filled
   * through a bounded copy of at most 1 MiB per call. Every byte returned comes from a chunk whose
   * GCM tag or CRC-32C verified. A region with room for a whole stored chunk (chunk size + 25
   * bytes) gets the chunk decoded in place, and may be overwritten past the bytes returned (all of
   * it after a failed read).
   *
   * @return the bytes read (at least 1 when {@code length > 0}, up to the end of the current
   *     chunk), 0 when {@code length} is 0, or -1 at the end of the file
   * @throws IllegalArgumentException for a bad region or a read-only buffer
   * @throws IllegalStateException if {@code reader} is not an open reader, or its file was released
   * @throws IOException if the file was changed, cut, spliced from another file or sealed under
   *     another key, naming the file and the chunk; every later read fails the same way
   */
  public static native int read(long reader, ByteBuffer buf, int offset, int length)
      throws IOException;

  /**
   * Closes a reader and releases its handle; the file stays.
   *
   * @throws IllegalStateException if {@code reader} is not an open reader (double close included)
   */
  public static native void closeReader(long reader);

  /** Bytes on disk in the plan's live files (compressed and framed for spill files). */
  public static native long usedDiskSpace(long plan);

  /**
   * Deletes every file and directory the plan created, nothing else. The plan and its handles are
   * released even when something could not be deleted.
   *
   * @throws IOException naming each file or directory that could not be deleted, and the OS cause
   */
  public static native void releasePlan(long plan) throws IOException;

  // ---- Stats: the library owns the layouts of the stats arrays and names every value. ----
  //
  // Find a value by its name (statsIndex, sortStatsIndex), not by a position written down here:
  // the library may append values, and only it knows the order.

  /** The names of {@link #stats}' values, in order; they are the plugin's metric names. */
  public static native String[] statsNames();

  /**
   * For each value of {@link #stats}, in order, {@code "count"} (it only grows while the process
   * lives: report its rate) or {@code "level"} (it goes up and down: report it as it is).
   */
  public static native String[] statsKinds();

  private static final String[] STATS_NAMES = statsNames();

  /** How many longs {@link #stats} fills. */
  public static final int STATS_LENGTH = STATS_NAMES.length;

  /**
   * Where the value named {@code name} is in {@link #stats}' array.
   *
   * @throws IllegalArgumentException if the library has no value of that name (the message lists
   *     those it has)
   */
  public static int statsIndex(String name) {
    return indexOf(STATS_NAMES, name, "stats");
  }

  /**
   * Fills {@code out[0..STATS_LENGTH)} with this process's counters, named by {@link #statsNames}.
   * The library owns the list and what each counter means ({@code StatsLayout} in plan/stats.go,
   * the same counters the C ABI gives); read them by name, e.g. with {@code spillway.NativeStats.read()}.
   *
   * @throws IllegalArgumentException if {@code out} is null or shorter than {@link #STATS_LENGTH}
   */
  public static native void stats(long[] out);

  /**
   * Removes the plan directories that processes which died without releasing their plans (an
   * executor killed mid-spill) left directly inside each of {@code dirs}. A plan directory is
   * removed only if its owner lock (an flock held by the owning process while the plan lives) is
   * free; a live plan's directory, in this JVM or another, is never touched, and no symlink is
   * followed.
   *
   * @return how many plan directories were removed
   * @throws IOException naming each directory that could not be removed
   */
  public static native int sweepOrphans(String[] dirs) throws IOException;

  // ---- External sort: a native operator of the plan that spills through it. ----
  //
  // Records cross JNI in batches, each record encoded as
  //   u32 keyLen | u32 valueLen | key bytes | value bytes
  // with both lengths little-endian and at most Integer.MAX_VALUE, back to back, no batch header.
  // Output batches use the same encoding. Keys sort as unsigned bytes; equal keys keep the order
  // they were added in.

  /**
   * Sets, for the whole process, how long the memory a finished sort gave back stays mapped for
   * the next sorts, unused ({@code spark.spillway.sort.memoryCacheIdle}; 0, no cache, without a
   * call: freed memory goes back to the OS at once). With a cache a sort that finds it takes no
   * page faults for its first touch. The library keeps at most what its sorts held at their peak,
   * advised free for the kernel to take back under memory pressure (the {@code nativeCachedBytes}
   * gauge shows it), and none of it is counted by Spark. Buffers kept already follow the new time.
   *
   * @throws IllegalArgumentException if {@code idleMillis < 0}; nothing changes then
   */
  public static native void configureMemoryCache(long idleMillis);

  /**
   * Starts an external sort owned by the plan. It holds up to about {@code memoryBudget} bytes of
   * records in memory and spills sorted runs into the plan's spill files, under the plan's limit.
   * Releasing the plan releases the sort.
   *
   * @throws IllegalArgumentException if {@code memoryBudget <= 0}
   */
  public static native long createSort(long plan, long memoryBudget);

  /**
   * Copies records of {@code batch[offset, offset + length)} into the sort, in order, while its
   * memory ({@link #sortMemoryUsed}) stays within {@code limit}, the bytes the caller was granted
   * for it (Spark's task memory; {@code Long.MAX_VALUE} for none). It returns the bytes taken,
   * whole records: all of them, or those before the first record that would take the sort's memory
   * past {@code limit}; {@code state} then says, as {@code memoryNeeded}, what the sort needs
   * granted to take the rest of the batch (as far as its budget, and at least that record), and
   * the caller, granted it, calls again with the rest. So the
   * sort never holds more than it was granted, and the caller need foresee nothing. The buffer may
   * be reused afterwards. A malformed batch is an {@link IllegalArgumentException} that adds
   * nothing. If holding a record would pass the memory budget, a sorted run is spilled first,
   * whatever {@code limit} is. A heap batch over 1 MiB is first copied whole outside the Java heap
   * (a direct one is read in place): if the process has no room for that copy, the call is an
   * {@link OutOfMemoryError} that adds nothing.
   *
   * @param state null, or filled as {@link #sortStats} fills its array, after the add: the sort's
   *     state, with no call more
   * @return the bytes of the batch taken
   * @throws IllegalArgumentException if {@code limit} is negative or {@code state} shorter than 5
   * @throws SpillLimitExceededException if that spill would pass the plan's limit (the sort is
   *     then broken: release it)
   */
  public static native int sortAdd(long sort, ByteBuffer batch, int offset, int length, long limit, long[] state)
      throws IOException;

  /**
   * Spills the records held in memory as one sorted run (Spark asked for memory back).
   *
   * @param refill the caller adds more records at once (Spark spills the sort to grant the
   *     sort's own next batch): the sort keeps its record arena, emptied and counted in {@link
   *     #sortMemoryUsed}, for them to fill, and frees only the index of the records written
   *     (the first two such spills write the older half of the records: a sort a little larger
   *     than its memory then writes half as much); with no records in memory it frees the arena
   *     too. Otherwise every record is written and every byte the records took is freed.
   * @return bytes of memory freed, 0 if there was nothing worth spilling
   */
  public static native long sortSpill(long sort, boolean refill) throws IOException;

  /**
   * Bytes of memory the sort holds now. While it holds records this counts the buffers of the
   * writer a spill of them takes, though they exist only while the spill runs: a grant that covers
   * the records covers their spill too.
   */
  public static native long sortMemoryUsed(long sort);

  /**
   * Ends the input on its first call, then fills the direct buffer {@code out[offset, offset +
   * length)} with whole records in sorted order.
   *
   * @return bytes filled; 0 once every record has been returned; or {@code -n} if the next record
   *     alone needs a buffer of {@code n} bytes (nothing consumed: call again with a larger one)
   */
  public static native int sortNext(long sort, ByteBuffer out, int offset, int length)
      throws IOException;

  /** The names of {@link #sortStats}' values, in order. */
  public static native String[] sortStatsNames();

  private static final String[] SORT_STATS_NAMES = sortStatsNames();

  /** How many longs {@link #sortStats} fills at most. */
  public static final int SORT_STATS_LENGTH = SORT_STATS_NAMES.length;

  /**
   * Where the value named {@code name} is in {@link #sortStats}' array.
   *
   * @throws IllegalArgumentException if the library has no value of that name
   */
  public static int sortStatsIndex(String name) {
    return indexOf(SORT_STATS_NAMES, name, "sortStats");
  }

  private static int indexOf(String[] names, String name, String what) {
    for (int i = 0; i < names.length; i++) {
      if (names[i].equals(name)) {
        return i;
      }
    }
    throw new IllegalArgumentException(
        what + " has no value named " + name + "; it has " + String.join(", ", names));
  }

  /**
   * Fills the first {@code min(out.length, SORT_STATS_LENGTH)} values, named by {@link
   * #sortStatsNames}: records added, runs spilled, bytes the runs take on disk (compressed, framed:
   * Spark's diskBytesSpilled), bytes of memory freed by spills (Spark's memoryBytesSpilled), bytes
   * of memory held now, plain bytes written to the runs, merge passes (0 when nothing spilled,
   * 1 for a single merge, more when runs were too many for one), and the memory the next record
   * needs granted when the last {@link #sortAdd} stopped short of its batch (0 here). Runs are
   * spill files in the plan's format.
   *
   * @throws IllegalArgumentException if {@code out} is null or shorter than 5
   */
  public static native void sortStats(long sort, long[] out);

  /**
   * Deletes the sort's run files and drops its memory. The handle is released even when a run
   * file could not be deleted.
   *
   * @throws IOException naming a run file that could not be deleted, and the OS cause
   */
  public static native void releaseSort(long sort) throws IOException;
}
