package spillway.demo

import java.io.File
import java.nio.file.Paths

import scala.util.Using

import org.apache.spark.{SparkContext, SparkEnv, TaskContext}
import org.apache.spark.scheduler.{SparkListener, SparkListenerEvent, SparkListenerTaskEnd}
import org.apache.spark.spillway.PluginMetricsProbe
import org.apache.spark.spillway.demo.ListenerDrain
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.functions.{col, expr, udf}

import spillway.{NativeLoader, NativeStats, OrphanSweep, SpillwayConf, SpillwayExecutorUpdate, TaskSpill}

/** What one executor saw; built inside a task. */
final case class ExecutorReport(
    executorId: String,
    pid: Long,
    pluginStarted: Boolean,
    loadedFrom: String,
    orphansRemovedAtStart: Int,
    sweepFailures: Seq[String],
    planDirs: Seq[String], // while spilling
    bytesSpilled: Long, // on disk: compressed, framed
    logicalBytesSpilled: Long, // written by the task
    filesBytesOnDisk: Long, // what the task's files report on disk
    leftovers: Seq[String], // spillway-* entries in this executor's and its siblings' blockmgr dirs
    metrics: Map[String, Long]) // the plugin's gauges, read back from Spark's metrics system

/**
 * The demo on a real cluster (standalone master and workers, run by project/cluster-test.sh):
 *
 *  1. every executor, each running one task of a barrier stage (so each executor gets one), spills
 *     through its task's plan; each must have been started by SpillwayPlugin (library loaded, sweep
 *     done) in its own JVM;
 *  2. after that job, every executor finds no plan dir or owner lock left in its block manager dirs
 *     and its siblings, and its plugin gauges (read back from Spark's metrics system) show the spill;
 *  3. one executor is killed mid-spill (the task halts its JVM): its plan dir is an orphan. The
 *     cluster manager starts a replacement in the same application dir, whose plugin must sweep it;
 *  4. a SQL ORDER BY of wide rows runs as the native sort (with `spark.sql.extensions=
 *     spillway.SpillwayExtensions`) and spills, its result in order; project/cluster-test.sh runs
 *     the executors under a hard memory limit sized as docs/user-guide/memory.md ("Sizing executors") says, which they must not
 *     pass (its rows and off-heap memory: [[SortRows]], `spark.memory.offHeap.size` given there);
 *  5. right after the sort, a hash aggregate of [[AggRows]] distinct wide keys takes the execution
 *     memory the sort gave back (and spills): its result must be exact, and still no executor may
 *     pass the limit.
 *
 *  6. with a third argument, a dir: one of each executor's local dirs fills while a native sort
 *     runs and frees later ([[fullLocalDir]]).
 *
 * In mode `onheap` (Spark's default memory mode, the container sized for it) only steps 4 and 5 run;
 * in mode `killed`, each executor spills and holds its files until the driver is killed
 * ([[spillUntilKilled]]).
 *
 * Prints one line per executor per step, then `cluster-demo-result=passed` (exit status 0) or
 * `cluster-demo-result=failed N check(s)` (exit status 1). Needs `spark.plugins=
 * spillway.demo.ClusterDemoPlugin` (the product's plugin, observed), one core per executor and
 * exactly `executors` executors.
 *
 * Usage: spark-submit --class spillway.demo.ClusterDemo --jars spillway.jar spillway-demo.jar [executors (2)] [mode: all (default) | onheap | killed] [fault dir]
 */
object ClusterDemo {
  private val FilesPerTask = 2
  private val BytesPerFile = 2L * 1024 * 1024

