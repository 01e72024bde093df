package spillway

import java.io.File

import org.scalatest.funsuite.AnyFunSuite

class NativeLoaderSuite extends AnyFunSuite {
  private val Property = NativeLoader.LIBRARY_PATH_PROPERTY

  private def probe(mode: String, options: Seq[String]): Map[String, String] = {
    val result = TestFiles.runJvm(LoaderProbe.getClass.getName.stripSuffix("$"), options, Seq(mode))
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
    assume(configured.isDefined, s"-D$Property is set by build.sbt for tests")
    NativeLoader.load()
    NativeLoader.load()
    assert(NativeLoader.loadedFrom() == new File(configured.get).getAbsolutePath)
  }

  test("the build puts the library on the classpath where the loader looks for it") {
    assert(NativeLoader.resourcePath() == s"/spillway/native/${NativeLoader.platform()}/${System.mapLibraryName("spillway")}")
    assert(getClass.getResource(NativeLoader.resourcePath()) != null, NativeLoader.resourcePath())
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
        NativeLoader.platform()), error)
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
}
