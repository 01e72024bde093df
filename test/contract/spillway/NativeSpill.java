package spillway;

import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * The JNI contract of libspillway exactly as its card gives it, and nothing of the shim: a client
 * outside this repository declares this class itself and loads the library with System.load.
 */
public final class NativeSpill {
  private NativeSpill() {}

  public static native long createPlan(String[] localDirs, long maxTempDirectorySize);

  public static native long createTmpFile(long plan) throws IOException;

  public static native String path(long file);

  public static native int write(long file, ByteBuffer buf, int offset, int length) throws IOException;

  public static native void releaseTmpFile(long file) throws IOException;

  public static native long usedDiskSpace(long plan);

  public static native void releasePlan(long plan) throws IOException;
}
