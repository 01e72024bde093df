package spillway

import java.nio.{ByteBuffer, ByteOrder}
import java.nio.file.{Files, Path, Paths}
import java.util.concurrent.{ConcurrentLinkedQueue, Executors, TimeUnit}
import java.util.concurrent.atomic.AtomicLong

import scala.concurrent.{Await, ExecutionContext, Future}
import scala.concurrent.duration._
import scala.jdk.CollectionConverters._
import scala.util.{Failure, Random, Success, Try, Using}

import org.apache.spark.{SparkEnv, TaskContext, TaskKilledException}
import org.apache.spark.sql.SparkSession

/**
 * The Spark soak of docs/reliability.md ("JVM: the Spark soak"): Spark in local mode, many concurrent
 * tasks for a bounded time, tasks that randomly spill (TaskSpill plans), sort natively (the native
 * sort of a plan of their own, released by a task completion listener), fail (throw) and get
 * cancelled mid-spill (job group cancellation from another thread). Afterwards nothing may be left
 * on disk or in the library, and neither the resident memory nor the Go heap may have grown like a
 * leak.
 *
 * Runs as the main class of a child JVM (SparkSoakSuite starts it, `make soak` for longer) with
 * -Xms = -Xmx and -XX:+AlwaysPreTouch: the Java heap is resident in full from the start, so the
 * growth of VmRSS is native memory (the Go heap, malloc, thread stacks, JIT code), not the Java
 * heap expanding. Exits 0 and prints `SOAK PASSED` only if every check holds.
 *
 * System properties: spillway.soak.seconds (how long the loop runs, default 90),
 * spillway.soak.maxRounds (a second bound on the loop, default 100000), spillway.soak.seed (the
 * seed of every random choice of the tasks and the driver; timing is not reproducible).
 */
object SparkSoak {
  private val MiB = 1L << 20

  // Local mode runs the tasks in this JVM: they count here, and the driver reads the counts.
  object Counters {
    val tasks = new AtomicLong
    val tasksKilled = new AtomicLong // tasks that Spark interrupted (cancelled, or killed by a sibling's failure)
    val tasksWithoutPlan = new AtomicLong
    val spillTasks = new AtomicLong
    val slowSpillTasks = new AtomicLong
    val sortTasks = new AtomicLong
    val plannedFailures = new AtomicLong
    val files = new AtomicLong
    val bytes = new AtomicLong
    val sortRecords = new AtomicLong
    val sortRuns = new AtomicLong
    val sortPlans = new AtomicLong
    val churnPlans = new AtomicLong
    val violations = new ConcurrentLinkedQueue[String]()
  }

  val PlannedFailure = "soak: planned failure"

  /** Plan lifecycles the leak check needs, whatever the time bound cut short: see checkMemory. */
  val MinChurnPlans = 131072

  /** A plan lifecycle per iteration, every other one spilling a 1 KiB file: what the leak check counts. */
  def churn(n: Int): Unit = {
    val dirs = TaskSpill.localDirs(SparkEnv.get).handle
    val buf = ByteBuffer.allocateDirect(1024)
    for (i <- 0 until n) {
      val plan = NativeSpill.createPlanIn(dirs, MiB, Long.MaxValue)
      try if (i % 2 == 0) NativeSpill.write(NativeSpill.createTmpFile(plan), buf, 0, buf.capacity)
      finally NativeSpill.releasePlan(plan)
      Counters.churnPlans.incrementAndGet()
    }
  }

