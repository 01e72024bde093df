package spillway.suites

import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Paths}

/**
 * ScalaTest's `Runner` over Apache Spark's own suites (project/spark-suites.sh), then a record of
 * what Spillway did in this JVM: the library's counters ([[spillway.NativeStats]]) written to the
 * file named by `-Dspillway.suites.statsFile`, or `not loaded` when no suite ever loaded the
 * library (the run without the extension must not). The counters show that the native sort really
 * ran and spilled in the run with the extension on.
 *
 * Exits 0 whatever the suites did: the script compares the runs test by test from their JUnit XML
 * reports. Exits at once after writing (System.exit), so a thread a suite left running does not
 * keep the JVM alive.
 */
object RunSuites {
  def main(args: Array[String]): Unit = {
    val passed = org.scalatest.tools.Runner.run(args)
    val stats =
      if (System.getProperty("spillway.native.loaded") == null) "not loaded"
      else spillway.NativeStats.read().values.map { case (n, v) => s"$n=$v" }.mkString("\n")
    sys.props.get("spillway.suites.statsFile").foreach { f =>
      Files.write(Paths.get(f), (stats + "\n").getBytes(StandardCharsets.UTF_8))
    }
    println(s"spillway.suites.RunSuites: ScalaTest reported ${if (passed) "success" else "failures"}")
    System.exit(0)
  }
}
