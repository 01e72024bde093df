package spillway

import java.io.File
import java.nio.file.Files
import java.util.concurrent.{Executors, ScheduledExecutorService, TimeUnit}
import java.util.concurrent.atomic.AtomicLong

import scala.util.control.NonFatal

import org.apache.spark.{SparkEnv, TaskContext}
import org.apache.spark.api.plugin.PluginContext

/** Sent by an executor's plugin when a task's plan spilled: what it spilled, for its stage's sums. */
final case class TaskSpillReport(spills: SpillwayStageSpills)

/**
 * The executor's side of Spillway's events ([[SpillwayEvent]]): what it tells the driver's plugin,
 * which posts the events. Started by [[SpillwayExecutorPlugin]]; without the plugin nothing is
 * sent and every call here returns at once.
 *
 *  - When a task's plan that spilled is released ([[TaskSpill]]), one one-way message with what it
 *    spilled ([[taskSpilled]]). A plan that never spilled sends nothing and reads nothing.
 *  - Every `spark.spillway.ui.updateInterval` (and once when the executor stops), the executor's
 *    state ([[SpillwayExecutorUpdate]]): the library's counters (one JNI call) and each local dir's
 *    free space, whether it is a writable directory (a statfs and two stats each) and the bytes of
 *    the files in its plan dirs (a listing of it and of each plan dir), on a daemon thread of its own.
 */
object ExecutorReports {
  private lazy val log = org.slf4j.LoggerFactory.getLogger(classOf[SpillwayPlugin])

  private final class Reporter(val ctx: PluginContext, val orphansSwept: Long, val timer: Option[ScheduledExecutorService])

  @volatile private var reporter: Option[Reporter] = None
  // The most bytes in live spill files seen by any read: at each update, as each native sort that
  // spilled ends and as each plan that spilled is released.
  private val peak = new AtomicLong

  private[spillway] def start(ctx: PluginContext, orphansSwept: Long, intervalMs: Long): Unit = {
    val timer = if (intervalMs > 0) Some(Executors.newSingleThreadScheduledExecutor { r =>
      val t = new Thread(r, "spillway-executor-updates")
      t.setDaemon(true)
      t
    }) else None
    val r = new Reporter(ctx, orphansSwept, timer)
    reporter = Some(r)
    timer.foreach(_.scheduleWithFixedDelay(() => sendUpdate(r, atStop = false), intervalMs, intervalMs, TimeUnit.MILLISECONDS))
  }

  /** Sends the last update and stops the timer. */
  private[spillway] def stop(): Unit = reporter.foreach { r =>
    reporter = None
    r.timer.foreach(_.shutdownNow())
    sendUpdate(r, atStop = true)
  }

  /** Called as `task`'s plan is released, before its files go: reports it if it spilled. */
  private[spillway] def taskSpilled(task: TaskContext, plan: SpillPlan): Unit = reporter.foreach { r =>
    val s = plan.spills
    if (s.spilled) {
      try {
        observeBytesInUse()
        val sqlExecutionId = Option(task.getLocalProperty(SqlExecutionIdKey)).flatMap(v => scala.util.Try(v.toLong).toOption)
        r.ctx.send(TaskSpillReport(SpillwayStageSpills(task.stageId(), task.stageAttemptNumber(), r.ctx.executorID(),
          sqlExecutionId.getOrElse(-1L), plans = 1, s.files, s.sortRuns, s.logicalBytes, s.diskBytes, s.localDirs)))
      } catch {
        // A lost report costs a figure in the UI, never the task.
        case NonFatal(e) => log.debug("Spillway: could not report a task's spills to the driver", e)
      }
    }
  }

  /** Spark's local property with the SQL execution a task runs for (SQLExecution.EXECUTION_ID_KEY). */
  val SqlExecutionIdKey: String = "spark.sql.execution.id"

  private def observe(bytesInUse: Long): Unit = { peak.accumulateAndGet(bytesInUse, math.max); () }

  /**
   * Reads the bytes in live spill files now into the peak (one JNI call), with the plugin on: as a
   * native sort that spilled ends, its runs still on disk, and as a plan that spilled is released.
   */
  private[spillway] def observeBytesInUse(): Unit =
    if (reporter.isDefined) {
      try observe(NativeStats.read()("bytesInUse"))
      catch { case NonFatal(e) => log.debug("Spillway: could not read the bytes in use", e) }
    }

  private def sendUpdate(r: Reporter, atStop: Boolean): Unit =
    try r.ctx.send(update(r, atStop))
    catch {
      case NonFatal(e) => log.debug("Spillway: could not send the executor's update to the driver", e)
    }

  private def update(r: Reporter, atStop: Boolean): SpillwayExecutorUpdate = {
    val stats = NativeStats.read()
    observe(stats("bytesInUse"))
    val env = SparkEnv.get
    val dirs = Option(env).map(_.blockManager.getLocalDiskDirs.toSeq).getOrElse(Nil).map(localDir)
    val conf = Option(env).map(_.conf)
    SpillwayExecutorUpdate(
      executorId = r.ctx.executorID(),
      host = Option(env).map(_.blockManager.blockManagerId.host).getOrElse(""),
      time = System.currentTimeMillis(),
      atStop = atStop,
      localDirs = dirs,
      planLimit = conf.map(SpillwayConf.MaxTempDirectorySize.in).getOrElse(SpillwayConf.MaxTempDirectorySize.defaultValue),
      executorLimit = conf.map(SpillwayConf.MaxExecutorTempDirectorySize.in)
        .getOrElse(SpillwayConf.MaxExecutorTempDirectorySize.defaultValue),
      bytesInUse = stats("bytesInUse"),
      peakBytesInUse = peak.get,
      orphansSwept = r.orphansSwept,
      plansCreated = stats("plansCreated"),
      plansSpilled = stats("plansSpilled"),
      spillFiles = stats("spillFiles"),
      bytesSpilled = stats("bytesSpilled"),
      logicalBytesSpilled = stats("logicalBytesSpilled"),
      limitFailures = stats("limitFailures"),
      filesystemErrors = stats("filesystemErrors"),
      remoteSpillFiles = stats("remoteSpillFiles"),
      remoteBytesSpilled = stats("remoteBytesSpilled"),
      remoteBytesRead = stats("remoteBytesRead"),
      remoteRetries = stats("remoteRetries"))
  }

  /** The state of local dir `d` now: its filesystem's bytes, whether it is usable, Spillway's bytes in it. */
  def localDir(d: String): SpillwayLocalDir = {
    val f = new File(d)
    SpillwayLocalDir(d, f.getTotalSpace, f.getUsableSpace, givenUp = !(f.isDirectory && Files.isWritable(f.toPath)),
      spillwayBytes = spillwayBytesIn(f))
  }

  /**
   * The bytes of the files in the plan dirs directly under `dir` (where the library makes them,
   * named [[PlanDirPrefix]]...): one listing of `dir` and one of each plan dir. A file or a dir
   * released while it looks counts as gone.
   */
  private def spillwayBytesIn(dir: File): Long =
    Option(dir.listFiles((_, name) => name.startsWith(PlanDirPrefix))).toSeq.flatten
      .flatMap(p => Option(p.listFiles()).toSeq.flatten).map { file =>
        try {
          val a = Files.readAttributes(file.toPath, classOf[java.nio.file.attribute.BasicFileAttributes])
          if (a.isRegularFile) a.size else 0L
        } catch { case _: java.io.IOException => 0L }
      }.sum

  /** The start of a plan dir's name (the library's spill.DirPrefix). */
  private[spillway] val PlanDirPrefix = "spillway-"
}
