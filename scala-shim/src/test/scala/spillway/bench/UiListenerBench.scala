package spillway.bench

import java.nio.file.Files

import org.apache.spark.spillway.ListenerBusProbe
import org.apache.spark.sql.SparkSession

import spillway.TestFiles
import spillway.bench.BenchSupport._

/**
 * What Spillway's events and the Spillway tab cost a spilling SQL sort: the sort's stage time with
 * the plugin on (each task that spilled reports to the driver, the driver sums per stage and posts
 * the events, the tab's listener builds its rows, the executor's updates every
 * `spark.spillway.ui.updateInterval`, here 1s) against the same sort with the plugin off (the SQL
 * extension alone: the same native sort, no event, no tab). Both with the live UI on, in local[2],
 * each way in a fresh SparkContext (the plugin is read as one starts). Not a test: it prints the
 * sort stage's wall time per way, medians with their range, the ratio, and the noise (the
 * wider spread of the two ways' runs).
 *
 * Usage: `project/sbt "Test/runMain spillway.bench.UiListenerBench rows rounds"`, default
 * "2000000 5" (`make bench-ui`): each round runs both ways, their order alternating, each way's
 * query three times after a warm-up run that is not counted.
 */
object UiListenerBench {
  private val RunsPerSession = 3

  def main(args: Array[String]): Unit = {
    val rows = args.headOption.map(_.toLong).getOrElse(2000000L)
    val rounds = args.lift(1).map(_.toInt).getOrElse(5)
    val local = Files.createTempDirectory("spillway-ui-bench-")
    val times = Map(true -> Seq.newBuilder[Double], false -> Seq.newBuilder[Double])
    var spilled = Map.empty[Boolean, Long]
    try {
      for (round <- 0 until rounds; on <- if (round % 2 == 0) Seq(true, false) else Seq(false, true)) {
        val (ts, disk) = session(on, rows, local)
        times(on) ++= ts
        spilled += on -> disk
        println(f"round ${round + 1}%d, plugin ${if (on) "on " else "off"}: sort stage ${ts.map(t => f"$t%.2f").mkString(", ")} s")
      }
    } finally TestFiles.deleteRecursively(local)
    val onT = times(true).result()
    val offT = times(false).result()
    val ratio = median(onT) / median(offT)
    // Either way's runs spread as much with nothing changed: the wider spread is the noise.
    val noise = Seq(onT, offT).map(t => (t.max - t.min) / median(t)).max
    println()
    println(s"A spilling SQL sort of $rows rows (local[2], 2 partitions, a 8m sort budget), sort stage wall time, s:")
    println(s"| plugin (events, tab's listener) | median (min-max) | runs | spilled on disk per run |")
    println(s"|---|---|---|---|")
    println(s"| off | ${spread(offT)} | ${offT.size} | ${spilled.getOrElse(false, 0L)} |")
    println(s"| on | ${spread(onT)} | ${onT.size} | ${spilled.getOrElse(true, 0L)} |")
    println(f"on/off: $ratio%.3f; noise (the wider of the two ways' range over its median): $noise%.3f; " +
      s"${if (math.abs(ratio - 1) <= noise) "within the noise" else "outside the noise"}")
  }

  /** One SparkContext, the plugin `on` or off: the sort stage's times of its counted runs, and its spill per run. */
  private def session(on: Boolean, rows: Long, local: java.nio.file.Path): (Seq[Double], Long) = {
    val builder = SparkSession.builder().master("local[2]").appName(s"UiListenerBench-${if (on) "on" else "off"}")
      .config("spark.sql.extensions", SpillwayExtensions)
      .config("spark.spillway.sort.memoryBudget", "8m")
      .config("spark.spillway.ui.updateInterval", "1s")
      .config("spark.sql.shuffle.partitions", "2")
      .config("spark.sql.adaptive.enabled", "false")
      .config("spark.local.dir", local.toString)
      .config("spark.ui.enabled", "true")
      .config("spark.ui.port", "0")
    val spark = (if (on) builder.config("spark.plugins", SpillwayPlugin) else builder).getOrCreate()
    try {
      val stages = stageTimes(spark)
      val runs = (0 to RunsPerSession).map { _ =>
        spark.range(0, rows, 1, 2)
          .selectExpr("id", "cast(rand(11) * 1e12 as bigint) as k", "repeat('x', 40) as pad")
          .orderBy("k").write.format("noop").mode("overwrite").save()
        ListenerBusProbe.drain(spark.sparkContext)
        stages.take().last // the sort: the job's last stage
      }.tail
      (runs.map(_.seconds), runs.last.diskBytesSpilled)
    } finally {
      spark.stop()
      SparkSession.clearActiveSession()
      SparkSession.clearDefaultSession()
    }
  }
}