  /** One task of the soak; what it does is drawn from `seed` and its coordinates. */
  def task(seed: Long, round: Int, job: Int, partition: Int): Unit = {
    val rnd = new Random(seed ^ (round.toLong << 32) ^ (job.toLong << 16) ^ partition)
    val ctx = TaskContext.get()
    ctx.addTaskCompletionListener[Unit](c => if (c.isInterrupted()) Counters.tasksKilled.incrementAndGet())
    Counters.tasks.incrementAndGet()
    churn(50)
    // A job fails when any of its 6 tasks does: 5% each fails about a quarter of the jobs.
    rnd.nextInt(100) match {
      case x if x < 10 => Counters.tasksWithoutPlan.incrementAndGet()
      case x if x < 50 => spill(ctx, rnd, slow = false)
      case x if x < 75 => sort(ctx, rnd)
      case x if x < 80 =>
        spill(ctx, rnd, slow = false)
        Counters.plannedFailures.incrementAndGet()
        throw new RuntimeException(PlannedFailure)
      case _ => spill(ctx, rnd, slow = true) // slow enough to be cancelled mid-spill
    }
  }

  // TaskContext.killTaskIfInterrupted is private[spark]; this is what it does.
  private def stopIfKilled(ctx: TaskContext): Unit =
    if (ctx.isInterrupted()) throw new TaskKilledException("soak: killed")

  private def check(ok: Boolean, what: => String): Unit = if (!ok) {
    val message = s"soak: invariant violated: $what"
    Counters.violations.add(message)
    throw new IllegalStateException(message)
  }

  /** Spill files of the task's plan, through the streams operators use; some released early. */
  private def spill(ctx: TaskContext, rnd: Random, slow: Boolean): Unit = {
    (if (slow) Counters.slowSpillTasks else Counters.spillTasks).incrementAndGet()
    val plan = TaskSpill.plan()
    val chunk = new Array[Byte](64 * 1024)
    rnd.nextBytes(chunk)
    var live = 0L
    for (_ <- 1 to 1 + rnd.nextInt(4)) {
      val file = plan.createSpillFile()
      Counters.files.incrementAndGet()
      val size = chunk.length.toLong * (1 + rnd.nextInt(16))
      Using.resource(file.outputStream()) { out =>
        var written = 0L
        while (written < size) {
          stopIfKilled(ctx)
          out.write(chunk)
          written += chunk.length
          if (slow) Thread.sleep(5)
        }
      }
      Counters.bytes.addAndGet(size)
      // Framed (the stream's close wrote the last chunk): the file on disk is what it reports.
      val onDisk = file.bytesOnDisk
      check(file.bytesWritten == size && Files.size(Paths.get(file.path)) == onDisk,
        s"${file.path}: ${file.bytesWritten} bytes written ($size expected), ${Files.size(Paths.get(file.path))} on disk ($onDisk reported)")
      if (rnd.nextInt(3) == 0) file.release() else live += onDisk
    }
    check(plan.usedDiskSpace == live, s"the plan counts ${plan.usedDiskSpace} bytes, its live files hold $live on disk")
  }

  /** The native sort, over a plan of the task's own (released by a completion listener, as TaskSpill's). */
  private def sort(ctx: TaskContext, rnd: Random): Unit = {
    Counters.sortTasks.incrementAndGet()
    val plan = NativeSpill.createPlanIn(TaskSpill.localDirs(SparkEnv.get).handle, 256 * MiB, Long.MaxValue)
    Counters.sortPlans.incrementAndGet()
    ctx.addTaskCompletionListener[Unit](_ => NativeSpill.releasePlan(plan))
    val sort = NativeSpill.createSort(plan, 256 * 1024) // small: several runs spill per task
    val records = 2000 + rnd.nextInt(20000)
    val batch = ByteBuffer.allocateDirect(64 * 1024).order(ByteOrder.LITTLE_ENDIAN)
    val key = new Array[Byte](8)
    val value = new Array[Byte](24)
    for (_ <- 0 until records) {
      if (batch.remaining < 8 + key.length + value.length) {
        NativeSpill.sortAdd(sort, batch, 0, batch.position(), Long.MaxValue, null)
        batch.clear()
        stopIfKilled(ctx)
      }
      rnd.nextBytes(key)
      SortBatch.put(batch, key, value)
    }
    NativeSpill.sortAdd(sort, batch, 0, batch.position(), Long.MaxValue, null)
    val out = ByteBuffer.allocateDirect(64 * 1024).order(ByteOrder.LITTLE_ENDIAN)
    var previous: Array[Byte] = null
    var seen = 0
    var n = NativeSpill.sortNext(sort, out, 0, out.capacity)
    while (n != 0) {
      check(n > 0, s"sortNext asks for a $n-byte buffer for a 40-byte record")
      var pos = 0
      while (pos < n) {
        val k = new Array[Byte](out.getInt(pos))
        out.get(pos + 8, k)
        check(previous == null || java.util.Arrays.compareUnsigned(previous, k) <= 0, "records out of order")
        previous = k
        seen += 1
        pos += 8 + k.length + out.getInt(pos + 4)
      }
      stopIfKilled(ctx)
      n = NativeSpill.sortNext(sort, out, 0, out.capacity)
    }
    check(seen == records, s"the sort returned $seen of $records records")
    val stats = new Array[Long](NativeSpill.SORT_STATS_LENGTH)
    NativeSpill.sortStats(sort, stats)
    Counters.sortRecords.addAndGet(records)
    Counters.sortRuns.addAndGet(stats(NativeSpill.sortStatsIndex("runs")))
    NativeSpill.releaseSort(sort)
    check(NativeSpill.usedDiskSpace(plan) == 0, "the released sort's runs still count")
  }