  def main(args: Array[String]): Unit = {
    val executors = args.headOption.map(_.toInt).getOrElse(2)
    val mode = args.lift(1).getOrElse("all")
    require(Set("all", "onheap", "killed").contains(mode), s"unknown mode $mode (all, onheap, killed)")
    val spark = SparkSession.builder().appName(s"spillway-cluster-demo-$mode").getOrCreate()
    val failures =
      try {
        if (mode == "killed") spillUntilKilled(spark.sparkContext, executors)
        val steps = if (mode == "all") run(spark.sparkContext, executors) else Nil
        // On-heap mode has twice the execution memory (0.6 x (512m - 300m) against 64m off-heap,
        // in two partitions rather than five): wider keys, so that the aggregate wants more than that too.
        steps ++ sqlSort(spark) ++ hashAggregate(spark, keyWidth = if (mode == "onheap") 280 else 120) ++
          args.lift(2).toSeq.flatMap(faultDir => fullLocalDir(spark, executors, faultDir))
      } finally spark.stop()
    failures.foreach(f => println(s"FAILED: $f"))
    // The last line, for project/cluster-test.sh; the exit status says the same.
    println(s"$ResultKey=${if (failures.isEmpty) "passed" else s"failed ${failures.size} check(s)"}")
    if (failures.nonEmpty) sys.exit(1)
  }

  /** The key of the result line: `cluster-demo-result=passed`, or `=failed N check(s)`. */
  val ResultKey = "cluster-demo-result"

  /** Runs the three steps; returns the failed checks. */
  def run(sc: SparkContext, executors: Int): Seq[String] = {
    val failures = Seq.newBuilder[String]
    def check(ok: Boolean, what: => String): Unit = if (!ok) failures += what

    val first = ClusterExecutors.await(sc, executors)
    println(s"cluster demo: executors ${first.mkString(", ")}")

    // 1. Each executor spills.
    val spilled = onEachExecutor(sc, executors) { () =>
      val plan = TaskSpill.plan()
      val files = (0 until FilesPerTask).map { i =>
        val file = plan.createSpillFile()
        Using.resource(file.outputStream())(out => DemoFiles.writePattern(out, BytesPerFile, i))
        file
      }
      report(planDirs = files.map(f => new File(f.path).getParent).distinct, bytesSpilled = plan.usedDiskSpace,
        logicalBytesSpilled = files.map(_.bytesWritten).sum, filesBytesOnDisk = files.map(_.bytesOnDisk).sum)
    }
    spilled.foreach(r => println(s"spill: ${describe(r)}"))
    check(spilled.map(_.executorId).distinct.size == executors, s"not one spilling task per executor: ${spilled.map(_.executorId)}")
    check(spilled.map(_.pid).distinct.size == executors, s"executors do not run in ${executors} distinct JVMs: ${spilled.map(_.pid)}")
    spilled.foreach { r =>
      check(r.pluginStarted && r.loadedFrom != null, s"executor ${r.executorId}: SpillwayPlugin did not start (spark.plugins unset?)")
      check(r.sweepFailures.isEmpty, s"executor ${r.executorId}: sweep failures ${r.sweepFailures}")
      check(r.planDirs.nonEmpty && r.planDirs.size <= FilesPerTask && r.logicalBytesSpilled == FilesPerTask * BytesPerFile && r.bytesSpilled == r.filesBytesOnDisk && r.bytesSpilled > 0,
        s"executor ${r.executorId}: expected one plan dir per local dir its files went to, ${FilesPerTask * BytesPerFile} bytes written and the plan counting its files' " +
          s"bytes on disk, got ${r.planDirs}, ${r.logicalBytesSpilled} written, ${r.bytesSpilled} counted, ${r.filesBytesOnDisk} in the files")
    }

    // 2. Nothing left once the tasks are done; the gauges saw the spill.
    val after = onEachExecutor(sc, executors)(() => report())
    after.foreach(r => println(s"after: ${describe(r)}"))
    after.foreach { r =>
      check(r.leftovers.isEmpty, s"executor ${r.executorId}: left behind ${r.leftovers}")
      check(r.metrics.get("livePlans").contains(0L), s"executor ${r.executorId}: livePlans ${r.metrics.get("livePlans")}")
      check(r.metrics.getOrElse("plansSpilled", 0L) >= 1 && r.metrics.getOrElse("logicalBytesSpilled", 0L) >= FilesPerTask * BytesPerFile &&
        r.metrics.getOrElse("bytesSpilled", 0L) > 0,
        s"executor ${r.executorId}: plugin gauges do not show the spill: ${r.metrics}")
    }

    // 3. Kill one executor mid-spill; its replacement sweeps the orphan.
    val crashed = sc.parallelize(Seq(0), 1).map { _ =>
      val task = TaskContext.get()
      if (task.attemptNumber() == 0) {
        val file = TaskSpill.plan().createSpillFile()
        Using.resource(file.outputStream())(out => DemoFiles.writePattern(out, BytesPerFile, 0))
        System.err.println(s"cluster demo: executor ${SparkEnv.get.executorId} halting with plan dir ${new File(file.path).getParent}")
        Runtime.getRuntime.halt(137) // no shutdown hooks, no release: a killed executor
      }
      SparkEnv.get.executorId
    }.collect().head
    println(s"crash: an executor halted mid-spill; the task's retry ran on executor $crashed")
    val replacement = ClusterExecutors.await(sc, executors, replacing = first)
    println(s"crash: executors now ${replacement.mkString(", ")}")
    val swept = onEachExecutor(sc, executors)(() => report())
    swept.foreach(r => println(s"after crash: ${describe(r)}"))
    val newcomers = swept.filterNot(r => first.contains(r.executorId))
    check(newcomers.size == 1, s"expected one replacement executor, got ${newcomers.map(_.executorId)}")
    newcomers.foreach { r =>
      check(r.orphansRemovedAtStart >= 1, s"replacement executor ${r.executorId} swept no orphan at start")
    }
    swept.foreach(r => check(r.leftovers.isEmpty, s"executor ${r.executorId}: left behind ${r.leftovers}"))
    failures.result()
  }

