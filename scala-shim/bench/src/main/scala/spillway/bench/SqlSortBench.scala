package spillway.bench

import java.nio.file.Files

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.SortExec
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanHelper

import spillway.sql.{SpillwaySortExec, SpillwaySortRule}

/**
 * A spilling SQL `ORDER BY` with Spillway's SQL extension on and off, in alternating runs of the
 * same query on the same data and the same execution memory. Not a test: it prints the times.
 *
 * Usage: `project/sbt "bench/runMain spillway.bench.SqlSortBench rows memory runs"`, default
 * "4000000 64m 3": local[1] (one task at a time) with `memory` bytes of Spark execution memory,
 * the native sort's budget the same; rows of a long key, a string key and a 60-byte payload,
 * ordered by the string descending then the long; every row is read, none kept. Both sorts must
 * spill (their "spill size" metric); the bench warns otherwise.
 */
object SqlSortBench extends AdaptiveSparkPlanHelper {
  def main(args: Array[String]): Unit = {
    val rows = args.lift(0).map(_.toLong).getOrElse(4000000L)
    val memory = args.lift(1).getOrElse("64m")
    val runs = args.lift(2).map(_.toInt).getOrElse(3)
    val memoryBytes = org.apache.spark.network.util.JavaUtils.byteStringAsBytes(memory)
    val local = Files.createTempDirectory("spillway-sql-bench-")
    val spark = SparkSession.builder()
      .master("local[1]")
      .config("spark.local.dir", local.toString)
      .config("spark.ui.enabled", "false")
      .config("spark.sql.extensions", "spillway.SpillwayExtensions")
      .config("spark.testing.memory", memoryBytes.toString)
      .config("spark.testing.reservedMemory", "0")
      .config("spark.memory.fraction", "1.0")
      .config("spark.spillway.sort.memoryBudget", memory)
      .config("spark.sql.shuffle.partitions", "4")
      .getOrCreate()
    try {
      spark.range(0, rows, 1, 4)
        .selectExpr("id", "(id * 2654435761) % 1000003 AS k", "concat('key-', cast((id * 40503) % 999983 AS string)) AS s",
          "repeat('p', 60) AS payload")
        .write.parquet(local.resolve("data").toString)
      val query = s"SELECT * FROM parquet.`${local.resolve("data")}` ORDER BY s DESC, k"
      var notSpilled = 0
      def once(enabled: Boolean): Double = {
        spark.conf.set(SpillwaySortRule.EnabledKey, enabled.toString)
        val t0 = System.nanoTime()
        val df = spark.sql(query)
        df.queryExecution.toRdd.foreach(_ => ()) // every row, nothing kept
        val seconds = (System.nanoTime() - t0) / 1e9
        // SQL metrics are merged on the driver before the job returns: both sorts' "spill size".
        val sorts = collect(df.queryExecution.executedPlan) { case s: SortExec => s } // the native node is a SortExec too
        if (sorts.isEmpty || sorts.exists(s => enabled != s.isInstanceOf[SpillwaySortExec])) {
          throw new IllegalStateException(s"unexpected sorts with the extension ${if (enabled) "on" else "off"}: $sorts")
        }
        if (sorts.map(_.metrics("spillSize").value).sum == 0) notSpilled += 1
        seconds
      }
      once(enabled = true); once(enabled = false) // warm-up
      val times = (0 until runs).flatMap(_ => Seq(true -> once(enabled = true), false -> once(enabled = false)))
      if (notSpilled > 0) println(s"WARNING: $notSpilled run(s) did not spill; lower the memory or raise the rows")
      def median(xs: Seq[Double]): Double = xs.sorted.apply(xs.size / 2)
      val on = median(times.filter(_._1).map(_._2))
      val off = median(times.filterNot(_._1).map(_._2))
      println(f"ORDER BY over $rows rows, local[1], $memory execution memory, $runs alternating runs after a warm-up")
      println(f"  Spark's sort:     median $off%.2f s  ${times.filterNot(_._1).map(t => f"${t._2}%.2f").mkString(" ")}")
      println(f"  Spillway's sort:  median $on%.2f s  ${times.filter(_._1).map(t => f"${t._2}%.2f").mkString(" ")}")
      println(f"  ratio (Spark / Spillway): ${off / on}%.2f")
    } finally {
      spark.stop()
      org.apache.commons.io.FileUtils.deleteDirectory(local.toFile)
    }
  }
}
