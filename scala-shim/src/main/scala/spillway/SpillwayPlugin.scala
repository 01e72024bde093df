package spillway

import java.io.IOException
import java.nio.file.{DirectoryIteratorException, Files, LinkOption, Path, Paths}
import java.util.{Map => JMap}
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicBoolean

import scala.jdk.CollectionConverters._
import scala.util.Using
import scala.util.control.NonFatal

import com.codahale.metrics.{Counter, Gauge, MetricRegistry}
import org.apache.spark.{SparkContext, SparkEnv}
import org.apache.spark.api.plugin.{DriverPlugin, ExecutorPlugin, PluginContext, SparkPlugin}
import org.apache.spark.scheduler.{SparkListener, SparkListenerJobStart}


/**
 * Spillway's Spark plugin: `spark.plugins=spillway.SpillwayPlugin`.
 *
 * On the driver, at startup: checks every `spark.spillway.*` setting (a bad value fails
 * SparkContext creation, so spark-submit fails at once with what to write instead; an unknown key
 * is logged with the closest known one), and ends the application when an executor reports that
 * Spillway cannot start there (see [[SpillwayDriverPlugin]]).
 *
 * On each executor, at start: loads the native library (a failure is reported to the driver, then
 * fails the executor with the cause and what to do, instead of failing every task that spills
 * later), removes the plan dirs that dead executors left in this executor's and its siblings' block
 * manager dirs, and registers the library's counters as metrics (source
 * `plugin.spillway.SpillwayPlugin`). In local mode both components run in the driver JVM.
 */
class SpillwayPlugin extends SparkPlugin {
  override def driverPlugin(): DriverPlugin = new SpillwayDriverPlugin
  override def executorPlugin(): ExecutorPlugin = new SpillwayExecutorPlugin
}

/** Sent by an executor's plugin to the driver's when Spillway cannot start on that executor. */
final case class SpillwayExecutorFailed(executorId: String, host: String, message: String)

/**
 * The driver component of [[SpillwayPlugin]].
 *
 * A cluster manager relaunches an executor that dies at start (Spark standalone does so without
 * end), so an executor that cannot load the library must not be left to fail on its own: its
 * plugin reports the failure here first, and from then on every job of the application, running or
 * submitted later, fails with that message ("Job 0 cancelled Spillway cannot start on executor 1
 * ..."), and no more executors are requested. The driver program ends as on any failed job, the
 * same on every cluster manager. The SparkContext is not stopped under the program's feet: a job
 * submitted after a stop would fail with an unrelated error, not the message. One report suffices:
 * every executor of an application gets the same jar and options.
 */
class SpillwayDriverPlugin extends DriverPlugin {
  private lazy val log = org.slf4j.LoggerFactory.getLogger(classOf[SpillwayPlugin])
  @volatile private var sc: SparkContext = _
  private val failed = new AtomicBoolean(false)

  override def init(sc: SparkContext, ctx: PluginContext): JMap[String, String] = {
    this.sc = sc
    // Throws on a bad value: SparkContext creation fails with it, before any executor starts.
    SpillwayConf.validate(sc.getConf).foreach(w => log.warn(s"Spillway: $w"))
    java.util.Collections.emptyMap()
  }

  override def receive(message: AnyRef): AnyRef = message match {
    case f: SpillwayExecutorFailed =>
      if (failed.compareAndSet(false, true)) endApplication(f)
      java.lang.Boolean.TRUE
    case other => throw new IllegalArgumentException(s"unexpected message to the Spillway driver plugin: $other")
  }

  private def endApplication(f: SpillwayExecutorFailed): Unit = {
    val reason = s"${f.message} (reported by executor ${f.executorId} on ${f.host}; Spillway fails every " +
      "job of this application and requests no more executors: a cluster manager would relaunch " +
      "executors that fail the same way)"
    log.error(s"Spillway: $reason")
    val context = sc
    // Every job started from now on fails with the reason (the driver program may not have
    // submitted its first job yet); the listener first, so that no job slips between.
    context.addSparkListener(new SparkListener {
      override def onJobStart(jobStart: SparkListenerJobStart): Unit = context.cancelJob(jobStart.jobId, reason)
    })
    // Not on the RPC thread that delivered the message: asking the cluster manager waits for it.
    val stopper = new Thread(() => {
      try {
        context.statusTracker.getActiveJobIds().foreach(id => context.cancelJob(id, reason))
        if (!context.requestTotalExecutors(0, 0, Map.empty)) {
          log.warn("Spillway: the cluster manager did not take the request for 0 executors")
        }
        // A job whose start the status tracker had not seen yet, nor the listener: cancel again.
        Thread.sleep(TimeUnit.SECONDS.toMillis(1))
        context.statusTracker.getActiveJobIds().foreach(id => context.cancelJob(id, reason))
      } catch {
        case NonFatal(e) => log.warn("Spillway: could not cancel the jobs or release the executors", e)
      }
    }, "spillway-end-application")
    stopper.setDaemon(true)
    stopper.start()
  }
}

/** What the executor component did at start. */
final case class SpillwayStartup(
    loadedFrom: String,
    blockManagerDirsSwept: Seq[String],
    orphansRemoved: Int,
    sweepFailures: Seq[String])