  final case class Sample(label: String, seconds: Long, rssBytes: Long, goHeapBytes: Long, livePlans: Long, churnPlans: Long) {
    override def toString: String =
      f"$label%-8s t=$seconds%4ds rss=${rssBytes.toDouble / MiB}%7.1f MiB goHeap=${goHeapBytes.toDouble / MiB}%6.1f MiB " +
        f"livePlans=$livePlans%3d plansSoFar=$churnPlans"
  }


  /** VmRSS of this process, from /proc/self/status. */
  def rssBytes(): Long =
    Files.readAllLines(Paths.get("/proc/self/status")).asScala.collectFirst {
      case l if l.startsWith("VmRSS:") => l.split("\\s+")(1).toLong * 1024
    }.getOrElse(throw new IllegalStateException("no VmRSS in /proc/self/status"))

  /** Every entry under `roots` that Spillway could have made: plan dirs, owner locks, spill files. */
  def spillwayEntriesUnder(roots: Seq[Path]): Seq[String] =
    roots.filter(Files.exists(_)).flatMap { r =>
      Using.resource(Files.walk(r))(_.iterator().asScala.toVector).map(_.getFileName.toString).filter { n =>
        n.startsWith("spillway-") || (n.startsWith(".spillway-") && n.endsWith(".owner")) || n.startsWith("spill-")
      }
    }

  def main(args: Array[String]): Unit = {
    val seconds = sys.props.getOrElse("spillway.soak.seconds", "90").toLong
    val maxRounds = sys.props.getOrElse("spillway.soak.maxRounds", "100000").toInt
    val seed = sys.props.get("spillway.soak.seed").map(_.toLong).getOrElse(new Random().nextLong())
    println(s"soak: seed=$seed seconds=$seconds maxRounds=$maxRounds (rerun with -Dspillway.soak.seed=$seed)")
    val ok = try run(seconds, maxRounds, seed) catch {
      case t: Throwable =>
        t.printStackTrace(System.out)
        false
    }
    println(if (ok) "SOAK PASSED" else "SOAK FAILED")
    System.out.flush()
    sys.exit(if (ok) 0 else 1)
  }

  private val JobsPerRound = 2
  private val TasksPerJob = 6

  private def run(seconds: Long, maxRounds: Int, seed: Long): Boolean = {
    val base = Files.createTempDirectory("spillway-soak-")
    val configured = Seq("local-a", "local-b").map(n => Files.createDirectory(base.resolve(n)))
    val spark = SparkSession.builder()
      .master(s"local[4]")
      .appName("spillway-soak")
      .config("spark.local.dir", configured.mkString(","))
      .config("spark.ui.enabled", "false")
      .config("spark.spillway.maxTempDirectorySize", "256m")
      .getOrCreate()
    val sc = spark.sparkContext
    val pool = Executors.newFixedThreadPool(JobsPerRound)
    val canceller = Executors.newSingleThreadScheduledExecutor()
    implicit val ec: ExecutionContext = ExecutionContext.fromExecutorService(pool)
    val driverRandom = new Random(seed)
    val failures = Seq.newBuilder[String]
    var jobsSucceeded, jobsFailed, jobsCancelled = 0
    val started = System.nanoTime()
    def elapsed: Long = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - started)

