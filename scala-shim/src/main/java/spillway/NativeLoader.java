package spillway;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * Loads libspillway once per JVM, from the first of:
 *
 * <ol>
 *   <li>the file named by the system property {@value #LIBRARY_PATH_PROPERTY};
 *   <li>{@code libspillway.so} in a directory of {@code java.library.path} (as Comet's loader
 *       does: an installation that puts the library there needs no extraction);
 *   <li>the library bundled in the jar at {@code /spillway/native/<os>/<arch>/libspillway.so},
 *       extracted to a fresh file in the directory named by {@value #EXTRACT_DIR_PROPERTY} (or the
 *       environment variable {@value #EXTRACT_DIR_ENV}, or {@code java.io.tmpdir}), loaded from
 *       there and unlinked at once (the loaded mapping stays); see {@link BundledLibrary}.
 * </ol>
 *
 * <p>Before loading, it checks that the process has the address space the Go runtime reserves when
 * it starts: without it the runtime aborts the whole JVM instead of failing the load (see {@link
 * AddressSpace}).
 *
 * <p>The first failure is kept and rethrown, wrapped with what to do about that very failure, on
 * every later call, so a broken installation reports its cause on each use instead of a bare
 * {@link NoClassDefFoundError}. Thread-safe and idempotent.
 */
public final class NativeLoader {
  /** System property: explicit path of the native library, overriding every other source. */
  public static final String LIBRARY_PATH_PROPERTY = "spillway.library.path";

  /** System property: the directory the jar's library is extracted to (default java.io.tmpdir). */
  public static final String EXTRACT_DIR_PROPERTY = "spillway.library.extractDir";

  /** Environment variable read when {@value #EXTRACT_DIR_PROPERTY} is not set. */
  public static final String EXTRACT_DIR_ENV = "SPILLWAY_LIBRARY_EXTRACT_DIR";

  /**
   * Address space (bytes) the process must have left under its limit ({@code ulimit -v}) for the
   * load to go ahead. Measured: the Go runtime reserves about 770 MiB when it starts (its page
   * allocator's summaries, its first heap arena, thread stacks of {@code ulimit -s} each), and
   * aborts the process if a reservation fails; the rest is margin for the threads it starts later.
   */
  public static final long REQUIRED_ADDRESS_SPACE = 1L << 30;

  /**
   * Set JVM-wide (system properties are shared by all class loaders) to the loaded file. The library
   * embeds a Go runtime and a process supports only one: a second copy loaded through another class
   * loader must be refused, not loaded.
   */
  static final String LOADED_PROPERTY = "spillway.native.loaded";

  private static final Object LOCK = new Object();

  /** Where the library came from (or was to come from), for the hint that goes with a failure. */
  enum Source {
    PROPERTY,
    JAVA_LIBRARY_PATH,
    JAR
  }

  private static volatile boolean loaded;
  private static Throwable failure; // guarded by LOCK: the first failure, kept for every later call
  private static String failureHint; // guarded by LOCK: what to do about it
  private static String loadedFrom; // guarded by LOCK
  private static Source source; // guarded by LOCK: the source being tried
  private static Path file; // guarded by LOCK: the file being loaded, once known

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
          failureHint = hint(t, source, file);
        }
      }
      throw loadError(failure, failureHint);
    }
  }

  /** The file the library was loaded from, or null if it is not loaded. */
  public static String loadedFrom() {
    synchronized (LOCK) {
      return loadedFrom;
    }
  }

  /**
   * {@code <os>/<arch>} as used in the jar's resource path, e.g. {@code linux/amd64}: {@link
   * NativePlatform#current()}.
   */
  public static String platform() {
    return NativePlatform.current();
  }

  /** The directory the jar's library is extracted to. */
  static Path extractDir() {
    String dir = System.getProperty(EXTRACT_DIR_PROPERTY);
    if (dir == null || dir.isEmpty()) {
      dir = System.getenv(EXTRACT_DIR_ENV);
    }
    if (dir == null || dir.isEmpty()) {
      dir = System.getProperty("java.io.tmpdir");
    }
    return Paths.get(dir).toAbsolutePath();
  }

  /** The first {@code libspillway.so} in a directory of {@code java.library.path}, or null. */
  static Path inJavaLibraryPath() {
    String dirs = System.getProperty("java.library.path", "");
    for (String dir : dirs.split(java.io.File.pathSeparator)) {
      if (dir.isEmpty()) {
        continue;
      }
      Path candidate = Paths.get(dir, NativePlatform.libraryFileName()).toAbsolutePath();
      if (Files.isRegularFile(candidate)) {
        return candidate;
      }
    }
    return null;
  }

  private static String loadOnce() throws IOException {
    String explicit = System.getProperty(LIBRARY_PATH_PROPERTY);
    Path library;
    if (explicit != null && !explicit.isEmpty()) {
      source = Source.PROPERTY;
      library = Paths.get(explicit).toAbsolutePath();
      file = library;
      if (!Files.isRegularFile(library)) {
        throw new FileNotFoundException(
            "-D" + LIBRARY_PATH_PROPERTY + "=" + explicit + ": no such file");
      }
    } else if ((library = inJavaLibraryPath()) != null) {
      source = Source.JAVA_LIBRARY_PATH;
      file = library;
    } else {
      source = Source.JAR;
      try (InputStream in = BundledLibrary.open()) {
        library = BundledLibrary.extract(in, extractDir());
      }
      file = library;
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
      AddressSpace.check(REQUIRED_ADDRESS_SPACE);
      System.load(path);
    } catch (Throwable t) {
      System.getProperties().remove(LOADED_PROPERTY, path);
      if (source == Source.JAR) {
        try {
          Files.deleteIfExists(library);
        } catch (IOException e) {
          t.addSuppressed(e); // deleteOnExit still applies
        }
      }
      throw t;
    }
    if (source == Source.JAR) {
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

  /**
   * What to do about a load failure: the words depend on the cause and on where the library came
   * from, so that the hint never tells the user to set what they already set wrongly.
   */
  static String hint(Throwable cause, Source from, Path library) {
    String message = String.valueOf(cause.getMessage());
    String file = library == null ? "the library" : library.toString();
    String property = "-D" + LIBRARY_PATH_PROPERTY;
    String otherSource;
    if (from == Source.PROPERTY) {
      otherSource = "fix " + property + " (it names " + file + "), or unset it to use the copy in the jar";
    } else if (from == Source.JAVA_LIBRARY_PATH) {
      otherSource =
          file + " was found in java.library.path: replace or remove it, or set " + property
              + " to a working copy";
    } else {
      otherSource =
          "set " + property + "=/path/to/" + NativePlatform.libraryFileName()
              + " (a library built for this platform) or use the jar built for this platform";
    }
    if (cause instanceof AddressSpace.TooSmall || cause instanceof IllegalStateException) {
      return ""; // the message says it all
    }
    if (cause instanceof FileNotFoundException) {
      return "; " + otherSource;
    }
    if (message.contains("cannot extract the library")) {
      return "; set -D" + EXTRACT_DIR_PROPERTY + " (or " + EXTRACT_DIR_ENV + ") to a writable directory"
          + " on a filesystem mounted with exec, or " + property + " to an installed copy";
    }
    if (message.contains("failed to map segment") || message.contains("Operation not permitted")) {
      String noexec = library == null ? null : Mounts.noexecMountOf(library);
      if (noexec != null) {
        return from == Source.JAR
            ? "; " + noexec + " is mounted noexec, so no library can be loaded from it: set -D"
                + EXTRACT_DIR_PROPERTY + "=<dir> (or " + EXTRACT_DIR_ENV + ") to a directory on a"
                + " filesystem mounted with exec"
            : "; " + noexec + " is mounted noexec, so no library can be loaded from it: move " + file
                + " to a filesystem mounted with exec";
      }
      return "; the system could not map the library into memory (a filesystem mounted noexec, or"
          + " too little address space: see ulimit -v); " + otherSource;
    }
    if (message.contains("GLIBC_")) {
      return "; the library was built against a newer glibc than this host has: build it on a"
          + " machine with the oldest glibc among the executors; " + otherSource;
    }
    if (message.contains("musl") || message.contains("Error relocating")) {
      return "; musl (e.g. Alpine) cannot load Go shared libraries: run the executors on a glibc"
          + " image";
    }
    if (message.contains("ELF") || message.contains("wrong architecture")) {
      return "; the library was built for another platform; " + otherSource;
    }
    return "; " + otherSource;
  }

  private static UnsatisfiedLinkError loadError(Throwable cause, String hint) {
    UnsatisfiedLinkError error =
        new UnsatisfiedLinkError(
            "Spillway native library could not be loaded for " + platform() + ": " + cause + hint);
    error.initCause(cause);
    return error;
  }
}
