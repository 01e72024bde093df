package spillway

import java.util.concurrent.ConcurrentHashMap

import scala.util.control.NonFatal

import org.apache.spark.{SparkEnv, TaskContext}


/**
 * One spill plan per Spark task, created on the task's first request (a task that never asks gets
 * none and touches no filesystem) and released by a task completion listener, which runs on
 * success, failure and cancellation.
 *
 * The plan spills into the executor's local dirs (`SparkEnv.get.blockManager.getLocalDiskDirs`) with
 * the limits `spark.spillway.maxTempDirectorySize` (this plan) and
 * `spark.spillway.maxExecutorTempDirectorySize` (all plans of the executor) read at creation: the
 * session value (a task local property) first, then the Spark conf.
 */
object TaskSpill {
  private val plans = new ConcurrentHashMap[TaskContext, SpillPlan]()

  /**
   * The executor's local dirs, registered with the library once per SparkEnv: every plan is
   * created from `handle` (NativeSpill.createPlanIn), so no path is converted or validated per
   * plan. A registration is released when a new SparkEnv replaces it (a new SparkContext in the
   * same JVM); `retired` is set first, so a plan creation that raced with that knows to retry.
   */
  private[spillway] final class LocalDirs(val owner: AnyRef, val paths: Array[String], val handle: Long) {
    @volatile private[spillway] var retired = false
  }
  @volatile private var registered: LocalDirs = _
  private val registering = new Object

  /**
   * The current task's plan, created on the first call in the task.
   *
   * @throws IllegalStateException outside a Spark task
   * @throws IllegalArgumentException if `spark.spillway.maxTempDirectorySize` or
   *     `spark.spillway.maxExecutorTempDirectorySize` is not a valid size
   */
  def plan(): SpillPlan = {
    val task = TaskContext.get()
    if (task == null) {
      throw new IllegalStateException(
        "TaskSpill.plan() must be called from a Spark task's thread (TaskContext.get() is null)")
    }
    val existing = plans.get(task)
    if (existing != null) existing else createPlan(task)
  }

  /** Plans of running tasks in this JVM (created and not yet released). */
  def activePlans: Int = plans.size

  // Without a lock: a task may run several threads, and if two of them make its first plan at once,
  // the one whose plan is not stored releases it (a plan that never spilled costs no filesystem
  // call). So plans of concurrent tasks share nothing, and no Spark object's monitor is taken.
  private def createPlan(task: TaskContext): SpillPlan = {
    val env = SparkEnv.get
    if (env == null) throw new IllegalStateException("no SparkEnv in this JVM")
    val limit = SpillwayConf.maxTempDirectorySize(task, env.conf)
    val executorLimit = SpillwayConf.maxExecutorTempDirectorySize(task, env.conf)
    val plan = createIn(localDirs(env), limit, executorLimit)
    val raced = plans.putIfAbsent(task, plan)
    if (raced != null) {
      plan.close()
      return raced
    }
    try {
      // If the task has already completed, Spark runs the listener right away.
      task.addTaskCompletionListener[Unit](_ => release(task, plan))
    } catch {
      case NonFatal(e) =>
        release(task, plan)
        throw e
    }
    if (plan.isClosed) {
      throw new IllegalStateException(s"task ${task.taskAttemptId()} has already completed")
    }
    plan
  }

  // A plan dir that cannot be fully removed (a file someone else put there, a failing disk) is
  // reported, not turned into a task failure: the task's result is good, and a retry would not
  // clean the dir either.
  // The plan leaves `plans` only once closed, so `activePlans` never counts a plan as gone while its
  // dir is still being removed.
  private def release(task: TaskContext, plan: SpillPlan): Unit =
    try {
      ExecutorReports.taskSpilled(task, plan)
      plan.close()
    }
    catch {
      case e: java.io.IOException => // counted by the library's filesystemErrors
        log.warn(s"Spillway could not remove everything of task ${task.taskAttemptId()}'s spill plan", e)
    } finally plans.remove(task, plan)

  private lazy val log = org.slf4j.LoggerFactory.getLogger(getClass)

  private[spillway] def createIn(dirs: LocalDirs, limit: Long, executorLimit: Long): SpillPlan =
    try SpillPlan.createIn(dirs.handle, limit, executorLimit)
    catch {
      // Released under us by a newer SparkEnv's registration: use that one.
      case e: IllegalStateException if dirs.retired =>
        val env = SparkEnv.get
        if (env == null) throw e
        SpillPlan.createIn(localDirs(env).handle, limit, executorLimit)
    }

  /** The registration of `env`'s local dirs, made on the first call for that env. */
  private[spillway] def localDirs(env: SparkEnv): LocalDirs = {
    val current = registered
    if (current != null && (current.owner eq env)) current
    else register(env, () => env.blockManager.getLocalDiskDirs)
  }

  // Rare (once per SparkEnv), so one lock is fine: it keeps two tasks from registering twice.
  // `owner` is the SparkEnv (anything else only in tests).
  private[spillway] def register(owner: AnyRef, dirs: () => Array[String]): LocalDirs = registering.synchronized {
    val current = registered
    if (current != null && (current.owner eq owner)) return current
    NativeLoader.load() // the descriptive load error, rather than NativeSpill's class init failure
    owner match {
      // The executor's spill file format and sorts' memory cache, set once per SparkEnv: plans
      // and sorts from now on take them.
      case env: SparkEnv =>
        val f = SpillwayConf.spillFormat(env.conf)
        NativeSpill.configureFormat(f.codec, f.zstdLevel, f.encrypt, f.keyBits)
        NativeSpill.configureMemoryCache(SpillwayConf.sortMemoryCacheIdleMs(env.conf))
      case _ =>
    }
    val paths = dirs().clone()
    val next = new LocalDirs(owner, paths, NativeSpill.registerLocalDirs(paths))
    registered = next
    if (current != null) {
      current.retired = true
      NativeSpill.releaseLocalDirs(current.handle)
    }
    next
  }
}
