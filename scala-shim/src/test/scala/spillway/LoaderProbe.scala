package spillway

import java.net.URLClassLoader
import java.nio.file.Paths

/**
 * Entry point of child JVMs started by NativeLoaderSuite: exercises the loader in a fresh JVM and
 * prints `key=value` lines for the suite to check.
 */
object LoaderProbe {
  def main(args: Array[String]): Unit = args.headOption match {
    case Some("failure") =>
      // Load twice through the loader, then touch the native class directly.
      report("first", NativeLoader.load())
      report("second", NativeLoader.load())
      report("plan", SpillPlan.create(Array("/tmp"), 1))
      report("direct", NativeSpill.createPlan(Array("/tmp"), 1))
      println(s"loadedFrom=${NativeLoader.loadedFrom()}")
    case Some("extract") =>
      NativeLoader.load()
      NativeLoader.load()
      NativeSpill.releasePlan(NativeSpill.createPlan(Array("/tmp"), 1))
      println(s"loadedFrom=${NativeLoader.loadedFrom()}")
    case Some("second-loader") =>
      NativeLoader.load()
      // The same classes through an unrelated class loader: a second copy of the library (and of
      // the Go runtime in it) must be refused.
      val urls = sys.props("java.class.path").split(java.io.File.pathSeparator).map(p => Paths.get(p).toUri.toURL)
      val other = new URLClassLoader(urls, ClassLoader.getPlatformClassLoader)
      val loader = other.loadClass(classOf[NativeLoader].getName)
      assert(loader ne classOf[NativeLoader])
      report("secondLoader", try loader.getMethod("load").invoke(null) catch {
        case e: java.lang.reflect.InvocationTargetException => throw e.getCause
      })
      NativeSpill.releasePlan(NativeSpill.createPlan(Array("/tmp"), 1))
      println("firstStillWorks=true")
    case Some("load") =>
      // Loads once from wherever the JVM options point; a loaded library must also work.
      report("load", NativeLoader.load())
      println(s"loadedFrom=${NativeLoader.loadedFrom()}")
      if (NativeLoader.loadedFrom() != null) NativeSpill.releasePlan(NativeSpill.createPlan(Array("/tmp"), 1))
      println("alive=true")
    case Some("address-space") =>
      // Limits its own address space (prlimit on itself: the JVM's own size depends on its options)
      // to its current size plus args(1) MiB, then loads. Without the loader's check, the Go runtime
      // would abort this JVM when a reservation fails.
      val extra = args(1).toLong << 20
      val limit = AddressSpace.vmSize() + extra
      val prlimit = new ProcessBuilder("prlimit", s"--pid=${ProcessHandle.current().pid()}", s"--as=$limit:$limit")
        .inheritIO().start()
      if (prlimit.waitFor() != 0) throw new IllegalStateException("prlimit failed")
      println(s"limit=${AddressSpace.softLimit()}")
      report("load", NativeLoader.load())
      if (NativeLoader.loadedFrom() != null) NativeSpill.releasePlan(NativeSpill.createPlan(Array("/tmp"), 1))
      println(s"loadedFrom=${NativeLoader.loadedFrom()}")
      println("alive=true")
    case other => throw new IllegalArgumentException(s"unknown probe: $other")
  }

  private def report(name: String, call: => Any): Unit =
    try {
      call
      println(s"$name=ok")
    } catch {
      case t: Throwable =>
        println(s"$name.error=${t.getClass.getName}: ${t.getMessage}")
        val cause = t.getCause
        if (cause != null) println(s"$name.cause=${cause.getClass.getName}: ${cause.getMessage}")
    }
}