  /** How long mode `killed`'s tasks hold their spill files at most: a bound, for a driver that is not killed. */
  private val HoldMillis = 240L * 1000

  /**
   * Mode `killed`: each executor's task spills through its plan, then holds it until the driver is
   * killed (project/cluster-test.sh kill -9s it once every executor's plan dir is on disk); what
   * the application leaves is for the workers and the next application's executors. Throws if
   * the tasks end (the driver was not killed within [[HoldMillis]]).
   */
  def spillUntilKilled(sc: SparkContext, executors: Int): Unit = {
    ClusterExecutors.await(sc, executors)
    onEachExecutor(sc, executors) { () =>
      val plan = TaskSpill.plan()
      val files = (0 until FilesPerTask).map { i =>
        val file = plan.createSpillFile()
        Using.resource(file.outputStream())(out => DemoFiles.writePattern(out, BytesPerFile, i))
        file
      }
      System.err.println(s"cluster demo: executor ${SparkEnv.get.executorId} holds ${files.size} spill files in " +
        files.map(f => new File(f.path).getParent).distinct.mkString(", ") + " until its driver is killed")
      Thread.sleep(HoldMillis)
      report()
    }
    throw new IllegalStateException(s"the driver was not killed within ${HoldMillis / 1000} s")
  }

  /** Rows of step 4's ORDER BY: about 200 bytes each, 300 MB in all, several times the executors' off-heap memory. */
  val SortRows = 1500000L

  /** Step 4: a native SQL sort that spills; returns the failed checks. */
  def sqlSort(spark: SparkSession): Seq[String] = {
    val failures = Seq.newBuilder[String]
    def check(ok: Boolean, what: => String): Unit = if (!ok) failures += what
    val spilled = new java.util.concurrent.atomic.AtomicLong
    val listener = new SparkListener {
      override def onTaskEnd(end: SparkListenerTaskEnd): Unit =
        Option(end.taskMetrics).foreach(m => spilled.addAndGet(m.diskBytesSpilled))
    }
    spark.sparkContext.addSparkListener(listener)
    try {
      val sorted = spark.range(0, SortRows, 1, 2)
        .selectExpr("id", "CAST(rand(11) * 9e18 AS BIGINT) AS k", "concat(uuid(), uuid(), uuid(), uuid(), uuid()) AS s")
        .orderBy("k")
      val plan = sorted.queryExecution.executedPlan.toString
      check(plan.contains("SpillwaySort"), s"the ORDER BY does not run as the native sort (spark.sql.extensions unset?):\n$plan")
      // Per partition: rows, whether in order, first and last key; the partitions in order too.
      val parts = sorted.rdd.mapPartitionsWithIndex { (i, rows) =>
        var n = 0L
        var ordered = true
        var first, last = Long.MinValue
        rows.foreach { r =>
          val k = r.getLong(1)
          if (n == 0) first = k else if (k < last) ordered = false
          last = k
          n += 1
        }
        Iterator((i, n, ordered, first, last))
      }.collect().sortBy(_._1).filter(_._2 > 0)
      ListenerDrain(spark.sparkContext) // the listener hears of the tasks after the job returns
      val rows = parts.map(_._2).sum
      val inOrder = parts.forall(_._3) && parts.sliding(2).forall(p => p.length < 2 || p(0)._5 <= p(1)._4)
      println(s"sql sort: $rows rows in ${parts.length} partitions, in order: $inOrder; the sorts spilled ${spilled.get} bytes to disk")
      check(rows == SortRows, s"the ORDER BY returned $rows rows, not $SortRows")
      check(inOrder, s"the ORDER BY's result is out of order: ${parts.mkString(", ")}")
      check(spilled.get > 0, "the native sort did not spill (is spark.memory.offHeap.size small enough?)")
    } finally spark.sparkContext.removeSparkListener(listener)
    failures.result()
  }

