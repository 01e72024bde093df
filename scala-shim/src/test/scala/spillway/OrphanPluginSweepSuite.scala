package spillway

import java.nio.file.{Files, Path, Paths}

import org.apache.spark.SparkEnv
import org.apache.spark.sql.SparkSession
import org.scalatest.funsuite.AnyFunSuite

/**
 * The orphans of killed executors (docs/reliability.md), end to end: an executor-like JVM killed with
 * SIGKILL while spilling into a `blockmgr-*` dir leaves its plan dir; the next executor start on
 * the same local dirs (Spark in local mode with spark.plugins=spillway.SpillwayPlugin, whose
 * executor component sweeps its own and sibling block manager dirs) removes it, while a live JVM's
 * plan dir in another sibling stays.
 */
class OrphanPluginSweepSuite extends AnyFunSuite {
  private val PluginClass = classOf[SpillwayPlugin].getName

  private def lockOf(planDir: Path): Path = planDir.resolveSibling(s".${planDir.getFileName}.owner")

  private def startHolder(dir: Path): (ChildJvm, Path) = {
    val child = ChildJvm.start(SpillChild.getClass.getName.stripSuffix("$"), Seq("-Xmx128m", "-XX:+UseSerialGC"), Seq("hold", dir.toString))
    try { (child, Paths.get(child.awaitLine("ready ").split(" ")(1))) }
    catch { case t: Throwable => child.destroy(); throw t }
  }

  test("the next executor start with SpillwayPlugin removes the plan dir of a JVM killed mid-spill, not a live one's") {
    val base = Files.createTempDirectory("spillway-orphan-plugin-")
    val root = Files.createDirectory(base.resolve("root")) // spark.local.dir
    val (killed, deadDir) = startHolder(Files.createDirectory(root.resolve("blockmgr-killed")))
    var alive: ChildJvm = null
    var spark: SparkSession = null
    try {
      val (a, liveDir) = startHolder(Files.createDirectory(root.resolve("blockmgr-alive")))
      alive = a
      assert(killed.kill9() == ChildJvm.KilledBySigkill)
      assert(Files.isDirectory(deadDir) && Files.exists(lockOf(deadDir)), "kill -9 left no orphan to sweep")

      spark = SparkSession.builder()
        .master("local[1]")
        .appName(getClass.getSimpleName)
        .config("spark.local.dir", root.toString)
        .config("spark.ui.enabled", "false")
        .config("spark.plugins", PluginClass)
        .getOrCreate()
      // The executor's own block manager dir is a sibling of the two: the sweep covered them.
      val own = SparkEnv.get.blockManager.getLocalDiskDirs.toSeq.map(Paths.get(_))
      assert(own.forall(_.getParent == root), own)

      assert(!Files.exists(deadDir) && !Files.exists(lockOf(deadDir)), "the killed JVM's plan dir survived the executor start")
      assert(Files.isDirectory(liveDir) && Files.exists(lockOf(liveDir)), "the live JVM's plan dir was swept")
      alive.send("release")
      alive.awaitLine("released")
      assert(alive.waitFor(60) == 0)
      assert(!Files.exists(liveDir))
    } finally {
      try if (spark != null) spark.stop()
      finally {
        killed.destroy()
        if (alive != null) alive.destroy()
        TestFiles.deleteRecursively(base)
      }
    }
  }
}
