package spillway.bench;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The baseline Spillway is measured against: what DataFusion's disk manager does in its
 * {@code Directories} mode (used by Comet for every native plan). Building a plan creates a
 * {@code datafusion-*} temp directory (mode 0700) in every local dir, spilled or not; a spill
 * file goes into one of them picked at random; dropping the plan removes every directory
 * recursively.
 *
 * <p>Written in Java with {@link Files#createTempDirectory} and a plain recursive delete, so the
 * baseline pays the JVM's file-API costs and no JNI: the comparison is between the two designs,
 * not between two languages.
 */
final class EagerPlan {
  private final Path[] dirs;

  private EagerPlan(Path[] dirs) {
    this.dirs = dirs;
  }

  /** Creates the plan's temp directory in every root. */
  static EagerPlan create(Path[] roots) throws IOException {
    Path[] dirs = new Path[roots.length];
    try {
      for (int i = 0; i < roots.length; i++) {
        dirs[i] = Files.createTempDirectory(roots[i], "datafusion-");
      }
    } catch (IOException | RuntimeException e) {
      new EagerPlan(dirs).release();
      throw e;
    }
    return new EagerPlan(dirs);
  }

  /**
   * Creates a spill file in one of the plan's directories, picked at random as DataFusion does,
   * writes {@code data} (from its position) and closes it. The file stays until {@link #release}.
   */
  Path spill(ByteBuffer data) throws IOException {
    Path dir = dirs[ThreadLocalRandom.current().nextInt(dirs.length)];
    Path file = dir.resolve("spill-" + Long.toUnsignedString(ThreadLocalRandom.current().nextLong(), 36));
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
      while (data.hasRemaining()) {
        ch.write(data);
      }
    }
    return file;
  }

  /** Removes every directory of the plan recursively (the plan's drop). */
  void release() throws IOException {
    IOException first = null;
    for (Path d : dirs) {
      if (d == null) {
        continue;
      }
      try {
        LocalDirs.deleteRecursively(d);
      } catch (IOException e) {
        if (first == null) {
          first = e;
        }
      }
    }
    if (first != null) {
      throw first;
    }
  }

  int dirCount() {
    return dirs.length;
  }
}
