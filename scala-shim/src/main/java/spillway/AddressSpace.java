package spillway;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * The address-space check the loader makes before {@code System.load}: the Go runtime in the
 * library aborts the whole process, instead of failing the load, when a reservation it makes at
 * start fails.
 */
final class AddressSpace {
  private AddressSpace() {}

  /** Thrown when the process has too little address space left to start the Go runtime. */
  static final class TooSmall extends IOException {
    private static final long serialVersionUID = 1L;

    TooSmall(String message) {
      super(message);
    }
  }

  /**
   * Throws {@link TooSmall} if this process's soft address-space limit ({@code ulimit -v}, "Max
   * address space" in /proc/self/limits) leaves less than {@code required} bytes above its
   * current size (VmSize). Does nothing where /proc cannot tell (not Linux) or with no limit.
   */
  static void check(long required) throws TooSmall {
    long limit = softLimit();
    long size = vmSize();
    if (limit < 0 || size < 0) {
      return;
    }
    long left = limit - size;
    if (left < required) {
      long mib = 1L << 20;
      throw new TooSmall(
          "the process has " + Math.max(left, 0) / mib + " MiB of address space left under its limit"
              + " (ulimit -v: Max address space " + limit / mib + " MiB, VmSize " + size / mib
              + " MiB), and the Go runtime in libspillway reserves about 770 MiB when it starts"
              + " (it would abort the JVM, not fail): raise the limit by at least "
              + (required - left + mib - 1) / mib + " MiB, e.g. ulimit -v unlimited in the"
              + " executor's environment, or leave the limit unset");
    }
  }

  /** The soft limit in bytes, or -1 if unlimited or unknown. */
  static long softLimit() {
    try {
      for (String line : Files.readAllLines(Paths.get("/proc/self/limits"))) {
        if (line.startsWith("Max address space")) {
          String[] fields = line.substring("Max address space".length()).trim().split("\\s+");
          return fields[0].equals("unlimited") ? -1 : Long.parseLong(fields[0]);
        }
      }
    } catch (IOException | RuntimeException e) {
      // not Linux, or an unexpected format: no check
    }
    return -1;
  }

  /** VmSize in bytes, or -1 if unknown. */
  static long vmSize() {
    try {
      for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
        if (line.startsWith("VmSize:")) {
          return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
        }
      }
    } catch (IOException | RuntimeException e) {
      // not Linux
    }
    return -1;
  }
}
