package spillway

import java.io.{File, IOException}
import java.nio.file.{Files, Path}

import scala.util.Using

import org.apache.spark.SparkEnv
import org.apache.spark.spillway.{ListenerBusProbe, PluginMetricsProbe}

import org.apache.logging.log4j.LogManager
import org.apache.logging.log4j.core.{LogEvent, Logger => CoreLogger}
import org.apache.logging.log4j.core.appender.AbstractAppender
import org.apache.logging.log4j.core.config.Property
import org.apache.spark.sql.SparkSession
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

/**
 * SpillwayPlugin on real Spark (local mode, whose executor runs the plugin at startup) with the
 * real library: the orphan sweep at executor start, the metrics, and the fail-fast load error.
 *
 * Layout under `base`, prepared before Spark starts:
 * {{{
 *   root/                  spark.local.dir: Spark adds its own blockmgr-<uuid> here
 *     blockmgr-dead/       a plan dir of a process killed mid-spill: swept
 *     blockmgr-live/       a plan dir of a live plan of this JVM: kept
 *     blockmgr-link ->     a symlink to elsewhere/: never followed
 *     not-blockmgr/        an orphan outside any blockmgr-* dir: out of scope, kept
 *   elsewhere/             an orphan reached only through the symlink: kept
 * }}}
 */
class SpillwayPluginSuite extends AnyFunSuite with BeforeAndAfterAll {
  private val MiB = 1024 * 1024

  private var base: Path = _
  private var root: Path = _
  private var orphans: Map[String, String] = _ // parent dir name → orphaned plan dir
  private var livePlan = 0L
  private var liveDir: String = _
  private var spark: SparkSession = _

  override def beforeAll(): Unit = {
    super.beforeAll()
    base = Files.createTempDirectory("spillway-plugin-")
    root = Files.createDirectory(base.resolve("root"))
    val elsewhere = Files.createDirectory(base.resolve("elsewhere"))
    Files.createSymbolicLink(root.resolve("blockmgr-link"), elsewhere)
    val dirs = Seq("blockmgr-dead", "blockmgr-live", "not-blockmgr").map(n => Files.createDirectory(root.resolve(n))) :+ elsewhere

    val killed = Seq(root.resolve("blockmgr-dead"), root.resolve("not-blockmgr"), elsewhere)
    val result = ChildJvm.run(PluginProbe.getClass.getName.stripSuffix("$"),
      ChildJvm.libraryOption,
      "orphans" +: killed.map(_.toString))
    val files = result.output.linesIterator.collect { case l if l.startsWith("orphan=") => l.stripPrefix("orphan=") }.toSeq
    withClue(result.output) { assert(result.exitCode == 0 && files.size == killed.size) }
    orphans = files.map { f =>
      val planDir = new File(f).getParentFile
      planDir.getParentFile.getName -> planDir.getPath
    }.toMap
    assert(dirs.forall(d => Files.isDirectory(d)))

    NativeLoader.load()
    livePlan = NativeSpill.createPlan(Array(root.resolve("blockmgr-live").toString), 1L << 30)
    liveDir = TestFiles.parentOf(NativeSpill.path(NativeSpill.createTmpFile(livePlan)))

    spark = SparkSession
      .builder()
      .master("local[2]")
      .appName(getClass.getSimpleName)
      .config("spark.local.dir", root.toString)
      .config("spark.ui.enabled", "false")
      .config("spark.plugins", classOf[ObservedSpillwayPlugin].getName)
      .getOrCreate()
  }

  override def afterAll(): Unit =
    try {
      if (spark != null) spark.stop()
      if (livePlan != 0) NativeSpill.releasePlan(livePlan)
    } finally {
      if (base != null) TestFiles.deleteRecursively(base)
      super.afterAll()
    }

  private def lockOf(planDir: String): File = {
    val d = new File(planDir)
    new File(d.getParentFile, s".${d.getName}.owner")
  }

