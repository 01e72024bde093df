package spillway.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import spillway.NativeLoader;

/**
 * Stand-ins for an executor's local dirs: fresh empty directories under the benchmark base
 * directory, the system property {@value #BASE_PROPERTY} (project/bench.sh points it at
 * build/bench/dirs, on the repository's disk), else {@code java.io.tmpdir}.
 *
 * <p>The roots of one set are sibling directories on one filesystem. On a real executor each
 * local dir is usually its own disk; here they share one, which is the worst case for the eager
 * baseline's journal work and changes nothing for a plan that never touches the disk.
 */
final class LocalDirs {
  static final String BASE_PROPERTY = "spillway.bench.dir";

  /** The limit every benchmark plan gets: DataFusion's and Comet's default, 100 GiB. */
  static final long LIMIT = 100L << 30;

  final Path parent;
  final Path[] roots;
  /** The same array, and the same String objects, for every plan: what the Spark shim passes. */
  final String[] paths;

  private LocalDirs(Path parent, Path[] roots) {
    this.parent = parent;
    this.roots = roots;
    this.paths = new String[roots.length];
    for (int i = 0; i < roots.length; i++) {
      paths[i] = roots[i].toString();
    }
  }

  /** Creates {@code n} empty roots under a new directory of the base directory. */
  static LocalDirs create(String label, int n) {
    // Load the library in setup, so that a missing library fails the benchmark with the loader's
    // own message instead of a NoClassDefFoundError in the first measured call.
    NativeLoader.load();
    try {
      Path base = Paths.get(System.getProperty(BASE_PROPERTY, System.getProperty("java.io.tmpdir")))
          .toAbsolutePath();
      Files.createDirectories(base);
      Path parent = Files.createTempDirectory(base, label + "-");
      Path[] roots = new Path[n];
      for (int i = 0; i < n; i++) {
        roots[i] = Files.createDirectory(parent.resolve("local-dir-" + i));
      }
      return new LocalDirs(parent, roots);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Fails if anything was left in a root: every benchmark cleans up after each plan, so an entry
   * here is a leak (or, for a plan that never spills, a directory it should not have made).
   */
  void checkEmpty() {
    try {
      for (Path root : roots) {
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(root)) {
          for (Path p : entries) {
            throw new IllegalStateException("left behind in a local dir: " + p);
          }
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Removes the roots and their parent. */
  void delete() {
    try {
      deleteRecursively(parent);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Deletes a directory tree the way Rust's {@code std::fs::remove_dir_all} (behind tempfile's
   * {@code TempDir} drop) does: list the directory, delete each entry, then the directory.
   */
  static void deleteRecursively(Path dir) throws IOException {
    try (DirectoryStream<Path> entries = Files.newDirectoryStream(dir)) {
      for (Path p : entries) {
        if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
          deleteRecursively(p);
        } else {
          Files.delete(p);
        }
      }
    }
    Files.delete(dir);
  }
}