  /** Distinct keys of step 5's aggregate, each some `keyWidth` bytes: several times the execution memory. */
  val AggRows = 1000000L

  /**
   * Step 5: right after the sort, a hash aggregate that wants more execution memory than there
   * is (a distinct wide key per row: the partial aggregate's map fills, then spills); returns the
   * failed checks. Its result is known: one group per row, each counted once.
   */
  def hashAggregate(spark: SparkSession, keyWidth: Int): Seq[String] = {
    val failures = Seq.newBuilder[String]
    def check(ok: Boolean, what: => String): Unit = if (!ok) failures += what
    val peak, spilled, tasks = new java.util.concurrent.atomic.AtomicLong
    val listener = new SparkListener {
      override def onTaskEnd(end: SparkListenerTaskEnd): Unit =
        Option(end.taskMetrics).foreach { m =>
          peak.accumulateAndGet(m.peakExecutionMemory, math.max)
          spilled.addAndGet(m.memoryBytesSpilled)
          tasks.incrementAndGet()
        }
    }
    spark.sparkContext.addSparkListener(listener)
    try {
      val row = spark.range(0, AggRows, 1, 2)
        .selectExpr(s"concat(CAST(id AS STRING), repeat('x', $keyWidth)) AS g", "id")
        .groupBy("g").agg(expr("count(1) AS n"), expr("sum(id) AS s"))
        .agg(expr("count(1)"), expr("sum(n)"), expr("sum(s)"), expr("max(n)"))
        .head()
      ListenerDrain(spark.sparkContext) // the listener hears of the tasks after the job returns
      val (groups, rows, sum, most) = (row.getLong(0), row.getLong(1), row.getLong(2), row.getLong(3))
      println(s"hash aggregate: $groups groups of $rows rows (at most $most a group), sum $sum; a task's peak execution memory " +
        s"${peak.get >> 20} MiB, ${spilled.get >> 20} MiB spilled from memory")
      check(groups == AggRows && rows == AggRows && most == 1 && sum == AggRows * (AggRows - 1) / 2,
        s"the aggregate returned $groups groups, $rows rows, at most $most a group, sum $sum; expected $AggRows, $AggRows, 1, ${AggRows * (AggRows - 1) / 2}")
      check(spilled.get > 0, "the aggregate did not spill: it did not want all the execution memory")
    } finally spark.sparkContext.removeSparkListener(listener)
    failures.result()
  }

  /** Rows of step 6's sort: about 150 bytes each, some 45 MB a partition, many runs of [[FillSortBudget]]. */
  val FillRows = 600000L
  /** The sort's memory in step 6 (`spark.spillway.sort.memoryBudget`): small, so that it writes a run every 2 MB, some 20 in all. */
  val FillSortBudget = "2m"

