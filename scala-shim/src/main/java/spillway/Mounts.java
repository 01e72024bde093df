package spillway;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;

/**
 * Mount options, for the loader's hint when a library cannot be mapped: no library loads from a
 * filesystem mounted noexec, and the hint should say which mount it is.
 */
final class Mounts {
  private Mounts() {}

  /**
   * The mount point holding {@code file} (or, if the file is gone, its directory) if that mount
   * is noexec; null if it is not, or if /proc/self/mountinfo cannot tell.
   */
  static String noexecMountOf(Path file) {
    try {
      Path dir = file.toAbsolutePath().getParent();
      Path real = dir.toRealPath();
      String best = null;
      boolean bestNoexec = false;
      for (String line : Files.readAllLines(Paths.get("/proc/self/mountinfo"))) {
        // id parent major:minor root mount-point options ...
        String[] fields = line.split(" ");
        if (fields.length < 6) {
          continue;
        }
        String mountPoint = fields[4].replace("\\040", " ");
        if (real.startsWith(Paths.get(mountPoint))
            && (best == null || mountPoint.length() >= best.length())) {
          best = mountPoint;
          bestNoexec = Arrays.asList(fields[5].split(",")).contains("noexec");
        }
      }
      return bestNoexec ? best : null;
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }
}
