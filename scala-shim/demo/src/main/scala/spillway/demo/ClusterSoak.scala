package spillway.demo

import java.io.File
import java.nio.file.{Files, Paths}
import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.atomic.AtomicBoolean

import scala.jdk.CollectionConverters._
import scala.util.Random
import scala.util.control.NonFatal

import org.apache.spark.{SparkEnv, TaskContext}
import org.apache.spark.sql.{DataFrame, Encoders, SparkSession}

import spillway.{NativeStats, SpillwayConf}

/** An executor's own view at `time`: its JVM heap committed, and the library's Go heap and native sort memory. */
final case class SoakInside(time: Long, executorId: String, heapCommitted: Long, goHeapBytes: Long, nativeBytes: Long)

/** What one partition of a soak query's result holds ([[ClusterSoak]]'s digest). */
final case class SoakPartition(index: Int, rows: Long, ids: Long, keys: Long, strings: Long, ordered: Boolean, first: Long, last: Long)

/**
 * Sustained SQL load on a real cluster (project/cluster-test.sh runs it after [[ClusterDemo]],
 * briefly in `make test`, for ten minutes in `make cluster-soak`): for `seconds`, sessions of one
 * application run spilling native SQL sorts at once, on executors under the cluster test's memory
 * limit:
 *
 *  - `Sorters` sessions run the same ORDER BY over and over; each result must be Spark's (the
 *    digest of Spark's own sort of the same rows, taken once at the start);
 *  - one session runs it under a per-plan limit far below what its sort spills
 *    (`spark.spillway.maxTempDirectorySize`, set in the session): each query must fail with
 *    `SpillLimitExceededException` naming that key;
 *  - one session cancels its queries at a random moment (its job group): each ends cancelled or
 *    with Spark's result.
 *
 * Meanwhile the driver samples each executor's process (all run on this machine): its RSS, open
 * descriptors, threads, and the plan dirs in its local dirs; and a small job reads each one's JVM
 * heap and the library's counters. Between the first and the last [[Window]] of the run (after a
 * warm-up) none may grow like a leak: RSS no more than the JVM's committed heap plus
 * [[RssSlackBytes]], the Go heap, descriptors and threads within their slack. After the load, no
 * plan dir may be left. Prints the figures, then `cluster-soak-result=passed` (exit status
 * 0) or `cluster-soak-result=failed N check(s)` (exit status 1).
 *
 * With `spark` as its third argument, the same load runs on Spark's own sort (no limited session):
 * the baseline of what the executors' processes do under it without Spillway's.
 *
 * Usage: spark-submit --class spillway.demo.ClusterSoak --jars spillway.jar spillway-demo.jar seconds [executors (2) [spillway|spark]]
 */
object ClusterSoak {
  val ResultKey = "cluster-soak-result"

  private val Sorters = 2
  /** Rows of each ORDER BY: about 150 bytes each, 60 MB in all, a few runs per task at SortBudget. */
  private val Rows = 400000L
  private val Partitions = 2
  /** Each sort's memory budget: a fraction of its rows, so that every sort spills a few runs. */
  private val SortBudget = "16m"
  /** The limited session's per-plan limit: a fraction of what one of its sorts spills. */
  private val TinyPlanLimit = "1m"
  /** The part of the run left out of the comparison: JIT, heaps and pools growing to their size. */
  private val WarmUpShare = 0.25
  /** The windows compared: at most this long, at most a third of what follows the warm-up. */
  private val Window = 60000L
  private val SampleMillis = 2000L
  /** Bounds of growth between the first and the last window, each the most sampled there. */
  /** RSS may grow as the JVM's committed heap does (up to spark.executor.memory), and by this beyond. */
  private val RssSlackBytes = 64L << 20
  /** The library's Go heap may grow by this. */
  private val GoHeapSlackBytes = 16L << 20
  /** How often a small job reads each executor's own view: its JVM heap and the library's counters. */
  private val InsideMillis = 10000L
  private val FdSlack = 32
  private val ThreadSlack = 32
  private val LeftoverWaitMillis = 30000L // a bound on waiting for the last tasks' plan dirs to go

  private final case class Executor(id: String, pid: Long, localDirs: Seq[String])
  private final case class Sample(time: Long, executorId: String, rssBytes: Long, fds: Int, threads: Int, planDirs: Int)
  private type Digest = (Long, Long, Long, Long, Boolean)
  private val Sorted = "sorted with Spark's result"
  private val Refused = "refused by the plan limit"
  private val Cancelled = "cancelled"
  private val NotCancelled = "done before their cancel"