  /**
   * Step 6: a local dir that fills while the sort runs, and frees. project/cluster-test.sh makes
   * one of each executor's two local dirs a small tmpfs and, once `faultDir/armed` exists, fills
   * it with another process as the first run lands there, frees it once runs landed on the other
   * dir, and writes what it saw; this runs the sort (within partitions: no shuffle, so nothing but
   * the sort's runs is written meanwhile) and writes `faultDir/done` when it ends. The result must
   * be Spark's own sort's, row for row; prints the task metrics, the plugin's counters over the
   * sort and what each executor's updates said of its local dirs. Returns the failed checks.
   */
  def fullLocalDir(spark: SparkSession, executors: Int, faultDir: String): Seq[String] = {
    val failures = Seq.newBuilder[String]
    def check(ok: Boolean, what: => String): Unit = if (!ok) failures += what
    val sc = spark.sparkContext
    val spilled, tasks = new java.util.concurrent.atomic.AtomicLong
    // Per executor and local dir: updates, updates that found it full, the most bytes of Spillway's files in it.
    val dirs = scala.collection.mutable.Map.empty[(String, String), (Int, Int, Long)] // the listener's thread writes, under its lock
    val listener = new SparkListener {
      override def onTaskEnd(end: SparkListenerTaskEnd): Unit =
        Option(end.taskMetrics).foreach { m => spilled.addAndGet(m.diskBytesSpilled); tasks.incrementAndGet() }
      override def onOtherEvent(event: SparkListenerEvent): Unit = event match {
        case u: SpillwayExecutorUpdate => dirs.synchronized {
            u.localDirs.foreach { d =>
              val (n, full, most) = dirs.getOrElse((u.executorId, d.path), (0, 0, 0L))
              dirs((u.executorId, d.path)) = (n + 1, full + (if (d.full) 1 else 0), math.max(most, d.spillwayBytes))
            }
          }
        case _ =>
      }
    }
    def counters(): Map[String, Map[String, Long]] =
      onEachExecutor(sc, executors)(() => report()).map(r => r.executorId -> r.metrics).toMap
    // The native sort's input comes at a pace (30 ms every 1,000 rows: a run every half second or
    // so), so that the script's filler, a shell loop, sees each run land and acts between runs.
    val pace = udf { (id: Long) => if (id % 1000 == 0) Thread.sleep(30); id }.asNondeterministic()
    def sorted(native: Boolean) = {
      spark.conf.set(SpillwayConf.SqlSortEnabledKey, native.toString)
      val rows = spark.range(0, FillRows, 1, 2)
      (if (native) rows.select(pace(col("id")).as("id")) else rows.toDF())
        .selectExpr("id", "CAST(rand(13) * 9e18 AS BIGINT) AS k", "sha2(CAST(id AS STRING), 512) AS s")
        .sortWithinPartitions("k")
    }
    // Per partition: rows, in order, and a digest of the rows in their order.
    def digest(df: org.apache.spark.sql.DataFrame): Seq[(Int, Long, Boolean, Long)] =
      df.rdd.mapPartitionsWithIndex { (i, rows) =>
        var n, h = 0L
        var ordered = true
        var last = Long.MinValue
        rows.foreach { r =>
          val k = r.getLong(1)
          if (n > 0 && k < last) ordered = false
          last = k
          h = h * 1000003L + (r.getLong(0) ^ k) * 31 + r.getString(2).hashCode
          n += 1
        }
        Iterator((i, n, ordered, h))
      }.collect().toSeq.sortBy(_._1)

    val before = counters()
    sc.addSparkListener(listener)
    val native = try {
      // A task reads the budget from its local properties: a job of the Dataset's RDD gets no session conf.
      sc.setLocalProperty(SpillwayConf.SortMemoryBudget.key, FillSortBudget)
      val df = sorted(native = true)
      val plan = df.queryExecution.executedPlan.toString
      check(plan.contains("SpillwaySort"), s"the sort within partitions does not run as the native sort:\n$plan")
      java.nio.file.Files.createFile(Paths.get(faultDir, "armed"))
      try digest(df)
      finally java.nio.file.Files.createFile(Paths.get(faultDir, "done"))
    } finally {
      sc.setLocalProperty(SpillwayConf.SortMemoryBudget.key, null)
      ListenerDrain(sc)
      sc.removeSparkListener(listener)
    }
    val after = counters()
    val spark_ = digest(sorted(native = false))
    spark.conf.unset(SpillwayConf.SqlSortEnabledKey)

    println(s"full local dir: $FillRows rows in ${native.size} partitions (${native.map(_._2).mkString(", ")}), in order: " +
      s"${native.forall(_._3)}, the same as Spark's sort: ${native == spark_}; $tasks tasks spilled ${spilled.get} bytes to disk")
    after.toSeq.sortBy(_._1).foreach { case (id, m) =>
      val b = before.getOrElse(id, Map.empty[String, Long])
      def delta(n: String) = m.getOrElse(n, 0L) - b.getOrElse(n, 0L)
      println(s"full local dir: executor $id: spillFiles +${delta("spillFiles")}, filesystemErrors +${delta("filesystemErrors")}, " +
        s"bytesSpilled +${delta("bytesSpilled")}, bytesInUse ${m.getOrElse("bytesInUse", -1L)}")
      check(delta("spillFiles") > 0, s"executor $id: no spill file made by the sort")
      check(m.get("bytesInUse").contains(0L), s"executor $id: bytes still in use after the sort: ${m.get("bytesInUse")}")
    }
    dirs.synchronized(dirs.toSeq).sortBy(_._1).foreach { case ((id, dir), (n, full, most)) =>
      println(s"full local dir: executor $id, local dir ${Paths.get(dir).getParent.getParent.getParent.getFileName}: " +
        s"full in $full of $n updates, at most $most bytes of Spillway's files")
    }
    check(native.map(_._2).sum == FillRows && native.forall(_._3), s"the native sort's result is short or out of order: $native")
    check(native == spark_, s"the native sort's result is not Spark's: $native against $spark_")
    check(spilled.get > 0, "the sort did not spill")
    failures.result()
  }