    def runRound(round: Int): Unit = {
      val jobs = (0 until JobsPerRound).map { j =>
        val group = s"soak-$round-$j"
        val job = Future {
          sc.setJobGroup(group, s"soak round $round job $j", interruptOnCancel = true)
          try sc.parallelize(0 until TasksPerJob, TasksPerJob).foreach(p => task(seed, round, j, p))
          finally sc.clearJobGroup()
        }
        // About a third of the jobs are cancelled while their tasks run (most are mid-spill then).
        if (driverRandom.nextInt(3) == 0) {
          canceller.schedule((() => sc.cancelJobGroup(group)): Runnable, 20L + driverRandom.nextInt(300), TimeUnit.MILLISECONDS)
        }
        job
      }
      jobs.foreach { job =>
        Try(Await.result(job, 10.minutes)) match {
          case Success(_) => jobsSucceeded += 1
          case Failure(e) if String.valueOf(e.getMessage).contains("cancelled") => jobsCancelled += 1
          case Failure(e) if String.valueOf(e.getMessage).contains(PlannedFailure) => jobsFailed += 1
          case Failure(e) => failures += s"round $round: unexpected job failure: $e"
        }
      }
    }

    def sample(label: String): Sample = {
      System.gc() // let Cleaners free the direct buffers of finished tasks, so they do not count as growth
      Thread.sleep(200)
      val st = NativeStats.read()
      val s = Sample(label, elapsed, rssBytes(), st("goHeapBytes"), st("livePlans"), Counters.churnPlans.get)
      println(s"soak: sample $s")
      s
    }

    def quiesce(): Unit = {
      // A job fails on the driver before its cancelled tasks have run their completion listeners.
      val deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(2)
      while ((TaskSpill.activePlans != 0 || NativeStats.read()("livePlans") != 0 || sc.statusTracker.getActiveJobIds().nonEmpty) &&
        System.nanoTime() < deadline) Thread.sleep(50)
    }

    try {
      val roots = configured
      // Warm-up: JIT, Spark's first jobs, the library's caches; the memory baseline is taken after it.
      (0 until 3).foreach(r => runRound(-1 - r))
      quiesce()
      val samples = Seq.newBuilder[Sample]
      val warm = sample("warm-up")
      samples += warm
      val churnAtWarm = Counters.churnPlans.get
      val loopEnd = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds)
      var nextSample = System.nanoTime() + TimeUnit.SECONDS.toNanos(math.max(10, seconds / 8))
      var rounds = 0
      while (rounds < maxRounds && System.nanoTime() < loopEnd) {
        runRound(rounds)
        rounds += 1
        if (System.nanoTime() >= nextSample) {
          quiesce()
          samples += sample(s"round $rounds")
          nextSample = System.nanoTime() + TimeUnit.SECONDS.toNanos(math.max(10, seconds / 8))
        }
      }
      quiesce()
      // The leak check needs a known number of plan lifecycles, whatever the clock allowed.
      val topUp = math.max(0L, MinChurnPlans - (Counters.churnPlans.get - churnAtWarm))
      if (topUp > 0) {
        val perTask = ((topUp + 3) / 4).toInt
        sc.parallelize(0 until 4, 4).foreach(_ => churn(perTask))
      }
      quiesce()
      val end = sample("end")
      samples += end
      val st = NativeStats.read()
      val left = spillwayEntriesUnder(roots)
      val plansAfterWarm = Counters.churnPlans.get - churnAtWarm

