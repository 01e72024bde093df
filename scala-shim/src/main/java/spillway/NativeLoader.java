package spillway;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.security.CodeSource;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.jar.JarFile;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Loads libspillway once per JVM.
 *
 * <p>If the system property {@value #LIBRARY_PATH_PROPERTY} is set, that file is loaded. Otherwise
 * the library bundled in the jar at {@code /spillway/native/<os>/<arch>/libspillway.so} is
 * extracted to a temporary file, loaded from there, and unlinked at once (the loaded mapping stays).
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
    if (explicit == null || explicit.isEmpty()) {
      // The mapping outlives the name: unlink the extracted copy now, so that a JVM killed
      // before deleteOnExit runs (an executor killed by its cluster manager) leaves no copy.
      try {
        Files.deleteIfExists(library);
      } catch (IOException e) {
        // deleteOnExit still applies
      }
    }
    return path;
  }

  private static Path extract() throws IOException {
    String resource = resourcePath();
    try (InputStream in = NativeLoader.class.getResourceAsStream(resource)) {
      if (in == null) {
        List<String> bundled = bundledPlatforms();
        throw new FileNotFoundException(
            "no native library for "
                + platform()
                + " in the classpath (resource "
                + resource
                + "); "
                + (bundled.isEmpty()
                    ? "the spillway jar carries none: build it with `make jar`"
                    : "the spillway jar carries it for " + String.join(", ", bundled) + " only")
                + ", or build libspillway on a "
                + platform()
                + " machine (`make lib`)");
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

  /**
   * The {@code <os>/<arch>} platforms whose library the jar (or classes dir) holding this class
   * carries; empty if that cannot be told. Only for error messages.
   */
  static List<String> bundledPlatforms() {
    List<String> found = new ArrayList<>();
    try {
      CodeSource source = NativeLoader.class.getProtectionDomain().getCodeSource();
      if (source == null || source.getLocation() == null) {
        return found;
      }
      Path location = Paths.get(source.getLocation().toURI());
      String library = System.mapLibraryName(LIBRARY_NAME);
      if (Files.isDirectory(location)) {
        Path natives = location.resolve("spillway").resolve("native");
        try (Stream<Path> files = Files.walk(natives, 3)) {
          files
              .filter(f -> f.getFileName().toString().equals(library) && natives.relativize(f).getNameCount() == 3)
              .forEach(f -> found.add(natives.relativize(f.getParent()).toString().replace('\\', '/')));
        }
      } else {
        try (JarFile jar = new JarFile(location.toFile())) {
          Pattern entry = Pattern.compile("spillway/native/([^/]+/[^/]+)/" + Pattern.quote(library));
          jar.stream()
              .map(e -> entry.matcher(e.getName()))
              .filter(Matcher::matches)
              .forEach(m -> found.add(m.group(1)));
        }
      }
    } catch (Exception | LinkageError e) {
      // Only a hint for an error message: never a second failure.
    }
    Collections.sort(found);
    return found;
  }

  /** What to do about a load failure whose cause the message shows; empty if nothing specific. */
  private static String hint(Throwable cause) {
    String message = String.valueOf(cause.getMessage());
    if (message.contains("GLIBC_")) {
      return "; the library was built against a newer glibc than this host has: build it on a"
          + " machine with the oldest glibc among the executors";
    }
    if (message.contains("musl") || message.contains("Error relocating")) {
      return "; musl (e.g. Alpine) cannot load Go shared libraries: run the executors on a glibc"
          + " image";
    }
    if (message.contains("ELF") || message.contains("wrong architecture")) {
      return "; the library was built for another platform";
    }
    return "";
  }

  private static UnsatisfiedLinkError loadError(Throwable cause) {
    UnsatisfiedLinkError error =
        new UnsatisfiedLinkError(
            "Spillway native library could not be loaded for "
                + platform()
                + ": "
                + cause
                + hint(cause)
                + "; set -D"
                + LIBRARY_PATH_PROPERTY
                + "=/path/to/"
                + System.mapLibraryName(LIBRARY_NAME)
                + " or use the jar built for this platform");
    error.initCause(cause);
    return error;
  }
}
