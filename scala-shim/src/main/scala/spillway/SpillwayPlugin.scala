package spillway

import java.io.IOException
import java.nio.file.{DirectoryIteratorException, Files, LinkOption, Path, Paths}
import java.util.{Map => JMap}

import scala.jdk.CollectionConverters._
import scala.util.Using
import scala.util.control.NonFatal

import com.codahale.metrics.{Gauge, MetricRegistry}
import org.apache.spark.SparkEnv
import org.apache.spark.api.plugin.{DriverPlugin, ExecutorPlugin, PluginContext, SparkPlugin}

/**
 * Spillway's Spark plugin: `spark.plugins=spillway.SpillwayPlugin`.
 *
 * On each executor, at start: loads the native library (a failure fails the executor with the
 * cause and what to do, instead of failing every task that spills later), removes the plan dirs
 * that dead executors left in this executor's and its siblings' block manager dirs, and registers
 * the library's counters as metrics (source `plugin.spillway.SpillwayPlugin`). There is no driver
 * component: plans live on executors (in local mode the executor component runs in the driver JVM).
 */
class SpillwayPlugin extends SparkPlugin {
  override def driverPlugin(): DriverPlugin = null
  override def executorPlugin(): ExecutorPlugin = new SpillwayExecutorPlugin
}

/** What the executor component did at start, kept for logs, tests and the cluster check. */
final case class SpillwayStartup(
    loadedFrom: String,
    blockManagerDirsSwept: Seq[String],
    orphansRemoved: Int,
    sweepFailures: Seq[String])

object SpillwayPlugin {
  /** Metric names, in the order of [[NativeSpill.stats]]'s counters. */
  val MetricNames: Seq[String] = Seq(
    "livePlans",
    "plansSpilled",
    "dirsCreated",
    "spillFiles",
    "bytesSpilled",
    "limitFailures",
    "filesystemErrors",
    "bytesInUse",
    "goHeapBytes")

  /** How long the metrics reuse one read of the counters: a reporter's poll makes one JNI call, not nine. */
  val MetricsMaxAgeNanos: Long = 1000L * 1000 * 1000

  @volatile private var lastStartup: Option[SpillwayStartup] = None
  @volatile private var lastStats: Option[NativeStatsCache] = None

  /** What the executor component of this JVM did at its last start; None if it never started. */
  def startup: Option[SpillwayStartup] = lastStartup

  private[spillway] def recordStartup(s: SpillwayStartup, stats: NativeStatsCache): Unit = {
    lastStartup = Some(s)
    lastStats = Some(stats)
  }

  /** Makes the next read of the registered metrics read the counters anew (for tests). */
  private[spillway] def expireMetrics(): Unit = lastStats.foreach(_.expire())

  /**
   * The executor's block manager dirs and their siblings: every `blockmgr-*` directory (a real
   * one, not a symlink) directly inside the parent of one of `localDirs`, the `localDirs`
   * themselves included. Cluster managers give each application its own parent (standalone's
   * `executor-*` app dirs, YARN's `appcache/<app>`), so the siblings are the dirs of this
   * application's earlier executors on this host, which is where a killed executor's orphans are.
   * With `spark.local.dir` used directly (local mode, no cluster manager dirs) they are those of
   * every Spark JVM on the host using the same dir. Dirs this process cannot list (another user's)
   * are skipped.
   *
   * @return the dirs, and the parents that could not be listed (with why)
   */
  def blockManagerDirs(localDirs: Seq[String]): (Seq[String], Seq[String]) = {
    val own = localDirs.map(d => Paths.get(d).toAbsolutePath.normalize)
    val failures = Seq.newBuilder[String]
    val siblings = own.flatMap(d => Option(d.getParent)).distinct.flatMap { root =>
      try {
        Using.resource(Files.newDirectoryStream(root, "blockmgr-*")) { entries =>
          entries.asScala.filter(isSweepable).toVector
        }
      } catch {
        case e @ (_: IOException | _: DirectoryIteratorException) =>
          failures += s"$root: $e"
          Vector.empty
      }
    }
    ((own ++ siblings).map(_.toString).distinct.sorted, failures.result())
  }

