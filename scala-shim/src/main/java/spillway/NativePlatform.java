package spillway;

import java.util.Locale;

/**
 * This JVM's platform in the names of Go's GOOS/GOARCH, which is what the library is built for:
 * {@code linux/amd64}, {@code linux/arm64}. The build asks it too (project/native-platform.sbt),
 * to place the library in the jar where {@link BundledLibrary} looks it up, so the mapping lives
 * here alone; this class depends on nothing else.
 */
public final class NativePlatform {
  private NativePlatform() {}

  /** {@code <os>/<arch>} as used in the jar's resource path, e.g. {@code linux/amd64}. */
  public static String current() {
    return os() + "/" + arch();
  }

  /** The library's file name on this platform: {@code libspillway.so} on Linux. */
  static String libraryFileName() {
    return System.mapLibraryName("spillway");
  }

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
}
