package spillway;

/**
 * The JVM side of a native engine's plan, in miniature: the natives of the Rust JNI library
 * spillway-datafusion/examples/datafusion_task_sort_jni, which runs DataFusion's SortExec over a
 * Spark task's keys and spills through the task's Spillway plan (adopted by its {@link
 * SpillPlan#nativeHandle}, never released by the native side).
 *
 * <p>The library is loaded from the path in the system property {@value #LIBRARY_PROPERTY} (build.sbt
 * sets it for the tests; `make` builds it), after libspillway, whose loaded copy it binds.
 *
 * <p>Errors are exceptions: {@link IllegalArgumentException} for bad arguments, {@link
 * IllegalStateException} for an unknown or closed sort, and {@link RuntimeException} for
 * DataFusion's errors (a spill over {@code spark.spillway.maxTempDirectorySize} is DataFusion's
 * "Resources exhausted" error naming that key) and for a panic in the native code.
 */
public final class DataFusionTaskSort {
  public static final String LIBRARY_PROPERTY = "spillway.datafusion.jni.library";

  static {
    NativeLoader.load();
    String path = System.getProperty(LIBRARY_PROPERTY);
    if (path == null) {
      throw new IllegalStateException(
          LIBRARY_PROPERTY + " is not set: build.sbt sets it to the library `make` builds");
    }
    if (!new java.io.File(path).isFile()) {
      throw new IllegalStateException(
          path + " (" + LIBRARY_PROPERTY + ") does not exist: build it with `make datafusion-jni`");
    }
    System.load(path);
  }

  private DataFusionTaskSort() {}

  /**
   * Starts sorting {@code keys} with DataFusion, in {@code memoryPoolBytes} of DataFusion memory,
   * spilling into the plan {@code planHandle}; returns the sort's id. Nothing runs until {@link
   * #next}.
   *
   * @param panicAtInputBatch the input batch (of 1000 keys) at which the native input panics, for
   *     the tests; negative for none
   */
  public static native long open(long planHandle, long[] keys, long memoryPoolBytes, int panicAtInputBatch);

  /** The next sorted batch's keys, or null when the sort is done. */
  public static native long[] next(long sort);

  /** The spill files DataFusion's sort has written so far. */
  public static native long spillCount(long sort);

  /** Ends the sort and drops its spill files. Once per sort. */
  public static native void close(long sort);

  /** Sorts opened and not yet closed in this JVM. */
  public static native int openSorts();
}