      println(f"soak: $rounds rounds in ${elapsed}s; jobs: $jobsSucceeded succeeded, $jobsFailed failed (planned), $jobsCancelled cancelled")
      println(s"soak: tasks ${Counters.tasks.get}: ${Counters.spillTasks.get} spilled, ${Counters.slowSpillTasks.get} spilled slowly, " +
        s"${Counters.sortTasks.get} sorted natively, ${Counters.tasksWithoutPlan.get} took no plan, " +
        s"${Counters.plannedFailures.get} failed on purpose after spilling, ${Counters.tasksKilled.get} killed mid-run (cancelled or a sibling failed)")
      println(s"soak: spill files ${Counters.files.get} (${Counters.bytes.get / MiB} MiB), native sorts: ${Counters.sortRecords.get} records, " +
        s"${Counters.sortRuns.get} runs spilled, ${Counters.sortPlans.get} plans")
      println(s"soak: plan lifecycles for the leak check: ${Counters.churnPlans.get} in all, $plansAfterWarm after the warm-up (half of them spilling)")
      println(s"soak: native stats: ${st.values.map { case (n, v) => s"$n $v" }.mkString(", ")}")
      println(s"soak: left under the local dirs: ${left.size} spillway entries")

      failures ++= Counters.violations.asScala
      if (left.nonEmpty) failures += s"left under the local dirs: ${left.take(20).mkString(", ")}"
      if (TaskSpill.activePlans != 0) failures += s"TaskSpill still holds ${TaskSpill.activePlans} plans"
      if (st("livePlans") != 0) failures += s"${st("livePlans")} native plans still live"
      if (st("bytesInUse") != 0) failures += s"${st("bytesInUse")} bytes still in use"
      if (jobsCancelled == 0 || jobsFailed == 0 || Counters.tasksKilled.get == 0) {
        failures += s"the soak did not exercise failures and cancellations: $jobsFailed failed jobs, $jobsCancelled cancelled, ${Counters.tasksKilled.get} killed tasks"
      }
      failures ++= checkMemory(warm, end, plansAfterWarm)
      val problems = failures.result()
      problems.foreach(p => println(s"soak: FAILURE: $p"))
      problems.isEmpty
    } finally {
      canceller.shutdownNow()
      pool.shutdownNow()
      spark.stop()
      TestFiles.deleteRecursively(base)
    }
  }

  /**
   * Memory bounds between the warm-up and the end, generous against noise but tight enough for a
   * leak per plan: at least MinChurnPlans (131072) plan lifecycles run in between, half of them
   * spilling, besides the Spark tasks' own plans.
   *
   *  - Go heap (live and not yet swept objects): end < warm-up + 64 MiB. The heap only holds
   *    garbage up to the GC goal (about twice the live heap), a few MiB here; a leak of 512 bytes
   *    per plan would add 64 MiB over 131072 plans, so it fails this.
   *  - VmRSS: end < warm-up + 256 MiB. The Java heap is fully resident from the start
   *    (-Xms = -Xmx, AlwaysPreTouch), so the growth is native: JIT code, metaspace, malloc arenas,
   *    thread stacks and the Go heap, tens of MiB in practice. It catches native leaks of about
   *    2 KiB per plan or more (a leaked JNI global ref or C string per call is smaller: that is
   *    what the Go heap bound and -Xcheck:jni cover).
   */
  def checkMemory(warm: Sample, end: Sample, plans: Long): Seq[String] = {
    val problems = Seq.newBuilder[String]
    if (plans < MinChurnPlans) problems += s"only $plans plan lifecycles after the warm-up: the leak bounds need $MinChurnPlans"
    if (end.goHeapBytes >= warm.goHeapBytes + 64 * MiB) {
      problems += s"Go heap grew from ${warm.goHeapBytes} to ${end.goHeapBytes} bytes over $plans plans"
    }
    if (end.rssBytes >= warm.rssBytes + 256 * MiB) {
      problems += s"VmRSS grew from ${warm.rssBytes} to ${end.rssBytes} bytes over $plans plans"
    }
    problems.result()
  }
}