  def main(args: Array[String]): Unit = {
    val seconds = args.headOption.map(_.toInt).getOrElse(60)
    val executors = args.lift(1).map(_.toInt).getOrElse(2)
    val native = args.lift(2).forall(_ != "spark")
    // FAIR: the sessions' jobs share the executors rather than queue behind each other.
    val spark = SparkSession.builder().appName("spillway-cluster-soak")
      .config("spark.scheduler.mode", "FAIR")
      .config("spark.sql.shuffle.partitions", Partitions.toString)
      .config(SpillwayConf.SortMemoryBudgetKey, SortBudget) // every sort spills, whatever the executor's memory
      .getOrCreate()
    val failures =
      try run(spark, seconds * 1000L, executors, native)
      catch { case NonFatal(e) => e.printStackTrace(); Seq(s"the soak broke: $e") }
      finally spark.stop()
    // A check that fails on every query says so once, with how often.
    failures.groupBy(identity).toSeq.sortBy(-_._2.size).foreach { case (f, all) =>
      println(s"FAILED: $f${if (all.size > 1) s" (${all.size} times)" else ""}")
    }
    println(s"$ResultKey=${if (failures.isEmpty) "passed" else s"failed ${failures.size} check(s)"}")
    if (failures.nonEmpty) sys.exit(1)
  }

  private def query(spark: SparkSession): DataFrame =
    spark.range(0, Rows, 1, Partitions)
      .selectExpr("id", "xxhash64(id) AS k", "concat(sha2(CAST(id AS STRING), 256), sha2(CAST(-id AS STRING), 256)) AS s")
      .orderBy("k", "id")

  /**
   * Rows, the sum of ids, a sum of the keys and the strings' hashes, and whether the keys are in
   * order across partitions: with (k, id) unique and each row a function of id, Spark's result is
   * the one with Spark's digest.
   */
  private def digest(df: DataFrame): Digest = {
    // A Dataset action, so that the session's settings reach the tasks as Spark SQL passes them.
    val parts = df.mapPartitions { rows =>
      var (n, ids, keys, strings, ordered) = (0L, 0L, 0L, 0L, true)
      var first, last = Long.MinValue
      rows.foreach { r =>
        val k = r.getLong(1)
        if (n == 0) first = k else if (k < last) ordered = false
        last = k
        n += 1
        ids += r.getLong(0)
        keys += k
        strings += r.getString(2).hashCode
      }
      Iterator(SoakPartition(TaskContext.getPartitionId(), n, ids, keys, strings, ordered, first, last))
    }(Encoders.product[SoakPartition]).collect().sortBy(_.index).filter(_.rows > 0)
    val inOrder = parts.forall(_.ordered) && parts.sliding(2).forall(p => p.length < 2 || p(0).last <= p(1).first)
    (parts.map(_.rows).sum, parts.map(_.ids).sum, parts.map(_.keys).sum, parts.map(_.strings).sum, inOrder)
  }

