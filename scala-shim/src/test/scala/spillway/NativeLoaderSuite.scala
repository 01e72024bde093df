package spillway

import java.io.File
import java.nio.file.{Files, Path, StandardCopyOption}

import scala.sys.process._

import org.scalatest.funsuite.AnyFunSuite

class NativeLoaderSuite extends AnyFunSuite {
  private val Property = NativeLoader.LIBRARY_PATH_PROPERTY

  private def probe(mode: String, options: Seq[String], args: Seq[String] = Nil): Map[String, String] = {
    val result = ChildJvm.run(LoaderProbe.getClass.getName.stripSuffix("$"), options, mode +: args)
    withClue(result.output) { assert(result.exitCode == 0) }
    result.output.linesIterator.flatMap { line =>
      line.split("=", 2) match {
        case Array(k, v) if k.matches("[A-Za-z.]+") => Some(k -> v)
        case _ => None
      }
    }.toMap
  }

  test("in the test JVM the library comes from -Dspillway.library.path; load is idempotent") {
    val configured = sys.props.get(Property)
    assert(configured.isDefined, s"-D$Property is set by build.sbt for tests")
    NativeLoader.load()
    NativeLoader.load()
    assert(NativeLoader.loadedFrom() == new File(configured.get).getAbsolutePath)
  }

  test("the build puts the library on the classpath where the loader looks for it") {
    assert(BundledLibrary.resourcePath() == s"/spillway/native/${NativePlatform.current()}/${System.mapLibraryName("spillway")}")
    assert(getClass.getResource(BundledLibrary.resourcePath()) != null, BundledLibrary.resourcePath())
  }

  test("without the property the library is extracted from the classpath once, to a temp file deleted on exit") {
    val out = probe("extract", Nil)
    val loadedFrom = out("loadedFrom")
    assert(new File(loadedFrom).getName.startsWith("libspillway-"))
    assert(!new File(loadedFrom).exists(), s"$loadedFrom left behind")
  }

  test("a load failure keeps its first cause and reports it, with what to do, on every use") {
    val missing = "/nonexistent/dir/libspillway.so"
    val out = probe("failure", Seq(s"-D$Property=$missing"))
    for (use <- Seq("first", "second", "plan")) {
      val error = out.getOrElse(s"$use.error", fail(s"no error on '$use': $out"))
      assert(error.startsWith("java.lang.UnsatisfiedLinkError: Spillway native library could not be loaded for " +
        NativePlatform.current()), error)
      assert(error.contains(missing) && error.contains(s"-D$Property="), error)
      assert(out(s"$use.cause") == s"java.io.FileNotFoundException: -D$Property=$missing: no such file")
    }
    // Touching the native class directly: its static initialiser reports the same cause.
    assert(out("direct.error").contains(missing), out)
    assert(out("loadedFrom") == "null")
  }

  test("a second class loader in the same JVM is refused instead of loading a second copy") {
    val out = probe("second-loader", sys.props.get(Property).map(p => s"-D$Property=$p").toSeq)
    assert(out("secondLoader.error").startsWith("java.lang.UnsatisfiedLinkError: Spillway native library could not be loaded"))
    assert(out("secondLoader.cause").startsWith("java.lang.IllegalStateException: libspillway is already loaded in this JVM"))
    assert(out("firstStillWorks") == "true")
  }

  private def library: Path = new File(sys.props.getOrElse(Property, fail(s"-D$Property is set by build.sbt for tests"))).toPath

  private def withTempDir[T](body: Path => T): T = {
    val dir = Files.createTempDirectory("spillway-loader-")
    try body(dir)
    finally TestFiles.deleteRecursively(dir)
  }

  private def withTmpfs[T](options: String)(body: Path => T): T = RealMounts.withTmpfs(s"size=16m,$options")(body)

  test("the jar's copy is extracted into -Dspillway.library.extractDir, created if missing, and unlinked once loaded") {
    withTempDir { dir =>
      val extractDir = dir.resolve("not/yet")
      val out = probe("load", Seq(s"-D${NativeLoader.EXTRACT_DIR_PROPERTY}=$extractDir"))
      assert(out("load") == "ok", out)
      assert(out("loadedFrom").startsWith(s"$extractDir/libspillway-"), out)
      assert(TestFiles.entriesUnder(extractDir).isEmpty, "the extracted copy is unlinked")
    }
  }

  test("a libspillway.so in java.library.path is loaded in place, before the jar's copy") {
    withTempDir { dir =>
      val installed = Files.copy(library, dir.resolve("libspillway.so"))
      val out = probe("load", Seq(s"-Djava.library.path=/nonexistent${File.pathSeparator}$dir"))
      assert(out("load") == "ok" && out("loadedFrom") == installed.toString, out)
      assert(Files.exists(installed), "an installed library is never deleted")
    }
  }

