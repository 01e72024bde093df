package spillway

import java.util.{Map => JMap}
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicBoolean

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.spark.SparkContext
import org.apache.spark.api.plugin.{DriverPlugin, PluginContext}
import org.apache.spark.scheduler.{SparkListener, SparkListenerJobStart}
import org.apache.spark.spillway.SparkInternals

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
 *
 * It also posts Spillway's events ([[SpillwayEvent]]) from the executors' reports and the SQL
 * queries' plans, and adds the Spillway tab to the live UI.
 */
class SpillwayDriverPlugin extends DriverPlugin {
  private lazy val log = org.slf4j.LoggerFactory.getLogger(classOf[SpillwayPlugin])
  @volatile private var sc: SparkContext = _
  private val failed = new AtomicBoolean(false)
  @volatile private var sweeper: Option[RemoteSweeper] = None

  override def init(sc: SparkContext, ctx: PluginContext): JMap[String, String] = {
    this.sc = sc
    // Throws on a bad value: SparkContext creation fails with it, before any executor starts.
    SpillwayConf.validate(sc.getConf)
    SpillwayConf.unknownKeyWarningsOnce(sc.getConf.getAll.map(_._1)).foreach(w => log.warn(s"Spillway: $w"))
    SpillwayDriverPlugin.sqlSortHint(sc.getConf).foreach(h => log.warn(s"Spillway: $h"))
    // A typo set in a session (`spark.conf.set`, `SET`) reaches the jobs as a local property.
    sc.addSparkListener(new SparkListener {
      override def onJobStart(jobStart: SparkListenerJobStart): Unit =
        Option(jobStart.properties).foreach { p =>
          SpillwayConf.unknownKeyWarningsOnce(p.stringPropertyNames.asScala).foreach(w => log.warn(s"Spillway: $w"))
        }
    })
    startEvents(sc)
    remoteApplication(sc).asJava
  }

  // Spillway's events (SpillwayEvents.scala): the executors' reports summed per stage, the SQL
  // queries' sorts, and the Spillway tab of the live UI that shows them.
  @volatile private var stageSums: StageSpillSums = _
  // The last update posted per executor: one per executor of the application.
  private val lastUpdates = new java.util.concurrent.ConcurrentHashMap[String, SpillwayExecutorUpdate]()

  private def startEvents(sc: SparkContext): Unit = {
    val post: SpillwayEvent => Unit = e => SparkInternals.postEvent(sc, e)
    stageSums = new StageSpillSums(post)
    sc.addSparkListener(stageSums)
    sc.addSparkListener(new spillway.sql.SqlSortReports(post))
    org.apache.spark.spillway.ui.SpillwayTab.attachLive(sc)
  }

  /**
   * With the remote tier configured: names this application's prefix in the store, for the
   * executors' plugins (as extra conf: spark.app.id is not known yet when plugins start, and an
   * executor of local mode starts before it is), and starts the [[RemoteSweeper]].
   */
  private def remoteApplication(sc: SparkContext): Map[String, String] = {
    val name = SpillwayDriverPlugin.newApplicationName()
    SpillwayConf.remoteTier(sc.getConf, name).fold(Map.empty[String, String]) { tier =>
      log.info(s"Spillway: this application's remote spill files go under ${tier.uri}/spillway-app-$name/")
      try {
        NativeLoader.load()
        val s = new RemoteSweeper(tier, SpillwayConf.RemoteOrphanAge.in(sc.getConf))
        s.start()
        sweeper = Some(s)
      } catch {
        case e: UnsatisfiedLinkError =>
          log.warn(s"Spillway: the driver cannot load the library, so it sweeps nothing from ${tier.uri}: ${e.getMessage}")
      }
      Map(SpillwayDriverPlugin.RemoteApplicationKey -> name)
    }
  }

  override def shutdown(): Unit = sweeper.foreach(_.stop())

  override def receive(message: AnyRef): AnyRef = message match {
    case f: SpillwayExecutorFailed =>
      if (failed.compareAndSet(false, true)) endApplication(f)
      java.lang.Boolean.TRUE
    // One-way messages (PluginContext.send): no reply, which Spark would log as unexpected.
    case TaskSpillReport(spills) =>
      Option(stageSums).foreach(_.add(spills))
      null
    case u: SpillwayExecutorUpdate =>
      val last = lastUpdates.put(u.executorId, u)
      if (last == null || u.atStop || u.differsFrom(last)) SparkInternals.postEvent(sc, u)
      null
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

object SpillwayDriverPlugin {
  /** The extra conf key under which the driver gives the executors their remote application's name. */
  val RemoteApplicationKey = "remote.application"

  /** A name for an application's prefix in the remote tier, unique to this run of it. */
  def newApplicationName(): String =
    f"${System.currentTimeMillis()}%d-${java.util.UUID.randomUUID().toString.take(8)}"

  private val ExtensionClass = "spillway.SpillwayExtensions"

  /**
   * With the plugin on and the SQL extension off, the one line that says SQL sorts stay Spark's and
   * what turns them native; none once `spark.spillway.sql.sort.enabled=false` says the user chose
   * Spark's (with `true` and no extension, the sorts the user asked for would silently not come).
   * A session that adds the extension in code (`withExtensions`) is not seen here; the line says so.
   */
  def sqlSortHint(conf: org.apache.spark.SparkConf): Option[String] = {
    val extensions = conf.get("spark.sql.extensions", "").split(",").map(_.trim)
    val keptSparks = conf.getOption(SpillwayConf.SqlSortEnabledKey).exists(_.trim.equalsIgnoreCase("false"))
    if (extensions.contains(ExtensionClass) || keptSparks) None
    else Some(s"SQL sorts stay Spark's own: spark.sql.extensions does not name $ExtensionClass; add it " +
      s"(--conf spark.sql.extensions=$ExtensionClass) to run them as Spillway's native sort, or set " +
      s"${SpillwayConf.SqlSortEnabledKey}=false to keep them Spark's without this line (a session that adds it " +
      "with withExtensions runs them natively regardless)")
  }
}