  private def isSweepable(p: Path): Boolean =
    Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS) && Files.isReadable(p) && Files.isExecutable(p)

  /**
   * Removes orphaned plan dirs directly inside each of `dirs` (one call per dir, so that one
   * unusable dir does not hide what was removed in the others).
   *
   * @return how many plan dirs were removed, and the dirs that failed (with why)
   */
  def sweep(dirs: Seq[String]): (Int, Seq[String]) = {
    var removed = 0
    val failures = Seq.newBuilder[String]
    dirs.foreach { dir =>
      try removed += NativeSpill.sweepOrphans(Array(dir))
      catch {
        case NonFatal(e) => failures += s"$dir: ${e.getMessage}"
      }
    }
    (removed, failures.result())
  }

  /**
   * Registers one gauge per counter of [[NativeSpill.stats]] in `registry`, all reading through
   * `stats` (so one poll of all gauges costs one JNI call).
   */
  def registerMetrics(registry: MetricRegistry, stats: NativeStatsCache): Unit =
    MetricNames.zipWithIndex.foreach { case (name, i) =>
      registry.register(name, new Gauge[Long] { override def getValue: Long = stats(i) })
    }
}

/** The executor component of [[SpillwayPlugin]]. */
class SpillwayExecutorPlugin extends ExecutorPlugin {
  import SpillwayPlugin._

  private lazy val log = org.slf4j.LoggerFactory.getLogger(classOf[SpillwayPlugin])
  private[spillway] val stats = new NativeStatsCache(MetricsMaxAgeNanos)

  override def init(ctx: PluginContext, extraConf: JMap[String, String]): Unit = {
    try NativeLoader.load()
    catch {
      // A RuntimeException, not the LinkageError: Spark's executor backend turns non-fatal init
      // failures into "Unable to create executor due to <message>" and exits; a LinkageError would
      // escape that handler and leave a half-started executor.
      case e: UnsatisfiedLinkError =>
        throw new IllegalStateException(
          s"Spillway cannot start on executor ${ctx.executorID()} (spark.plugins=${classOf[SpillwayPlugin].getName}): " +
            e.getMessage,
          e)
    }
    val localDirs = SparkEnv.get.blockManager.getLocalDiskDirs.toSeq
    val (dirs, listFailures) = blockManagerDirs(localDirs)
    val (removed, sweepFailures) = sweep(dirs)
    val failures = listFailures ++ sweepFailures
    recordStartup(SpillwayStartup(NativeLoader.loadedFrom(), dirs, removed, failures), stats)
    registerMetrics(ctx.metricRegistry(), stats)
    // One line, always at INFO: operators (and project/cluster-test.sh) look for it in executor logs.
    log.info(s"Spillway: libspillway ${NativeLoader.platform()} loaded from ${NativeLoader.loadedFrom()} " +
      s"on executor ${ctx.executorID()}; swept $removed orphaned plan dir(s) in ${dirs.size} block manager dir(s) " +
      dirs.map(d => String.valueOf(Paths.get(d).getParent)).distinct.mkString("under ", ", ", ""))
    // Orphans left behind waste disk but break nothing: report, do not fail the executor.
    failures.foreach(f => log.warn(s"Spillway: could not sweep orphaned plan dirs in $f"))
  }

  override def shutdown(): Unit =
    try {
      val s = stats.fresh()
      log.info(s"Spillway: executor stopping; ${MetricNames.zip(s).map { case (n, v) => s"$n=$v" }.mkString(", ")}")
    } catch {
      case NonFatal(e) => log.warn("Spillway: could not read the native counters at shutdown", e)
    }
}

/**
 * [[NativeSpill.stats]], read at most once per `maxAgeNanos` (a metrics reporter polls every gauge
 * in turn; they share one read). Thread-safe.
 */
final class NativeStatsCache(maxAgeNanos: Long, nanoTime: () => Long = () => System.nanoTime()) {
  // Lazy: touching NativeSpill loads the library, which only init may do (and report).
  private lazy val values = new Array[Long](NativeSpill.STATS_LENGTH)
  private var readAt = 0L
  private var valid = false

  /** Counter `i` of [[NativeSpill.stats]], as of a read at most `maxAgeNanos` old. */
  def apply(i: Int): Long = synchronized {
    val now = nanoTime()
    if (!valid || now - readAt >= maxAgeNanos) read(now)
    values(i)
  }

  /** Makes the next read read the counters anew. */
  def expire(): Unit = synchronized { valid = false }

  /** All counters, read now. */
  def fresh(): Seq[Long] = synchronized {
    read(nanoTime())
    values.toSeq
  }

  private def read(now: Long): Unit = {
    NativeSpill.stats(values)
    readAt = now
    valid = true
  }
}