  /** Runs `body` with a capturing appender on the plugin's logger; the lines logged. */
  private def pluginLog(body: => Unit): Seq[String] = {
    val logger = LogManager.getLogger(classOf[SpillwayPlugin]).asInstanceOf[CoreLogger]
    val lines = new java.util.concurrent.ConcurrentLinkedQueue[String]()
    val appender = new AbstractAppender("spillway-plugin-capture", null, null, true, Property.EMPTY_ARRAY) {
      override def append(event: LogEvent): Unit = lines.add(s"${event.getLevel} ${event.getMessage.getFormattedMessage}")
    }
    appender.start()
    logger.addAppender(appender)
    try body
    finally {
      logger.removeAppender(appender)
      appender.stop()
    }
    lines.toArray.map(_.toString).toSeq
  }

  test("a spark.spillway.* typo set in a session is warned once, at its first job, with the closest key") {
    val typo = "spark.spillway.maxTempDirectorySise"
    spark.conf.set(typo, "1g")
    try {
      val lines = pluginLog {
        for (_ <- 1 to 3) assert(spark.range(10).count() == 10)
        ListenerBusProbe.drain(spark.sparkContext)
      }
      assert(lines == Seq(s"WARN Spillway: $typo is not a Spillway setting and is ignored; did you mean " +
        s"spark.spillway.maxTempDirectorySize? (Spillway reads ${SpillwayConf.KnownKeys.mkString(", ")})"), lines)
    } finally spark.conf.unset(typo)
  }

  test("the plugin without the SQL extension says that SQL sorts stay Spark's and what turns them native") {
    val hint = SpillwayDriverPlugin.sqlSortHint(new org.apache.spark.SparkConf(false))
    assert(hint.contains("SQL sorts stay Spark's own: spark.sql.extensions does not name spillway.SpillwayExtensions; " +
      "add it (--conf spark.sql.extensions=spillway.SpillwayExtensions) to run them as Spillway's native sort, or set " +
      "spark.spillway.sql.sort.enabled=false to keep them Spark's without this line (a session that adds it " +
      "with withExtensions runs them natively regardless)"), hint)
    assert(SpillwayDriverPlugin.sqlSortHint(new org.apache.spark.SparkConf(false)
      .set("spark.sql.extensions", "other.Ext, spillway.SpillwayExtensions")).isEmpty)
    assert(SpillwayDriverPlugin.sqlSortHint(new org.apache.spark.SparkConf(false)
      .set(SpillwayConf.SqlSortEnabledKey, "false")).isEmpty)
    // Asking for native sorts without the extension is the case the line is for.
    assert(SpillwayDriverPlugin.sqlSortHint(new org.apache.spark.SparkConf(false)
      .set(SpillwayConf.SqlSortEnabledKey, "true")).isDefined)
  }

  test("at executor start the plugin removes the orphan of a dead process in a sibling blockmgr dir, and only that") {
    val startup = ObservedSpillwayPlugin.startup.getOrElse(fail("the executor plugin did not start"))
    val own = SparkEnv.get.blockManager.getLocalDiskDirs.toSeq
    assert(startup.loadedFrom == NativeLoader.loadedFrom())
    assert(startup.sweepFailures.isEmpty, startup)
    assert(startup.blockManagerDirsSwept ==
      (own ++ Seq("blockmgr-dead", "blockmgr-live").map(n => root.resolve(n).toString)).sorted, startup)
    assert(startup.orphansRemoved == 1, startup)

    val dead = orphans("blockmgr-dead")
    assert(!TestFiles.exists(dead) && !lockOf(dead).exists(), "the dead process's plan dir and lock are gone")
    assert(TestFiles.entriesUnder(root.resolve("blockmgr-dead")).isEmpty)
    for (kept <- Seq(orphans("not-blockmgr"), orphans("elsewhere"))) {
      assert(TestFiles.exists(kept) && lockOf(kept).exists(), s"$kept is outside the sweep's scope")
    }
    assert(TestFiles.exists(liveDir) && lockOf(liveDir).exists(), "a live plan's dir is never swept")
    NativeSpill.releaseTmpFile(NativeSpill.createTmpFile(livePlan)) // and stays usable
  }

