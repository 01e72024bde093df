package spillway;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * Loads libspillway once per JVM.
 *
 * <p>If the system property {@value #LIBRARY_PATH_PROPERTY} is set, that file is loaded. Otherwise
 * the library bundled in the jar at {@code /spillway/native/<os>/<arch>/libspillway.so} is
 * extracted to a temporary file (deleted on exit) and loaded from there.
 *
 * <p>The first failure is kept and rethrown, wrapped with what to do, on every later call, so a
 * broken installation reports its cause on each use instead of a bare {@link NoClassDefFoundError}.
 * Thread-safe and idempotent.
 */
public final class NativeLoader {
  /** System property: explicit path of the native library, overriding the copy in the jar. */
  public static final String LIBRARY_PATH_PROPERTY = "spillway.library.path";

  /**
   * Set JVM-wide (system properties are shared by all class loaders) to the loaded file. The library
   * embeds a Go runtime and a process supports only one: a second copy loaded through another class
   * loader must be refused, not loaded.
   */
  static final String LOADED_PROPERTY = "spillway.native.loaded";

  private static final String LIBRARY_NAME = "spillway";
  private static final Object LOCK = new Object();

  private static volatile boolean loaded;
  private static Throwable failure; // guarded by LOCK: the first failure, kept for every later call
  private static String loadedFrom; // guarded by LOCK

  private NativeLoader() {}

  /**
   * Loads the library if this JVM has not yet done so.
   *
   * @throws UnsatisfiedLinkError if it cannot be loaded, now or on an earlier call; its cause is
   *     the first failure
   */
  public static void load() {
    if (loaded) {
      return;
    }
    synchronized (LOCK) {
      if (loaded) {
        return;
      }
      if (failure == null) {
        try {
          loadedFrom = loadOnce();
          loaded = true;
          return;
        } catch (Throwable t) {
          failure = t;
        }
      }
      throw loadError(failure);
    }
  }

  /** The file the library was loaded from, or null if it is not loaded. */
  public static String loadedFrom() {
    synchronized (LOCK) {
      return loadedFrom;
    }
  }

  /** {@code <os>/<arch>} as used in the jar's resource path, e.g. {@code linux/amd64}. */
  public static String platform() {
    return os() + "/" + arch();
  }

  /** The resource holding the library for this platform. */
  static String resourcePath() {
    return "/spillway/native/" + platform() + "/" + System.mapLibraryName(LIBRARY_NAME);
  }

  // Names follow Go's GOOS/GOARCH, which is what the library is built for. Keep in sync with
  // nativeOs/nativeArch in build.sbt, which places the library in the jar.
  static String os() {
    String name = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
    if (name.startsWith("linux")) {
      return "linux";
    } else if (name.startsWith("mac") || name.contains("darwin")) {
      return "darwin";
    } else if (name.startsWith("windows")) {
      return "windows";
    }
    return name.replaceAll("[^a-z0-9]+", "");
  }

  static String arch() {
    String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
    switch (arch) {
      case "amd64":
      case "x86_64":
        return "amd64";
      case "aarch64":
      case "arm64":
        return "arm64";
      default:
        return arch;
    }
  }

  private static String loadOnce() throws IOException {
    String explicit = System.getProperty(LIBRARY_PATH_PROPERTY);
    Path library;
    if (explicit != null && !explicit.isEmpty()) {
      library = Paths.get(explicit).toAbsolutePath();
      if (!Files.isRegularFile(library)) {
        throw new FileNotFoundException(
            "-D" + LIBRARY_PATH_PROPERTY + "=" + explicit + ": no such file");
      }
    } else {
      library = extract();
    }
    String path = library.toString();
    Object other = System.getProperties().putIfAbsent(LOADED_PROPERTY, path);
    if (other != null) {
      throw new IllegalStateException(
          "libspillway is already loaded in this JVM from " + other + " by another class loader;"
              + " put the spillway jar on one class loader only (a second copy would start a"
              + " second Go runtime in the process)");
    }
    try {
      System.load(path);
    } catch (Throwable t) {
      System.getProperties().remove(LOADED_PROPERTY, path);
      throw t;
    }
    return path;
  }

  private static Path extract() throws IOException {
    String resource = resourcePath();
    try (InputStream in = NativeLoader.class.getResourceAsStream(resource)) {
      if (in == null) {
        throw new FileNotFoundException(
            "no native library for this platform in the classpath (resource " + resource + ")");
      }
      // A fresh, uniquely named file (0600): never a file another JVM may be writing or loading.
      Path file = Files.createTempFile("libspillway-", ".so");
      file.toFile().deleteOnExit();
      try {
        Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
      } catch (IOException | RuntimeException e) {
        Files.deleteIfExists(file);
        throw e;
      }
      return file;
    }
  }

  private static UnsatisfiedLinkError loadError(Throwable cause) {
    UnsatisfiedLinkError error =
        new UnsatisfiedLinkError(
            "Spillway native library could not be loaded for "
                + platform()
                + ": "
                + cause
                + "; set -D"
                + LIBRARY_PATH_PROPERTY
                + "=/path/to/"
                + System.mapLibraryName(LIBRARY_NAME)
                + " or use the jar built for this platform");
    error.initCause(cause);
    return error;
  }
}
