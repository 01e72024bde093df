package spillway.bench

import java.nio.file.{Files, Paths}

import org.apache.spark.spillway.ListenerBusProbe
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.{SortExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanHelper

import spillway.TestFiles
import spillway.sql.{SpillwaySortExec, SpillwaySortRule}
import spillway.tpch.TpchTables

/**
 * TPC-H with Spillway's SQL extension on and off, alternating runs in one JVM: a spilling
 * `ORDER BY` over lineitem, then the 22 queries, and the 22 again with Apache DataFusion Comet
 * 1.2.0 on (Comet alone against Comet with Spillway). Not a test: it prints the times (medians),
 * the ratios off / on (above 1: on is faster) and whether the results are the same.
 *
 * Usage: `project/sbt "Test/runMain spillway.bench.TpchBench scaleFactor memory runs [dataDir [phases]]"`,
 * default "1 128m 5": local[2]; phases `order-by,queries,comet-queries` (all, the default), any of
 * them, or single queries (`q18,q21`, to profile them; with `comet-queries`, under Comet). The
 * tables are generated once into `dataDir` (default build/tpch-sf<scaleFactor>) and reused. The
 * ORDER BY runs with `memory` bytes of execution memory for both sorts (the native sort holds what
 * Spark grants it, as Spark's does), and both must spill (their "spill size" metric; the bench warns
 * otherwise); the 22 queries run on Spark's default memory settings (with Comet: 1g off-heap, which
 * Comet needs). One warm-up run each way comes first, then `runs` rounds of on, off and off, on in
 * turn. `comet-queries` needs Comet's jar on the classpath (the 4.1 line's test classpath has it).
 */
object TpchBench extends AdaptiveSparkPlanHelper {
  import BenchSupport._

  private val QueryPhase = """[qQ](\d+)""".r
  private val OrderBy = "SELECT * FROM lineitem ORDER BY l_partkey, l_suppkey DESC, l_orderkey, l_linenumber"

  def main(args: Array[String]): Unit = {
    val scaleFactor = args.lift(0).map(_.toDouble).getOrElse(1.0)
    val memory = args.lift(1).getOrElse("128m")
    val runs = args.lift(2).map(_.toInt).getOrElse(5)
    val sfName = BigDecimal(scaleFactor).bigDecimal.stripTrailingZeros.toPlainString
    val data = Paths.get(args.lift(3).filter(_.nonEmpty).getOrElse(s"build/tpch-sf$sfName")).toAbsolutePath
    val phases = args.lift(4).map(_.split(",").toSeq).getOrElse(Seq("order-by", "queries", "comet-queries"))
    val local = Files.createTempDirectory("spillway-tpch-bench-")
    try {
      tables(local, scaleFactor, sfName, data)
      val memoryBytes = org.apache.spark.network.util.JavaUtils.byteStringAsBytes(memory)
      val orderBy = if (!phases.contains("order-by")) Seq.empty else withSession("TpchBench", local, data, spillwayConfs ++ Seq(
        "spark.testing.memory" -> memoryBytes.toString, "spark.testing.reservedMemory" -> "0", "spark.memory.fraction" -> "1.0",
        "spark.sql.shuffle.partitions" -> "8")) { spark =>
        alternate(runs)(enabled => time(spark, OrderBy, enabled, collectRows = false, "ORDER BY"))
      }
      // "queries" runs all 22; "q18,q21" only those (to profile them), under Comet with "comet-queries".
      val picked = TpchTables.Queries.filter(phases.collect { case QueryPhase(n) => n.toInt }.contains)
      val comet = phases.contains("comet-queries")
      def queriesIn(confs: Seq[(String, String)], selected: Seq[Int]) =
        if (selected.isEmpty) Seq.empty else withSession("TpchBench", local, data, confs) { spark =>
          selected.map(n => n -> alternate(runs)(enabled => time(spark, TpchTables.query(n), enabled, collectRows = true, f"Q$n%02d", TpchTables.ordered(n))))
        }
      val queries = queriesIn(spillwayConfs, if (phases.contains("queries")) TpchTables.Queries else if (comet) Nil else picked)
      val cometQueries = if (!comet) Seq.empty else queriesIn(cometConfs ++ Seq(
        "spark.memory.offHeap.enabled" -> "true", "spark.memory.offHeap.size" -> "1g"), if (picked.isEmpty) TpchTables.Queries else picked)
      report(sfName, memory, runs, orderBy, queries, cometQueries)
    } finally TestFiles.deleteRecursively(local)
  }

  /**
   * One run: wall time, the number of sorts (Spark's or Spillway's), whether any of them spilled,
   * its last stage (for the ORDER BY, the one that sorts), and its rows (collected queries only),
   * as text in a canonical order (the query's own when it is ordered).
   */
  private final case class Run(enabled: Boolean, seconds: Double, sorts: Int, spilled: Boolean, lastStage: StageTime,
      rows: Option[Seq[String]])

  /** `ordered`: the rows come in the query's own order (compared as they are, else sorted). */
  private def time(spark: SparkSession, sql: String, enabled: Boolean, collectRows: Boolean, label: String,
      ordered: Boolean = false): Run = {
    spark.conf.set(SpillwaySortRule.EnabledKey, enabled.toString)
    val stages = stageTimes(spark)
    ListenerBusProbe.drain(spark.sparkContext)
    stages.take()
    val t0 = System.nanoTime()
    val df = spark.sql(sql)
    val rows = if (collectRows) Some(df.collect().toSeq) else { df.queryExecution.toRdd.foreach(_ => ()); None } // every row, none kept
    val seconds = (System.nanoTime() - t0) / 1e9
    val plan: SparkPlan = df.queryExecution.executedPlan
    val sorts = collectWithSubqueries(plan) { case s: SortExec => s } // the native node is a SortExec too
    if (sorts.exists(s => enabled != s.isInstanceOf[SpillwaySortExec])) {
      throw new IllegalStateException(s"unexpected sorts with the extension ${if (enabled) "on" else "off"}:\n$plan")
    }
    val spilled = sorts.exists(_.metrics("spillSize").value > 0)
    ListenerBusProbe.drain(spark.sparkContext)
    val last = stages.take().lastOption.getOrElse(throw new IllegalStateException(s"no stage of $label completed"))
    println(f"  $label%-8s ${if (enabled) "on" else "off"}%-3s $seconds%7.2f s, ${sorts.size} sorts${if (spilled) ", spilled" else ""}" +
      f" (last stage ${last.seconds}%.2f s, ${last.cpuSeconds}%.2f task CPU-s)") // progress
    Run(enabled, seconds, sorts.size, spilled, last, rows.map(rs => if (ordered) rs.map(_.toString) else rs.map(_.toString).sorted))
  }

  /**
   * A warm-up run each way, then `runs` rounds, on first in even rounds and off first in odd ones
   * (running first in every round was a bias of its own); the warm-up is not returned.
   */
  private def alternate(runs: Int)(once: Boolean => Run): Seq[Run] = {
    once(true); once(false)
    (0 until runs).flatMap(round => if (round % 2 == 0) Seq(once(true), once(false)) else Seq(once(false), once(true)))
  }

  private def report(sf: String, memory: String, runs: Int, orderBy: Seq[Run], queries: Seq[(Int, Seq[Run])],
      cometQueries: Seq[(Int, Seq[Run])]): Unit = {
    println()
    println(s"TPC-H SF$sf, local[2], extension on and off in $runs alternating rounds after a warm-up; medians")
    if (orderBy.nonEmpty) reportOrderBy(memory, orderBy)
    if (queries.nonEmpty) reportQueries("Spark's sort", "Spillway", queries)
    if (cometQueries.nonEmpty) reportQueries("Comet alone", "Comet+Spillway", cometQueries)
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

  /**
   * Per query the medians off and on and their ratio; then the median of the per-query ratios and
   * their range, beside the same for the queries whose plans do not change (no sort: the extension
   * has nothing to replace), which is the noise: a sorting query is slower only below that band.
   */
  private def reportQueries(off: String, on: String, queries: Seq[(Int, Seq[Run])]): Unit = {
    println(s"\n| query | sorts | $off (s) | $on (s) | $off / $on | spilled | same result |")
    println("|---|---|---|---|---|---|---|")
    var totalOff = 0.0
    var totalOn = 0.0
    val ratios = queries.map { case (n, rs) =>
      val (s, o) = (median(times(rs, enabled = false)), median(times(rs, enabled = true)))
      totalOff += s
      totalOn += o
      val spilled = if (rs.exists(r => r.enabled && r.spilled)) "yes" else ""
      val same = if (rs.flatMap(_.rows).distinct.size == 1) "yes" else "NO"
      println(f"| Q$n%02d | ${rs.head.sorts} | $s%.2f | $o%.2f | ${s / o}%.2f | $spilled | $same |")
      (n, rs.head.sorts, s / o)
    }
    println(f"| total | | $totalOff%.2f | $totalOn%.2f | ${totalOff / totalOn}%.2f | | |")
    val different = queries.collect { case (n, rs) if rs.flatMap(_.rows).distinct.size > 1 => f"Q$n%02d" }
    val unchanged = ratios.filter(_._2 == 0).map(_._3)
    val sorting = ratios.filter(_._2 > 0)
    println(s"\nper-query ratio $off / $on: all ${spread(ratios.map(_._3))}; " +
      s"the ${unchanged.size} with no sort (the same plan on and off: the noise) ${spread(unchanged)}; " +
      s"the ${sorting.size} with sorts ${spread(sorting.map(_._3))}")
    val slower = if (unchanged.isEmpty) Seq.empty else sorting.filter(_._3 < unchanged.min)
    println(s"queries with sorts slower on than off beyond the noise (a ratio below the lowest of the unchanged plans): " +
      s"${if (slower.isEmpty) "none" else slower.map { case (n, _, r) => f"Q$n%02d ($r%.2f)" }.mkString(", ")}")
    println(s"queries whose results differ between runs: ${if (different.isEmpty) "none" else different.mkString(", ")}")
  }
}
