package spillway.bench

import java.nio.file.{Files, Path, Paths}

import org.apache.spark.scheduler.{SparkListener, SparkListenerStageCompleted}
import org.apache.spark.spillway.ListenerBusProbe
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.{SortExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanHelper

import spillway.TestFiles
import spillway.sql.{SpillwaySortExec, SpillwaySortRule}
import spillway.tpch.TpchTables

/**
 * TPC-H with Spillway's SQL extension on and off, alternating runs in one JVM: a spilling
 * `ORDER BY` over lineitem, then the 22 queries. Not a test: it prints the times (medians) and
 * the ratios Spark / Spillway (above 1: Spillway faster).
 *
 * Usage: `project/sbt "Test/runMain spillway.bench.TpchBench scaleFactor memory runs [dataDir [phases]]"`,
 * default "1 128m 2": local[2]; phases `order-by,queries` (both, the default), or either alone, or
 * single queries (`q18,q21`, to profile them). The tables are generated once into `dataDir` (default
 * build/tpch-sf<scaleFactor>) and reused. The ORDER BY runs with `memory` bytes of execution memory
 * for both sorts (the native sort holds what Spark grants it, as Spark's does), and both must spill (their "spill size"
 * metric; the bench warns otherwise); the 22 queries run on Spark's default memory settings. One
 * warm-up run each way comes first, then `runs` rounds of on, off and off, on in turn.
 */
object TpchBench extends AdaptiveSparkPlanHelper {
  private val QueryPhase = """[qQ](\d+)""".r
  private val OrderBy = "SELECT * FROM lineitem ORDER BY l_partkey, l_suppkey DESC, l_orderkey, l_linenumber"

  def main(args: Array[String]): Unit = {
    val scaleFactor = args.lift(0).map(_.toDouble).getOrElse(1.0)
    val memory = args.lift(1).getOrElse("128m")
    val runs = args.lift(2).map(_.toInt).getOrElse(2)
    val sfName = BigDecimal(scaleFactor).bigDecimal.stripTrailingZeros.toPlainString
    val data = Paths.get(args.lift(3).filter(_.nonEmpty).getOrElse(s"build/tpch-sf$sfName")).toAbsolutePath
    val phases = args.lift(4).map(_.split(",").toSeq).getOrElse(Seq("order-by", "queries"))
    val local = Files.createTempDirectory("spillway-tpch-bench-")
    try {
      if (!TpchTables.written(data)) generate(local, scaleFactor, sfName, data)
      else println(s"TPC-H SF$sfName tables: $data (reused)")
      val memoryBytes = org.apache.spark.network.util.JavaUtils.byteStringAsBytes(memory)
      val orderBy = if (!phases.contains("order-by")) Seq.empty else withSession(local, data,
        "spark.testing.memory" -> memoryBytes.toString, "spark.testing.reservedMemory" -> "0", "spark.memory.fraction" -> "1.0",
        "spark.sql.shuffle.partitions" -> "8") { spark =>
        alternate(runs)(enabled => time(spark, OrderBy, enabled, collectRows = false, "ORDER BY"))
      }
      // "queries" runs all 22; "q18,q21" only those (to profile them).
      val picked = phases.collect { case QueryPhase(n) => n.toInt }
      val selected = if (phases.contains("queries")) TpchTables.Queries else TpchTables.Queries.filter(picked.contains)
      val queries = if (selected.isEmpty) Seq.empty else withSession(local, data) { spark =>
        selected.map { n =>
          val sql = TpchTables.query(n)
          n -> alternate(runs)(enabled => time(spark, sql, enabled, collectRows = true, f"Q$n%02d"))
        }
      }
      report(sfName, memory, runs, orderBy, queries)
    } finally TestFiles.deleteRecursively(local)
  }

  /**
   * One run: wall time, the number of sorts (Spark's or Spillway's), whether any of them spilled,
   * and its last stage (for the ORDER BY, the one that sorts): wall and task CPU seconds.
   */
  private final case class Run(enabled: Boolean, seconds: Double, sorts: Int, spilled: Boolean, lastStage: StageTime)

  /**
   * A stage's wall time (submission to completion) and its task threads' CPU time (JNI calls
   * included; not the JVM's and Go's background threads: GC, read-ahead).
   */
  private final case class StageTime(seconds: Double, cpuSeconds: Double)

  /** The stages completed since the last `take`, in completion order. */
  private final class StageTimes extends SparkListener {
    private val done = scala.collection.mutable.ArrayBuffer.empty[StageTime]
    override def onStageCompleted(e: SparkListenerStageCompleted): Unit = synchronized {
      val info = e.stageInfo
      // A failed attempt is not the stage's time: its retry completes later.
      for (start <- info.submissionTime; end <- info.completionTime if info.failureReason.isEmpty) {
        done += StageTime((end - start) / 1e3, info.taskMetrics.executorCpuTime / 1e9)
      }
    }
    def take(): Seq[StageTime] = synchronized { val all = done.toList; done.clear(); all }
  }

  private def time(spark: SparkSession, sql: String, enabled: Boolean, collectRows: Boolean, label: String): Run = {
    spark.conf.set(SpillwaySortRule.EnabledKey, enabled.toString)
    val stages = stageTimes(spark)
    ListenerBusProbe.drain(spark.sparkContext)
    stages.take()
    val t0 = System.nanoTime()
    val df = spark.sql(sql)
    if (collectRows) df.collect() else df.queryExecution.toRdd.foreach(_ => ()) // every row, none kept
    val seconds = (System.nanoTime() - t0) / 1e9
    val plan: SparkPlan = df.queryExecution.executedPlan
    val sorts = collectWithSubqueries(plan) { case s: SortExec => s } // the native node is a SortExec too
    if (sorts.exists(s => enabled != s.isInstanceOf[SpillwaySortExec])) {
      throw new IllegalStateException(s"unexpected sorts with the extension ${if (enabled) "on" else "off"}:\n$plan")
    }
    val spilled = sorts.exists(_.metrics("spillSize").value > 0)
    ListenerBusProbe.drain(spark.sparkContext)
    val last = stages.take().lastOption.getOrElse(throw new IllegalStateException(s"no stage of $label completed"))
    println(f"  $label%-8s ${if (enabled) "Spillway" else "Spark"}%-8s $seconds%7.2f s${if (spilled) ", spilled" else ""}" +
      f" (last stage ${last.seconds}%.2f s, ${last.cpuSeconds}%.2f task CPU-s)") // progress
    Run(enabled, seconds, sorts.size, spilled, last)
  }

  private val listeners = scala.collection.mutable.Map.empty[SparkSession, StageTimes]

  private def stageTimes(spark: SparkSession): StageTimes =
    listeners.getOrElseUpdate(spark, { val l = new StageTimes; spark.sparkContext.addSparkListener(l); l })

  /**
   * A warm-up run each way, then `runs` rounds, on first in even rounds and off first in odd ones
   * (running first in every round was a bias of its own); the warm-up is not returned.
   */
  private def alternate(runs: Int)(once: Boolean => Run): Seq[Run] = {
    once(true); once(false)
    (0 until runs).flatMap(round => if (round % 2 == 0) Seq(once(true), once(false)) else Seq(once(false), once(true)))
  }

  private def withSession[T](local: Path, data: Path, confs: (String, String)*)(body: SparkSession => T): T = {
    val spark = confs.foldLeft(SparkSession.builder().master("local[2]").appName("TpchBench")) { case (b, (k, v)) => b.config(k, v) }
      .config("spark.local.dir", local.toString)
      .config("spark.ui.enabled", "false")
      .config("spark.sql.extensions", "spillway.SpillwayExtensions")
      // Spillway's defaults: the native sort follows Spark's grant, as Spark's own does, so the
      // "spilled" column shows where either spills in the same memory.
      .getOrCreate()
    try {
      TpchTables.register(spark, data)
      body(spark)
    } finally spark.stop()
  }

  /** Generates the tables into `data` through a sibling directory renamed at the end, so a cut-off run leaves no half set. */
  private def generate(local: Path, scaleFactor: Double, sfName: String, data: Path): Unit = {
    val partial = data.resolveSibling(data.getFileName.toString + ".partial")
    TestFiles.deleteRecursively(partial)
    Files.createDirectories(data.getParent)
    val t0 = System.nanoTime()
    val spark = SparkSession.builder().master("local[2]").appName("TpchBench-generate")
      .config("spark.local.dir", local.toString).config("spark.ui.enabled", "false").getOrCreate()
    try TpchTables.write(spark, scaleFactor, partial, parts = math.max(2, math.ceil(scaleFactor * 16).toInt))
    finally spark.stop()
    TestFiles.deleteRecursively(data)
    Files.move(partial, data)
    println(f"TPC-H SF$sfName tables generated into $data in ${(System.nanoTime() - t0) / 1e9}%.0f s")
  }

  private def median(xs: Seq[Double]): Double = {
    val s = xs.sorted
    if (s.size % 2 == 1) s(s.size / 2) else (s(s.size / 2 - 1) + s(s.size / 2)) / 2
  }

  private def report(sf: String, memory: String, runs: Int, orderBy: Seq[Run], queries: Seq[(Int, Seq[Run])]): Unit = {
    println()
    println(s"TPC-H SF$sf, local[2], extension on and off in $runs alternating rounds after a warm-up; medians")
    if (orderBy.nonEmpty) reportOrderBy(memory, orderBy)
    if (queries.nonEmpty) reportQueries(queries)
  }

  private def times(rs: Seq[Run], enabled: Boolean): Seq[Double] = rs.filter(_.enabled == enabled).map(_.seconds)

  private def reportOrderBy(memory: String, orderBy: Seq[Run]): Unit = {
    def fmt(xs: Seq[Double]): String = xs.map(x => f"$x%.2f").mkString(" ")
    val spark = times(orderBy, enabled = false)
    val native = times(orderBy, enabled = true)
    val notSpilled = orderBy.count(!_.spilled)
    println(s"\n$OrderBy\n  ($memory execution memory; ${if (notSpilled == 0) "every run of both sorts spilled" else s"WARNING: $notSpilled run(s) did not spill"})")
    println(f"  Spark's sort     median ${median(spark)}%7.2f s   runs ${fmt(spark)}")
    println(f"  Spillway's sort  median ${median(native)}%7.2f s   runs ${fmt(native)}")
    println(f"  ratio Spark / Spillway: ${median(spark) / median(native)}%.2f")
    // The sort runs in the last stage (shuffle read, sort, output); sampling the ranges and the
    // shuffle write before it are Spark's, the same both ways.
    def last(enabled: Boolean, f: StageTime => Double): Double = median(orderBy.filter(_.enabled == enabled).map(r => f(r.lastStage)))
    val (sparkSort, nativeSort) = (last(enabled = false, _.seconds), last(enabled = true, _.seconds))
    println(f"  the sorting stage: Spark's sort ${sparkSort}%.2f s (${last(enabled = false, _.cpuSeconds)}%.2f task CPU-s), Spillway's " +
      f"${nativeSort}%.2f s (${last(enabled = true, _.cpuSeconds)}%.2f task CPU-s): ratio ${sparkSort / nativeSort}%.2f")
    println(f"  the stages before it: ${median(spark) - sparkSort}%.2f s with Spark's sort; a sorting stage taking no time at all " +
      f"would make the query at most ${median(spark) / (median(spark) - sparkSort)}%.2fx faster")
  }

  private def reportQueries(queries: Seq[(Int, Seq[Run])]): Unit = {
    println("\n| query | sorts | Spark's sort (s) | Spillway (s) | Spark / Spillway | spilled |")
    println("|---|---|---|---|---|---|")
    var totalSpark = 0.0
    var totalNative = 0.0
    val slower = Seq.newBuilder[String]
    queries.foreach { case (n, rs) =>
      val (s, o) = (median(times(rs, enabled = false)), median(times(rs, enabled = true)))
      totalSpark += s
      totalNative += o
      if (o > s * 1.05) slower += f"Q$n%02d (${(o / s - 1) * 100}%.0f%% slower)"
      val spilled = if (rs.exists(r => r.enabled && r.spilled)) "yes" else ""
      println(f"| Q$n%02d | ${rs.head.sorts} | $s%.2f | $o%.2f | ${s / o}%.2f | $spilled |")
    }
    println(f"| total | | $totalSpark%.2f | $totalNative%.2f | ${totalSpark / totalNative}%.2f | |")
    val over = slower.result()
    println(s"\nqueries more than 5% slower with Spillway: ${if (over.isEmpty) "none" else over.mkString(", ")}")
  }
}
