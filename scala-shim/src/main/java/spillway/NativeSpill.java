package spillway;

import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * The JNI contract of libspillway (see DESIGN.md, "The JNI contract"). Clients outside this
 * repository call these methods directly: signatures and semantics are fixed.
 *
 * <p>Handles are opaque {@code long}s. Errors: {@link IllegalArgumentException} for bad arguments,
 * {@link IllegalStateException} for unknown, released or forged handles (double release included),
 * {@link SpillLimitExceededException} when a write would exceed the plan's limit, and
 * {@link IOException} for filesystem failures.
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
   * Validates the arguments and returns a plan handle. Touches no filesystem: the plan's directory
   * under a local dir is created by its first {@link #createTmpFile}.
   *
   * @param localDirs absolute paths of the roots the plan may spill into (not null, not empty)
   * @param maxTempDirectorySize the plan's limit in bytes over all its live files (not negative)
   */
  public static native long createPlan(String[] localDirs, long maxTempDirectorySize);

  /** Creates a spill file for the plan, and on first use the plan's directory under the chosen root. */
  public static native long createTmpFile(long plan) throws IOException;

  /** Absolute path of the file. */
  public static native String path(long file);

  /**
   * Appends {@code length} bytes of {@code buf} starting at the absolute index {@code offset}
   * (not the buffer's position, which is left unchanged); requires
   * {@code 0 <= offset, 0 <= length, offset + length <= buf.limit()}. Direct or heap buffers.
   * All or nothing against the plan's limit.
   *
   * @return {@code length}
   */
  public static native int write(long file, ByteBuffer buf, int offset, int length)
      throws IOException;

  /** Deletes the file and returns its bytes to the plan. */
  public static native void releaseTmpFile(long file);

  /** Bytes in the plan's live files. */
  public static native long usedDiskSpace(long plan);

  /** Deletes every file and directory the plan created, nothing else. */
  public static native void releasePlan(long plan);

  /** Does nothing: measures the floor cost of a call into the library. */
  public static native void noop();
}