  private def run(spark: SparkSession, millis: Long, n: Int, native: Boolean): Seq[String] = {
    val failures = new ConcurrentLinkedQueue[String]
    def check(ok: Boolean, what: => String): Unit = if (!ok) failures.add(what)

    val executors = discover(spark, n)
    executors.foreach(e => println(s"soak: executor ${e.id} (pid ${e.pid}), local dirs ${e.localDirs.mkString(", ")}"))

    val reference = spark.newSession()
    reference.conf.set(SpillwayConf.SqlSortEnabledKey, "false")
    val expected = digest(query(reference))
    println(s"soak: Spark's own sort: $expected")
    check(expected._1 == Rows && expected._5, s"Spark's own sort gave $expected")

    val start = System.currentTimeMillis()
    val deadline = start + millis
    val stop = new AtomicBoolean
    val samples = new ConcurrentLinkedQueue[Sample]
    val outcomes = Seq(Sorted, Refused, Cancelled, NotCancelled)
    val counts = outcomes.map(_ -> new java.util.concurrent.atomic.AtomicLong).toMap
    def count(what: String): Unit = counts(what).incrementAndGet()

    def session(name: String)(loop: SparkSession => Unit): Thread = {
      val t = new Thread(() => {
        val s = spark.newSession()
        if (!native) s.conf.set(SpillwayConf.SqlSortEnabledKey, "false")
        s.sparkContext.setLocalProperty("spark.scheduler.pool", name) // FAIR between the sessions, not FIFO in one pool
        try while (System.currentTimeMillis() < deadline) loop(s)
        catch { case NonFatal(e) => failures.add(s"$name broke: $e") }
      }, s"soak-$name")
      t.setDaemon(true)
      t
    }
    val sorters = (1 to Sorters).map { i =>
      session(s"sorter-$i") { s =>
        val got = digest(query(s))
        check(got == expected, s"sorter-$i: got $got, Spark's sort gives $expected")
        count(Sorted)
      }
    }
    val limited = session("limited") { s =>
      s.conf.set(SpillwayConf.MaxTempDirectorySizeKey, TinyPlanLimit)
      try {
        val got = digest(query(s))
        failures.add(s"limited: a sort under a $TinyPlanLimit plan limit succeeded ($got)")
      } catch {
        case NonFatal(e) =>
          val message = causes(e)
          check(message.contains("SpillLimitExceededException") && message.contains(SpillwayConf.MaxTempDirectorySizeKey),
            s"limited: failed without naming the limit: $message")
          count(Refused)
      }
    }
    val random = new Random(Option(System.getenv("SOAK_SEED")).map(_.toLong).getOrElse(System.nanoTime()))
    val cancelling = session("cancelling") { s =>
      val group = s"soak-cancel-${System.nanoTime()}"
      val sc = s.sparkContext
      sc.setJobGroup(group, "a query the soak cancels", interruptOnCancel = true)
      val delay = 200 + random.nextInt(4000)
      val canceller = new Thread(() =>
        try { Thread.sleep(delay); sc.cancelJobGroup(group) }
        catch { case _: InterruptedException => }) // the query ended first
      canceller.setDaemon(true)
      canceller.start()
      try {
        val got = digest(query(s))
        check(got == expected, s"cancelling: a query not cancelled in time got $got, not $expected")
        count(NotCancelled)
      } catch {
        case NonFatal(e) =>
          val message = causes(e)
          check(message.contains("cancel"), s"cancelling: failed, not cancelled: $message")
          count(Cancelled)
      } finally {
        canceller.interrupt()
        canceller.join()
        sc.clearJobGroup()
      }
    }
    val threads = if (native) sorters :+ limited :+ cancelling else sorters :+ cancelling
    val sampler = new Thread(() => {
      while (!stop.get) {
        executors.foreach(e => sample(e).foreach(samples.add))
        Thread.sleep(SampleMillis)
      }
    }, "soak-sampler")
    sampler.setDaemon(true)
    sampler.start()
    val insides = new ConcurrentLinkedQueue[SoakInside]
    val insider = new Thread(() => {
      spark.sparkContext.setLocalProperty("spark.scheduler.pool", "sampler")
      while (!stop.get) {
        try inside(spark, executors.size).foreach(insides.add)
        catch { case NonFatal(e) => failures.add(s"the executors could not be sampled: $e") }
        Thread.sleep(InsideMillis)
      }
    }, "soak-inside")
    insider.setDaemon(true)
    insider.start()
    threads.foreach(_.start())
    threads.foreach(_.join(millis + 600000L)) // a query running at the deadline ends first
    threads.filter(_.isAlive).foreach(t => failures.add(s"${t.getName} still runs ten minutes past the deadline"))
    val end = System.currentTimeMillis()

    // After the load: every plan dir goes with its task (bounded wait for the last tasks to end).
    val leftDeadline = System.currentTimeMillis() + LeftoverWaitMillis
    def left: Seq[(String, Int)] = executors.map(e => e.id -> planDirs(e))
    while (left.exists(_._2 > 0) && System.currentTimeMillis() < leftDeadline) Thread.sleep(500)
    stop.set(true)
    sampler.join()
    insider.join()
    left.foreach { case (id, dirs) => check(dirs == 0, s"executor $id: $dirs plan dirs left after the load") }

    println(s"soak: ${(end - start) / 1000} s of load on ${if (native) "Spillway's" else "Spark's"} sort; queries: ${outcomes.map(k => s"${counts(k).get} $k").mkString(", ")}")
    (if (native) Seq(Sorted, Refused) else Seq(Sorted)).foreach(k => check(counts(k).get > 0, s"no query was $k"))
    check(counts(Cancelled).get + counts(NotCancelled).get > 0, "the cancelling session ran no query")

    // Flat between the first and the last window after the warm-up.
    val measured = start + ((end - start) * WarmUpShare).toLong
    val window = math.min(Window, (end - measured) / 3)
    val all = samples.asScala.toSeq
    executors.foreach { e =>
      val mine = all.filter(s => s.executorId == e.id && s.time >= measured && s.time <= end)
      val first = mine.filter(_.time < measured + window)
      val last = mine.filter(_.time > end - window)
      if (first.isEmpty || last.isEmpty) failures.add(s"executor ${e.id}: no samples to compare (${mine.size} in all)")
      else {
        def most[S, T: Ordering](s: Seq[S], f: S => T): T = s.map(f).max
        val (rss0, rss1) = (most(first, (_: Sample).rssBytes), most(last, (_: Sample).rssBytes))
        val (fd0, fd1) = (most(first, (_: Sample).fds), most(last, (_: Sample).fds))
        val (th0, th1) = (most(first, (_: Sample).threads), most(last, (_: Sample).threads))
        // The inside job waits for a free core behind the sorts' tasks, so a window may get none
        // of its samples: then the ones nearest to it stand for it (the first after the warm-up,
        // the last of the run).
        val seen = insides.asScala.toSeq.filter(i => i.executorId == e.id && i.time <= end).sortBy(_.time)
        val after = seen.filter(_.time >= measured)
        def orNearest(w: Seq[SoakInside], nearest: => Option[SoakInside]) = if (w.nonEmpty) w else nearest.toSeq
        val in0 = orNearest(after.filter(_.time < measured + window), after.headOption.orElse(seen.lastOption))
        val in1 = orNearest(after.filter(_.time > end - window), seen.lastOption)
        val MiB = 1048576.0
        println(f"soak: executor ${e.id}: the first and last ${window / 1000}%d s of ${(end - measured) / 1000}%d: " +
          f"RSS ${rss0 / MiB}%.0f -> ${rss1 / MiB}%.0f MiB, descriptors $fd0 -> $fd1, threads $th0 -> $th1, " +
          s"plan dirs at most ${most(mine, (_: Sample).planDirs)}, ${mine.size} samples")
        if (in0.isEmpty || in1.isEmpty) failures.add(s"executor ${e.id}: the inside job never ran on it")
        else {
          val (heap0, heap1) = (most(in0, (_: SoakInside).heapCommitted), most(in1, (_: SoakInside).heapCommitted))
          val (go0, go1) = (most(in0, (_: SoakInside).goHeapBytes), most(in1, (_: SoakInside).goHeapBytes))
          println(f"soak: executor ${e.id}: JVM heap committed ${heap0 / MiB}%.0f -> ${heap1 / MiB}%.0f MiB, " +
            f"the library's Go heap ${go0 / MiB}%.1f -> ${go1 / MiB}%.1f MiB, native sort memory at most ${most(seen, (_: SoakInside).nativeBytes) / MiB}%.0f MiB, " +
            s"${seen.size} samples")
          val beyondHeap = (rss1 - rss0) - math.max(0L, heap1 - heap0)
          check(beyondHeap <= RssSlackBytes, f"executor ${e.id}: RSS grew by ${(rss1 - rss0) / MiB}%.0f MiB, ${beyondHeap / MiB}%.0f MiB beyond the JVM heap's growth")
          check(go1 <= go0 + GoHeapSlackBytes, s"executor ${e.id}: the library's Go heap grew from $go0 to $go1 bytes")
        }
        check(fd1 <= fd0 + FdSlack, s"executor ${e.id}: open descriptors grew from $fd0 to $fd1")
        check(th1 <= th0 + ThreadSlack, s"executor ${e.id}: threads grew from $th0 to $th1")
      }
    }
    failures.asScala.toSeq
  }

