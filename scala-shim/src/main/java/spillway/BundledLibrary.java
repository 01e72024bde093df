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
import java.util.jar.JarFile;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The libraries the jar carries, at {@code /spillway/native/<os>/<arch>/libspillway.so}, and the
 * extraction of this platform's one to a file that {@code System.load} can map.
 */
final class BundledLibrary {
  private BundledLibrary() {}

  /** The resource holding the library for this platform. */
  static String resourcePath() {
    return "/spillway/native/" + NativePlatform.current() + "/" + NativePlatform.libraryFileName();
  }

  /**
   * This platform's library as a stream the caller closes.
   *
   * @throws FileNotFoundException if the classpath has none, naming the platforms it has
   */
  static InputStream open() throws FileNotFoundException {
    String resource = resourcePath();
    InputStream in = BundledLibrary.class.getResourceAsStream(resource);
    if (in == null) {
      List<String> bundled = platforms();
      String platform = NativePlatform.current();
      throw new FileNotFoundException(
          "no native library for "
              + platform
              + " in the classpath (resource "
              + resource
              + "); "
              + (bundled.isEmpty()
                  ? "the spillway jar carries none: build it with `make jar`"
                  : "the spillway jar carries it for " + String.join(", ", bundled) + " only")
              + ", or build libspillway on a "
              + platform
              + " machine (`make lib`)");
    }
    return in;
  }

  /**
   * Copies {@code library} to a fresh file in {@code dir} (created if missing) and returns it. The
   * file is marked deleteOnExit; the caller unlinks it once loaded. A failed copy is removed.
   *
   * @throws IOException whose message starts with "cannot extract the library into"
   */
  static Path extract(InputStream library, Path dir) throws IOException {
    // A fresh, uniquely named file (0600): never a file another JVM may be writing or loading.
    Path extracted;
    try {
      Files.createDirectories(dir);
      extracted = Files.createTempFile(dir, "libspillway-", ".so");
    } catch (IOException | RuntimeException e) {
      throw new IOException("cannot extract the library into " + dir + ": " + e, e);
    }
    extracted.toFile().deleteOnExit();
    try {
      Files.copy(library, extracted, StandardCopyOption.REPLACE_EXISTING);
    } catch (IOException | RuntimeException e) {
      Files.deleteIfExists(extracted);
      throw new IOException("cannot extract the library into " + extracted + ": " + e, e);
    }
    return extracted;
  }

  /**
   * The {@code <os>/<arch>} platforms whose library the jar (or classes dir) holding this class
   * carries; empty if that cannot be told. Only for error messages.
   */
  static List<String> platforms() {
    List<String> found = new ArrayList<>();
    try {
      CodeSource source = BundledLibrary.class.getProtectionDomain().getCodeSource();
      if (source == null || source.getLocation() == null) {
        return found;
      }
      Path location = Paths.get(source.getLocation().toURI());
      String library = NativePlatform.libraryFileName();
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
}