object SpillwayPlugin {
  /**
   * Metric names, in the order of [[NativeSpill.stats]]'s counters: the library's own names
   * ([[NativeSpill.statsNames]]), so the metrics are exactly what the library counts, for every
   * caller (tasks, sorts and direct users of [[NativeSpill]] alike). Loads the library.
   */
  lazy val MetricNames: Seq[String] = NativeSpill.statsNames().toSeq

  /** How long the metrics reuse one read of the counters: a reporter's poll makes one JNI call, not one per metric. */
  val MetricsMaxAgeNanos: Long = 1000L * 1000 * 1000

  /** How long a failing executor waits for the driver to take its report before it exits anyway. */
  val ReportTimeoutSeconds: Long = 30

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
   * The metrics that only grow (counts since the JVM started, [[NativeSpill.statsKinds]]
   * `count`): registered as Dropwizard counters, so that sinks report them as counters (a rate,
   * not a level); the others (`level`) are gauges. Loads the library.
   */
  lazy val CounterNames: Set[String] =
    MetricNames.zip(NativeSpill.statsKinds()).collect { case (name, "count") => name }.toSet

  /**
   * Registers one metric per counter of [[NativeSpill.stats]] in `registry` (a counter for
   * [[CounterNames]], a gauge for the others), all reading through `stats` (so one poll of all of
   * them costs one JNI call).
   */
  def registerMetrics(registry: MetricRegistry, stats: NativeStatsCache): Unit =
    MetricNames.zipWithIndex.foreach { case (name, i) =>
      if (CounterNames.contains(name)) {
        // Read-only: the value is the library's; inc/dec would only move the unused local count.
        registry.register(name, new Counter { override def getCount: Long = stats(i) })
      } else {
        registry.register(name, new Gauge[Long] { override def getValue: Long = stats(i) })
      }
    }
}

/**
 * The executor component of [[SpillwayPlugin]]. Its metrics reuse one read of the counters for
 * `metricsMaxAgeNanos` (a subclass of [[SpillwayPlugin]] may pass 0 to read them on every poll).
 */
class SpillwayExecutorPlugin(metricsMaxAgeNanos: Long = SpillwayPlugin.MetricsMaxAgeNanos) extends ExecutorPlugin {
  import SpillwayPlugin._

  private lazy val log = org.slf4j.LoggerFactory.getLogger(classOf[SpillwayPlugin])
  private val stats = new NativeStatsCache(metricsMaxAgeNanos)
  @volatile private var started: Option[SpillwayStartup] = None

  /** What [[init]] did; None before it ran or if it failed. */
  def startup: Option[SpillwayStartup] = started

  override def init(ctx: PluginContext, extraConf: JMap[String, String]): Unit = {
    try NativeLoader.load()
    catch {
      // A RuntimeException, not the LinkageError: Spark's executor backend turns non-fatal init
      // failures into "Unable to create executor due to <message>" and exits; a LinkageError would
      // escape that handler and leave a half-started executor.
      case e: UnsatisfiedLinkError =>
        val message = s"Spillway cannot start on executor ${ctx.executorID()} " +
          s"(spark.plugins=${classOf[SpillwayPlugin].getName}): ${e.getMessage}"
        reportToDriver(ctx, SpillwayExecutorFailed(ctx.executorID(), hostName, message))
        throw new IllegalStateException(message, e)
    }
    val localDirs = SparkEnv.get.blockManager.getLocalDiskDirs.toSeq
    val (dirs, listFailures) = blockManagerDirs(localDirs)
    val (removed, sweepFailures) = sweep(dirs)
    val failures = listFailures ++ sweepFailures
    started = Some(SpillwayStartup(NativeLoader.loadedFrom(), dirs, removed, failures))
    registerMetrics(ctx.metricRegistry(), stats)
    // One line, always at INFO: operators (and project/cluster-test.sh) look for it in executor logs.
    log.info(s"Spillway: libspillway ${NativeLoader.platform()} loaded from ${NativeLoader.loadedFrom()} " +
      s"on executor ${ctx.executorID()}; swept $removed orphaned plan dir(s) in ${dirs.size} block manager dir(s) " +
      dirs.map(d => String.valueOf(Paths.get(d).getParent)).distinct.mkString("under ", ", ", ""))
    // Orphans left behind waste disk but break nothing: report, do not fail the executor.
    failures.foreach(f => log.warn(s"Spillway: could not sweep orphaned plan dirs in $f"))
  }

  // Not ctx.hostname(): it reads the RPC env's server address, which an executor does not have
  // (a NullPointerException in Spark 4.1).
  private def hostName: String =
    try SparkEnv.get.blockManager.blockManagerId.host
    catch {
      case NonFatal(_) => try java.net.InetAddress.getLocalHost.getHostName catch { case NonFatal(_) => "unknown host" }
    }

  /**
   * Tells the driver's plugin, which ends the application, and waits (boundedly) for its answer:
   * this executor exits right after, and a one-way message could be lost with it. In local mode the
   * executor is the driver, whose SparkContext creation fails with the error itself.
   */
  private def reportToDriver(ctx: PluginContext, failure: SpillwayExecutorFailed): Unit =
    if (ctx.executorID() != "driver") { // SparkContext.DRIVER_IDENTIFIER, private[spark]
      val ask = new Thread(() => {
        try ctx.ask(failure)
        catch {
          case NonFatal(e) => log.warn("Spillway: could not report the failure to the driver", e)
        }
      }, "spillway-report-failure")
      ask.setDaemon(true)
      ask.start()
      ask.join(TimeUnit.SECONDS.toMillis(ReportTimeoutSeconds))
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