  /** Each executor's id, pid and local dirs, from a task on each. */
  private def discover(spark: SparkSession, n: Int): Seq[Executor] =
    ClusterExecutors.onEach(spark.sparkContext, n) { () =>
      Executor(SparkEnv.get.executorId, ProcessHandle.current().pid(), SparkEnv.get.blockManager.getLocalDiskDirs.toSeq)
    }.sortBy(_.id)

  /** Each executor's own view now, from a job of a few tasks per executor (some executor may be missed). */
  private def inside(spark: SparkSession, n: Int): Seq[SoakInside] =
    spark.sparkContext.parallelize(0 until 4 * n, 4 * n).map { _ =>
      val stats = NativeStats.read()
      SoakInside(System.currentTimeMillis(), SparkEnv.get.executorId, Runtime.getRuntime.totalMemory(), stats("goHeapBytes"), stats("nativeBytes"))
    }.collect().toSeq.groupBy(_.executorId).values.map(_.maxBy(_.time)).toSeq

  /** The executor's process now, read from /proc (the executors run on this machine); None once it is gone. */
  private def sample(e: Executor): Option[Sample] =
    try {
      val status = Files.readAllLines(Paths.get(s"/proc/${e.pid}/status")).asScala
      def field(name: String): Long = status.find(_.startsWith(name + ":")).map(_.split("\\s+")(1).toLong).getOrElse(-1L)
      val fds = Option(new File(s"/proc/${e.pid}/fd").list()).map(_.length).getOrElse(-1)
      Some(Sample(System.currentTimeMillis(), e.id, field("VmRSS") * 1024, fds, field("Threads").toInt, planDirs(e)))
    } catch { case NonFatal(_) => None }

  /** The plan dirs (spillway-*) in the executor's local dirs now. */
  private def planDirs(e: Executor): Int =
    e.localDirs.map(d => Option(new File(d).listFiles()).getOrElse(Array.empty[File]).count(f => f.isDirectory && f.getName.startsWith("spillway-"))).sum

  private def causes(e: Throwable): String =
    Iterator.iterate(e)(_.getCause).takeWhile(_ != null).map(c => s"${c.getClass.getName}: ${c.getMessage}").mkString(" / ")
}