  test("the plugin's metrics are in Spark's metrics system, counts as counters, and follow the native counters") {
    def metrics(): Map[String, Long] = {
      val source = ObservedSpillwayPlugin.MetricsSource
      PluginMetricsProbe.values(source).getOrElse(fail(s"no metrics source $source"))
    }
    assert(NativeStats.names.size == NativeSpill.STATS_LENGTH)
    val before = metrics()
    assert(before.keySet == NativeStats.names.toSet)
    assert(PluginMetricsProbe.counterNames(ObservedSpillwayPlugin.MetricsSource).contains(
      Set("plansCreated", "plansSpilled", "dirsCreated", "spillFiles", "bytesSpilled", "limitFailures",
        "filesystemErrors", "logicalBytesSpilled", "remoteSpillFiles", "remoteBytesSpilled", "remoteBytesRead",
        "remoteRetries")),
      "counts that only grow are counters; livePlans, bytesInUse and goHeapBytes are gauges")

    // Two tasks spill 1 MiB each (incompressible: lz4 stores it raw, so it takes 1 MiB and its
    // framing on disk); one of them then tries a second file, whose first 256 KiB chunk would pass
    // its plan's limit of 1 MiB + 128 KiB: refused, keeping nothing.
    val sc = spark.sparkContext
    val MiB = this.MiB // a local: the task closure must not capture the suite
    sc.setLocalProperty(SpillwayConf.MaxTempDirectorySizeKey, "1152k")
    val outcomes = try {
      sc.parallelize(0 until 2, 2).map { p =>
        val plan = TaskSpill.plan()
        val data = new Array[Byte](MiB)
        new java.util.Random(p).nextBytes(data)
        val file = plan.createSpillFile()
        Using.resource(file.outputStream())(_.write(data))
        val outcome = if (p == 0) {
          val second = plan.createSpillFile()
          try {
            Using.resource(second.outputStream())(_.write(data))
            "written"
          } catch {
            case _: SpillLimitExceededException => "refused"
          }
        } else ""
        (outcome, file.bytesOnDisk, plan.usedDiskSpace)
      }.collect()
    } finally sc.setLocalProperty(SpillwayConf.MaxTempDirectorySizeKey, null)
    assert(outcomes.map(_._1).mkString == "refused")
    assert(outcomes.forall { case (_, onDisk, used) => onDisk == used && onDisk > MiB }, outcomes.toSeq)
    val onDisk = outcomes.map(_._2).sum
    // A plan whose only local dir does not exist: its first file fails on the filesystem.
    val broken = NativeSpill.createPlan(Array(base.resolve("missing").toString), MiB)
    try intercept[IOException](NativeSpill.createTmpFile(broken))
    finally NativeSpill.releasePlan(broken)

    val after = metrics()
    val delta = NativeStats.names.map(n => n -> (after(n) - before(n))).toMap
    withClue(s"before $before, after $after: ") {
      assert(delta("plansCreated") == 3, "the two tasks' plans and the broken one")
      assert(delta("plansSpilled") == 2)
      assert(delta("dirsCreated") == 2)
      assert(delta("spillFiles") == 3)
      assert(delta("bytesSpilled") == onDisk, "bytes on disk, as the files report them")
      assert(delta("logicalBytesSpilled") == 2 * MiB, "the bytes written, before framing")
      assert(delta("limitFailures") == 1)
      assert(delta("filesystemErrors") >= 1)
      assert(delta("livePlans") == 0 && delta("bytesInUse") == 0, "the tasks' plans are released")
      assert(after("livePlans") >= 1 && after("bytesInUse") >= 0) // at least this suite's live plan
      assert(after("goHeapBytes") > 0)
    }
  }

  test("each poll of a metric reads the library's counters then, as NativeStats does") {
    val source = ObservedSpillwayPlugin.MetricsSource
    def metric(name: String): Long = PluginMetricsProbe.values(source).getOrElse(fail(s"no metrics source $source"))(name)
    val first = metric("spillFiles")
    val livePlans = metric("livePlans")
    val plan = NativeSpill.createPlan(Array(root.resolve("blockmgr-live").toString), MiB)
    try {
      assert(metric("livePlans") == livePlans + 1, "a plan created since the last poll")
      NativeSpill.createTmpFile(plan)
      assert(metric("spillFiles") == first + 1, "a file created since the last poll")
      assert(metric("spillFiles") == NativeStats.read()("spillFiles"))
    } finally NativeSpill.releasePlan(plan)
    assert(metric("livePlans") == livePlans)
  }

