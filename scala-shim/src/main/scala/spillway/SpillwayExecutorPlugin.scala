package spillway

import java.nio.file.Paths
import java.util.{Map => JMap}
import java.util.concurrent.TimeUnit

import scala.util.control.NonFatal

import org.apache.spark.SparkEnv
import org.apache.spark.api.plugin.{ExecutorPlugin, PluginContext}

/** What the executor component did at start. */
final case class SpillwayStartup(
    loadedFrom: String,
    blockManagerDirsSwept: Seq[String],
    orphansRemoved: Int,
    sweepFailures: Seq[String])

/**
 * The executor component of [[SpillwayPlugin]]: at start it loads the library (or reports to the
 * driver why it cannot, and fails the executor), puts the remote tier behind the local dirs if one
 * is configured (failing the executor the same way if its store does not answer), sweeps orphaned
 * plan dirs ([[OrphanSweep]]), registers the metrics ([[SpillwayMetrics]]) and starts its reports
 * to the driver ([[ExecutorReports]]); at shutdown it sends the last report and logs the counters.
 */
class SpillwayExecutorPlugin extends ExecutorPlugin {
  import SpillwayExecutorPlugin.ReportTimeoutSeconds

  private lazy val log = org.slf4j.LoggerFactory.getLogger(classOf[SpillwayPlugin])
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
    val remote = configureRemote(ctx, extraConf)
    val localDirs = SparkEnv.get.blockManager.getLocalDiskDirs.toSeq
    val (dirs, listFailures) = OrphanSweep.blockManagerDirs(localDirs)
    val (removed, sweepFailures) = OrphanSweep.sweep(dirs)
    val failures = listFailures ++ sweepFailures
    started = Some(SpillwayStartup(NativeLoader.loadedFrom(), dirs, removed, failures))
    SpillwayMetrics.register(ctx.metricRegistry())
    ExecutorReports.start(ctx, removed, SpillwayConf.UiUpdateInterval.in(SparkEnv.get.conf))
    // One line, always at INFO: operators (and project/cluster-test.sh) look for it in executor logs.
    log.info(s"Spillway: libspillway ${NativeLoader.platform()} loaded from ${NativeLoader.loadedFrom()} " +
      s"on executor ${ctx.executorID()}; swept $removed orphaned plan dir(s) in ${dirs.size} block manager dir(s) " +
      dirs.map(d => String.valueOf(Paths.get(d).getParent)).distinct.mkString("under ", ", ", "") +
      remote.fold("")(r => s"; remote tier $r"))
    // Orphans left behind waste disk but break nothing: report, do not fail the executor.
    failures.foreach(f => log.warn(s"Spillway: could not sweep orphaned plan dirs in $f"))
  }

  /**
   * Puts the remote tier, if `spark.spillway.remote.uri` is set, behind this executor's local dirs,
   * once its store answered the probe. A store that does not (a wrong endpoint, a missing bucket,
   * refused credentials) fails the executor here, as a library that cannot load does, with the
   * library's message naming the key to fix: not at the first spill, an hour into the job. Its
   * files go under the application prefix the driver's plugin named (extra conf).
   */
  private def configureRemote(ctx: PluginContext, extraConf: JMap[String, String]): Option[SpillwayConf.RemoteTier] = {
    val application = Option(extraConf.get(SpillwayDriverPlugin.RemoteApplicationKey)).getOrElse("")
    val remote = SpillwayConf.remoteTier(SparkEnv.get.conf, application)
    remote.foreach { r =>
      try NativeSpill.configureRemote(r.settings, r.pathStyle, r.ssl, r.maxSize)
      catch {
        case e @ (_: java.io.IOException | _: IllegalArgumentException) =>
          val message = s"Spillway cannot start on executor ${ctx.executorID()}: the remote spill tier " +
            s"${SpillwayConf.RemoteUri.key}=${r.uri} is not usable: ${e.getMessage}"
          reportToDriver(ctx, SpillwayExecutorFailed(ctx.executorID(), hostName, message))
          throw new IllegalStateException(message, e)
      }
    }
    remote
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
      ExecutorReports.stop()
      log.info(s"Spillway: executor stopping; ${NativeStats.read()}")
    } catch {
      case NonFatal(e) => log.warn("Spillway: could not read the native counters at shutdown", e)
    }
}

object SpillwayExecutorPlugin {
  /** How long a failing executor waits for the driver to take its report before it exits anyway. */
  val ReportTimeoutSeconds: Long = 30
}