  test("a noexec extraction dir: the hint names the noexec mount and -Dspillway.library.extractDir, and nothing is left") {
    withTmpfs("noexec") { mount =>
      val out = probe("load", Seq(s"-D${NativeLoader.EXTRACT_DIR_PROPERTY}=$mount"))
      val error = out.getOrElse("load.error", fail(s"loading from a noexec mount succeeded: $out"))
      assert(error.contains(s"$mount is mounted noexec") && error.contains(s"-D${NativeLoader.EXTRACT_DIR_PROPERTY}=<dir>"), error)
      assert(!error.contains(s"set -D$Property"), s"the hint must not send the user elsewhere: $error")
      assert(out("alive") == "true" && out("loadedFrom") == "null")
      assert(TestFiles.entriesUnder(mount).isEmpty, "the failed copy is removed")
      // The same mount with exec: the same options load.
      assert(Seq("mount", "-o", "remount,exec", mount.toString).! == 0)
      assert(probe("load", Seq(s"-D${NativeLoader.EXTRACT_DIR_PROPERTY}=$mount"))("load") == "ok")
    }
  }

  test("-Dspillway.library.path on a noexec mount: the hint says to move that file, not to set the property") {
    withTmpfs("noexec") { mount =>
      val copy = Files.copy(library, mount.resolve("libspillway.so"), StandardCopyOption.REPLACE_EXISTING)
      val out = probe("load", Seq(s"-D$Property=$copy"))
      val error = out.getOrElse("load.error", fail(s"loading from a noexec mount succeeded: $out"))
      assert(error.contains(s"$mount is mounted noexec") && error.contains(s"move $copy"), error)
      assert(!error.contains(s"set -D$Property"), error)
    }
  }

  test("a missing -Dspillway.library.path file: the hint says to fix or unset that property") {
    val out = probe("load", Seq(s"-D$Property=/nonexistent/libspillway.so"))
    val error = out("load.error")
    assert(error.contains(s"fix -D$Property (it names /nonexistent/libspillway.so), or unset it"), error)
    assert(!error.contains(s"set -D$Property="), error)
  }

  test("too little address space for the Go runtime: an UnsatisfiedLinkError saying what to raise, not a dead JVM") {
    // Measured: the Go runtime needs ~770 MiB above the JVM's size to start; with 512 MiB it
    // aborted the JVM ("failed to reserve page summary memory") before the loader checked.
    val out = probe("address-space", sys.props.get(Property).map(p => s"-D$Property=$p").toSeq, Seq("512"))
    val error = out.getOrElse("load.error", fail(s"no error: $out"))
    assert(error.startsWith("java.lang.UnsatisfiedLinkError: Spillway native library could not be loaded"), error)
    assert(error.contains("MiB of address space left under its limit") && error.contains("raise the limit by at least") &&
      error.contains("ulimit -v"), error)
    assert(out("alive") == "true" && out("loadedFrom") == "null", out)
    // With the required headroom (and a little more) the library loads and works under the limit.
    val headroom = (NativeLoader.REQUIRED_ADDRESS_SPACE >> 20) + 64
    val ok = probe("address-space", sys.props.get(Property).map(p => s"-D$Property=$p").toSeq, Seq(headroom.toString))
    assert(ok("load") == "ok" && ok("alive") == "true", ok)
  }

  test("each hint matches the failure and where the library came from") {
    import NativeLoader.Source._
    val lib = java.nio.file.Paths.get("/opt/x/libspillway.so")
    def hint(message: String, from: NativeLoader.Source) =
      NativeLoader.hint(new UnsatisfiedLinkError(message), from, lib)
    val glibc = "/opt/x/libspillway.so: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found"
    assert(hint(glibc, PROPERTY).contains("newer glibc") && hint(glibc, PROPERTY).contains(s"fix -D$Property (it names $lib)"))
    assert(hint(glibc, JAVA_LIBRARY_PATH).contains(s"$lib was found in java.library.path: replace or remove it"))
    assert(hint(glibc, JAR).contains(s"set -D$Property=/path/to/libspillway.so (a library built for this platform)"))
    val elf = "/opt/x/libspillway.so: wrong ELF class: ELFCLASS32"
    assert(hint(elf, PROPERTY).contains("built for another platform") && !hint(elf, PROPERTY).contains(s"set -D$Property"))
    assert(hint("Error relocating /opt/x/libspillway.so: symbol not found", JAR).contains("musl"))
    // A map failure where no noexec mount can be told (/opt/x does not exist) names both likely causes.
    val map = "/opt/x/libspillway.so: failed to map segment from shared object"
    assert(hint(map, JAR).contains("a filesystem mounted noexec, or too little address space"))
  }
}