  test("blockManagerDirs: the given dirs and their real blockmgr-* siblings, no symlinks, no other names") {
    val own = root.resolve("blockmgr-live").toString
    val (dirs, failures) = OrphanSweep.blockManagerDirs(Seq(own))
    val sparkDirs = SparkEnv.get.blockManager.getLocalDiskDirs.toSeq
    assert(failures.isEmpty)
    assert(dirs == (sparkDirs ++ Seq("blockmgr-dead", "blockmgr-live").map(n => root.resolve(n).toString)).sorted)
    val (missing, missingFailures) = OrphanSweep.blockManagerDirs(Seq(base.resolve("gone/blockmgr-x").toString))
    assert(missing == Seq(base.resolve("gone/blockmgr-x").toString), "its own dir is kept even if the parent cannot be listed")
    assert(missingFailures.size == 1 && missingFailures.head.contains("gone"), missingFailures)
  }

  test("a classpath without this platform's library: the error names the platforms it has and what to do") {
    val result = ChildJvm.run(PluginProbe.getClass.getName.stripSuffix("$"), Seq("-Dos.arch=riscv64"), Seq("wrong-platform"))
    val out = result.output.linesIterator.flatMap(_.split("=", 2) match {
      case Array(k, v) => Some(k -> v)
      case _ => None
    }).toMap
    withClue(result.output) {
      assert(result.exitCode == 0)
      assert(out("platform") == s"${NativePlatform.os()}/riscv64")
      val bundled = out("bundled").split(",").toSeq
      assert(bundled.contains(NativeLoader.platform()), "the build bundles this machine's platform (and any cross-built)")
      val error = out("error")
      assert(error.startsWith("java.lang.UnsatisfiedLinkError: Spillway native library could not be loaded"))
      assert(error.contains(s"no native library for ${NativePlatform.os()}/riscv64") &&
        error.contains(s"carries it for ${bundled.mkString(", ")} only") && error.contains("make lib") &&
        error.contains(s"-D${NativeLoader.LIBRARY_PATH_PROPERTY}="), error)
    }
  }

  test("a library that cannot be loaded fails the executor at startup with the cause and what to do") {
    val missing = "/nonexistent/dir/libspillway.so"
    val result = ChildJvm.run(PluginProbe.getClass.getName.stripSuffix("$"),
      ChildJvm.sparkOptions ++ Seq("-Xmx512m", s"-D${NativeLoader.LIBRARY_PATH_PROPERTY}=$missing"),
      Seq("load-failure"))
    val errors = result.output.linesIterator.filter(_.startsWith("error=")).toSeq
    withClue(result.output) {
      assert(result.exitCode == 0)
      assert(!result.output.contains("started=true"))
      assert(errors.headOption.exists(e => e.contains("Spillway cannot start on executor driver") &&
        e.contains("spark.plugins=spillway.SpillwayPlugin") && e.contains(missing) &&
        e.contains(s"-D${NativeLoader.LIBRARY_PATH_PROPERTY}=")), errors)
      assert(errors.exists(_.startsWith("error=java.io.FileNotFoundException")), "the first cause is kept")
    }
  }

  test("an executor's report that Spillway cannot start fails the running job and every later one with its message") {
    val result = ChildJvm.run(PluginProbe.getClass.getName.stripSuffix("$"),
      ChildJvm.sparkOptions ++ Seq("-Xmx512m"), Seq("executor-failed"))
    withClue(result.output) {
      assert(result.exitCode == 0)
      assert(result.output.linesIterator.count(_ == "reply=true") == 2)
      for (job <- Seq("running", "later")) {
        val error = result.output.linesIterator.find(_.startsWith(s"$job.error=")).getOrElse(fail(s"the $job job did not fail"))
        assert(error.contains("cancelled Spillway cannot start on executor 7: broken (reported by executor 7 on host-a;"), error)
      }
      assert(!result.output.contains("executor 8: broken (reported"), "only the first report acts")
    }
  }
}