  /** Runs `body` once on each executor (ClusterExecutors.onEach), by executor id. */
  private def onEachExecutor(sc: SparkContext, n: Int)(body: () => ExecutorReport): Seq[ExecutorReport] =
    ClusterExecutors.onEach(sc, n)(body).sortBy(_.executorId)

  /** Runs inside a task: this executor's state. */
  private def report(planDirs: Seq[String] = Nil, bytesSpilled: Long = 0, logicalBytesSpilled: Long = 0, filesBytesOnDisk: Long = 0): ExecutorReport = {
    val startup = ClusterDemoPlugin.startup
    val localDirs = SparkEnv.get.blockManager.getLocalDiskDirs.toSeq
    val (blockManagerDirs, _) = OrphanSweep.blockManagerDirs(localDirs)
    ExecutorReport(
      executorId = SparkEnv.get.executorId,
      pid = ProcessHandle.current().pid(),
      pluginStarted = startup.isDefined,
      loadedFrom = NativeLoader.loadedFrom(),
      orphansRemovedAtStart = startup.fold(0)(_.orphansRemoved),
      sweepFailures = startup.fold(Seq.empty[String])(_.sweepFailures),
      planDirs = planDirs,
      bytesSpilled = bytesSpilled,
      logicalBytesSpilled = logicalBytesSpilled,
      filesBytesOnDisk = filesBytesOnDisk,
      leftovers = if (planDirs.nonEmpty) Nil else DemoFiles.spillwayEntries(blockManagerDirs, ownerLocks = true),
      metrics = PluginMetricsProbe.values(ClusterDemoPlugin.MetricsSource).getOrElse(Map.empty))
  }

  private def describe(r: ExecutorReport): String =
    s"executor ${r.executorId} (pid ${r.pid}): library ${Option(r.loadedFrom).fold("NOT loaded")(p => Paths.get(p).getFileName.toString)}, " +
      s"orphans swept at start ${r.orphansRemovedAtStart}" +
      (if (r.planDirs.nonEmpty) s", spilled ${r.logicalBytesSpilled} bytes (${r.bytesSpilled} on disk) into ${r.planDirs.mkString(", ")}" else "") +
      (if (r.planDirs.isEmpty) s", left ${r.leftovers.size}" else "") +
      (if (r.metrics.nonEmpty) s", gauges ${NativeStats.names.flatMap(n => r.metrics.get(n).map(v => s"$n=$v")).mkString(" ")}" else "")
}
