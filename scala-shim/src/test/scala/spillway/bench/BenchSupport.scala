package spillway.bench

import java.lang.management.ManagementFactory
import java.nio.file.{Files, Path}

import org.apache.spark.scheduler.{SparkListener, SparkListenerStageCompleted, SparkListenerStageSubmitted}
import org.apache.spark.sql.SparkSession

import spillway.TestFiles
import spillway.tpch.TpchTables

/** What the SQL benchmarks share: stage times, medians, sessions and the TPC-H tables. */
private[bench] object BenchSupport {

  /**
   * A stage's wall time (submission to completion), its task threads' CPU time (Spark's metric:
   * JNI calls included, not the JVM's and the native engines' own threads), and the process's CPU
   * time over the same span (every thread: GC, JIT, Go's and Comet's background threads). The
   * stages the benchmarks time run alone, so the process's CPU is the stage's, give or take the
   * listener bus's delay in telling of its start and end.
   */
  final case class StageTime(seconds: Double, cpuSeconds: Double, processCpuSeconds: Double, diskBytesSpilled: Long = 0L,
      tasks: Int = 0)

  /** The stages completed since the last `take`, in completion order. */
  final class StageTimes extends SparkListener {
    private val os = ManagementFactory.getOperatingSystemMXBean.asInstanceOf[com.sun.management.OperatingSystemMXBean]
    private val startCpu = scala.collection.mutable.Map.empty[Int, Long]
    private val done = scala.collection.mutable.ArrayBuffer.empty[StageTime]
    override def onStageSubmitted(e: SparkListenerStageSubmitted): Unit = synchronized {
      startCpu(e.stageInfo.stageId) = os.getProcessCpuTime
    }
    override def onStageCompleted(e: SparkListenerStageCompleted): Unit = synchronized {
      val info = e.stageInfo
      val cpu = startCpu.remove(info.stageId).map(s => (os.getProcessCpuTime - s) / 1e9).getOrElse(Double.NaN)
      // A failed attempt is not the stage's time: its retry completes later.
      for (start <- info.submissionTime; end <- info.completionTime if info.failureReason.isEmpty) {
        done += StageTime((end - start) / 1e3, info.taskMetrics.executorCpuTime / 1e9, cpu, info.taskMetrics.diskBytesSpilled,
          info.numTasks)
      }
    }
    def take(): Seq[StageTime] = synchronized { val all = done.toList; done.clear(); all }
  }

  private val listeners = scala.collection.mutable.Map.empty[SparkSession, StageTimes]

  def stageTimes(spark: SparkSession): StageTimes =
    listeners.getOrElseUpdate(spark, { val l = new StageTimes; spark.sparkContext.addSparkListener(l); l })

  /** A local[2] session of `confs` with the TPC-H tables under `data` registered; stopped after `body`. */
  def withSession[T](name: String, local: Path, data: Path, confs: Seq[(String, String)])(body: SparkSession => T): T = {
    val spark = confs.foldLeft(SparkSession.builder().master("local[2]").appName(name)) { case (b, (k, v)) => b.config(k, v) }
      .config("spark.local.dir", local.toString)
      .config("spark.ui.enabled", "false")
      .getOrCreate()
    try {
      TpchTables.register(spark, data)
      body(spark)
    } finally {
      listeners.remove(spark)
      spark.stop()
      SparkSession.clearActiveSession()
      SparkSession.clearDefaultSession()
    }
  }

  /** The TPC-H tables at `scaleFactor` in `data`, generated there unless a complete set is there already. */
  def tables(local: Path, scaleFactor: Double, sfName: String, data: Path): Unit =
    if (TpchTables.written(data)) println(s"TPC-H SF$sfName tables: $data (reused)")
    else generate(local, scaleFactor, sfName, data)

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

  def median(xs: Seq[Double]): Double = {
    val s = xs.sorted
    if (s.isEmpty) Double.NaN
    else if (s.size % 2 == 1) s(s.size / 2)
    else (s(s.size / 2 - 1) + s(s.size / 2)) / 2
  }

  /** "median (min-max)" of xs. */
  def spread(xs: Seq[Double], digits: Int = 2): String =
    if (xs.isEmpty) "-" else s"%.${digits}f (%.${digits}f-%.${digits}f)".format(median(xs), xs.min, xs.max)

  /** What Comet 1.2.0 needs (its plugin adds its extension to `spark.sql.extensions` if absent). */
  val CometPlugin = "org.apache.spark.CometPlugin"
  val CometExtensions = "org.apache.comet.CometSparkSessionExtensions"
  val CometShuffleManager = "org.apache.spark.sql.comet.execution.shuffle.CometShuffleManager"
  val SpillwayPlugin = "spillway.SpillwayPlugin"
  val SpillwayExtensions = "spillway.SpillwayExtensions"

  /** A session with Spillway's plugin and extension: its rule on or off gives Spillway's sort or Spark's. */
  def spillwayConfs: Seq[(String, String)] = Seq("spark.plugins" -> SpillwayPlugin, "spark.sql.extensions" -> SpillwayExtensions)

  /**
   * A session with Comet and Spillway, Comet's extension first (as Comet's plugin puts it when a
   * user sets only Spillway's): Spillway's rule off gives Comet alone, on gives both.
   */
  def cometConfs: Seq[(String, String)] = Seq(
    "spark.plugins" -> s"$SpillwayPlugin,$CometPlugin",
    "spark.sql.extensions" -> s"$CometExtensions,$SpillwayExtensions",
    "spark.shuffle.manager" -> CometShuffleManager)
}
