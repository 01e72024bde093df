package spillway

import java.io.File
import java.nio.file.Files
import java.util.Properties
import java.util.jar.JarFile

import org.scalatest.funsuite.AnyFunSuite

/**
 * A jar loaded into another Spark line or Scala version fails at once, in one line naming what
 * runs and the artifact to use; never a NoClassDefFoundError. Each line's suite runs in that line's
 * Spark: a child JVM with this line's Spark (the test's external classpath, nothing of Spillway)
 * and one product jar, every other line's in turn, takes both entry points (the plugin, the extension;
 * [[SparkLineChild]]). The same child with this line's own jar runs a query through both entry points, so
 * the failures are the jar's and not the harness's. build.sbt passes the classpath and the jars.
 */
class SparkLineSuite extends AnyFunSuite {
  private def prop(name: String): String =
    sys.props.getOrElse(name, throw new IllegalStateException(s"-D$name is not set: run the suite through sbt"))

  private val sparkClasspath = prop("spillway.test.sparkClasspath")
  private val testClasses = prop("spillway.test.testClasses")
  private val ownJar = new File(prop("spillway.test.ownJar"))
  private val otherJars = prop("spillway.test.otherLineJars").split(File.pathSeparator).filter(_.nonEmpty).map(new File(_)).toSeq
  private val sparkVersion = SparkLine.runningSparkVersion()
  private val scalaVersion = SparkLine.runningScalaVersion()

  /** What a jar's spillway/spark-line.properties says it is built for. */
  private def builtFor(jar: File): Properties = {
    val jf = new JarFile(jar)
    try {
      val entry = jf.getEntry(SparkLine.RESOURCE)
      assert(entry != null, s"$jar has no ${SparkLine.RESOURCE}")
      val p = new Properties
      val in = jf.getInputStream(entry)
      try p.load(in) finally in.close()
      p
    } finally jf.close()
  }

  /** The child's outcome per entry point: the line after `<entry>-` and the message lines before `<entry>-end`. */
  private def takeBothEntries(jar: File): (Map[String, (String, Seq[String])], String) = {
    val localDir = Files.createTempDirectory("spark-line-local")
    try {
      val result = ChildJvm.run(classOf[SparkLineChild].getName,
        ChildJvm.sparkOptions ++ ChildJvm.libraryOption ++ Seq("-Xmx1g"), Seq(localDir.toString),
        classpath = Seq(sparkClasspath, testClasses, jar.getPath).mkString(File.pathSeparator))
      assert(result.exitCode == 0, result.output)
      val lines = result.output.linesIterator.toSeq
      val entries = Seq("plugin", "extension").map { entry =>
        val start = lines.indexWhere(l => l.startsWith(s"$entry-ran") || l.startsWith(s"$entry-failed="))
        val end = lines.indexOf(s"$entry-end")
        assert(start >= 0 && end > start, s"no outcome for the $entry:\n${result.output}")
        entry -> (lines(start).stripPrefix(s"$entry-") -> lines.slice(start + 1, end))
      }.toMap
      (entries, result.output)
    } finally TestFiles.deleteRecursively(localDir)
  }

  test(s"this line's jar (${SparkLine.coordinates()}): the running Spark and Scala are the ones it is built for, and both entry points run a query") {
    SparkLine.require("the suite")
    assert(builtFor(ownJar).getProperty("artifact") == s"spillway-spark${SparkLine.builtSparkLine()}_${SparkLine.builtScalaBinary()}")
    val (entries, output) = takeBothEntries(ownJar)
    assert(entries("plugin")._1 == "ran count=10", output)
    assert(entries("extension")._1 == "ran count=10", output)
  }

  for (jar <- otherJars) {
    val built = builtFor(jar)
    val artifact = built.getProperty("artifact")
    test(s"$artifact in Spark $sparkVersion on Scala $scalaVersion: both entry points fail at once, in one line naming the artifact to use") {
      val (entries, output) = takeBothEntries(jar)
      for ((entry, conf) <- Seq("plugin" -> "spark.plugins=spillway.SpillwayPlugin", "extension" -> "spark.sql.extensions=spillway.SpillwayExtensions")) {
        val (outcome, message) = entries(entry)
        assert(outcome == "failed=java.lang.IllegalStateException", s"$entry: $output")
        assert(message == Seq(
          s"Spillway io.github.spillway:$artifact:0.1.0-SNAPSHOT ($conf) is built for Spark ${built.getProperty("spark.line")} " +
            s"on Scala ${built.getProperty("scala.binary")}, but this is Spark $sparkVersion on Scala $scalaVersion: " +
            s"use ${SparkLine.coordinates()} instead"), s"$entry: $output")
      }
      assert(!output.contains("NoClassDefFoundError") && !output.contains("ClassNotFoundException"), output)
    }
  }

  test("a Spark line or Scala version with no build: the message lists the builds there are") {
    assert(SparkLine.mismatch("3.4.4", "2.12.17", "spark.plugins=spillway.SpillwayPlugin") ==
      s"Spillway ${SparkLine.coordinates()} (spark.plugins=spillway.SpillwayPlugin) is built for Spark " +
        s"${SparkLine.builtSparkLine()} on Scala ${SparkLine.builtScalaBinary()}, but this is Spark 3.4.4 on Scala 2.12.17, " +
        "for which Spillway has no build: it has one for Spark 3.5 on Scala 2.12, 3.5 on Scala 2.13, 4.0 on Scala 2.13, 4.1 on Scala 2.13")
    assert(SparkLine.mismatch("4.1.0-preview2", "2.12.18", "x").contains("no build"))
    // Every patch release of the line is served.
    assert(SparkLine.mismatch(s"${SparkLine.builtSparkLine()}.0", s"${SparkLine.builtScalaBinary()}.99", "x") == null)
  }
}
