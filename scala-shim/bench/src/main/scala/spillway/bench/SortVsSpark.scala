package spillway.bench

import java.nio.file.Files

import scala.collection.mutable

import org.apache.spark.rdd.RDD
import org.apache.spark.scheduler.{SparkListener, SparkListenerJobEnd, SparkListenerTaskEnd}
import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.types.{BinaryType, StructField, StructType}

import spillway.NativeSort._
import spillway.SpillwayConf

/**
 * Wall time of Spillway's native sort against Spark's own sort (`sortWithinPartitions` on a binary
 * key column, i.e. SortExec's UnsafeExternalRowSorter with its unsigned binary prefix comparator)
 * on the same records, with the same execution memory, both forced to spill. Not a test: it
 * prints figures.
 *
 * Both pipelines generate the same records in their tasks (the native one as byte-array pairs, the
 * Spark one as rows of a DataFrame built from them) and consume the sorted output without
 * materialising it; each is also run without its sort, and the difference is reported as the
 * sort's own time. Medians of several runs after a warm-up.
 *
 * Usage: make bench-sort [BENCH_SORT_ARGS="records partitions memory runs"], default
 * "4000000 2 32m 5": local[1], so tasks run one at a time, each with `memory` bytes of Spark
 * execution memory and a native budget of the same.
 */
object SortVsSpark {
  private val KeyBytes = 16
  private val ValueBytes = 16

  def main(args: Array[String]): Unit = {
    val records = args.lift(0).map(_.toInt).getOrElse(4000000)
    val partitions = args.lift(1).map(_.toInt).getOrElse(2)
    val memory = args.lift(2).getOrElse("32m")
    val runs = args.lift(3).map(_.toInt).getOrElse(5)
    val memoryBytes = org.apache.spark.network.util.JavaUtils.byteStringAsBytes(memory)

    val local = Files.createTempDirectory("spillway-bench-")
    val spark = SparkSession
      .builder()
      .appName("spillway-sort-vs-spark")
      .master("local[1]")
      .config("spark.local.dir", local.toString)
      .config("spark.ui.enabled", "false")
      // The unified memory pool is exactly `memory` (execution may take all of it: nothing is
      // cached), and one task runs at a time, so each task may hold `memory` bytes.
      .config("spark.testing.memory", memoryBytes.toString)
      .config("spark.testing.reservedMemory", "0")
      .config("spark.memory.fraction", "1.0")
      .getOrCreate()
    try run(spark, records, partitions, memory, runs)
    finally {
      spark.stop()
      org.apache.commons.io.FileUtils.deleteQuietly(local.toFile)
    }
  }

  private def run(spark: SparkSession, records: Int, partitions: Int, memory: String, runs: Int): Unit = {
    val sc = spark.sparkContext
    sc.setLocalProperty(SpillwayConf.SortMemoryBudgetKey, memory)
    val spills = new SpillListener
    sc.addSparkListener(spills)

    val pairs: RDD[(Array[Byte], Array[Byte])] =
      sc.parallelize(0 until partitions, partitions).mapPartitionsWithIndex((p, _) => generate(p, records / partitions))
    val schema = StructType(Seq(StructField("key", BinaryType, nullable = false), StructField("value", BinaryType, nullable = false)))
    val frame = () => spark.createDataFrame(pairs.map { case (k, v) => Row(k, v) }, schema)

    // Each consumes its output without materialising it (no collect, no count that the optimizer
    // could answer without sorting).
    val cases: Seq[(String, () => Unit)] = Seq(
      "native sort" -> (() => pairs.nativeSortWithinPartitions().foreach(_ => ())),
      "native input only" -> (() => pairs.foreach(_ => ())),
      "Spark sort" -> (() => frame().sortWithinPartitions("key").queryExecution.toRdd.foreach(_ => ())),
      "Spark input only" -> (() => frame().queryExecution.toRdd.foreach(_ => ())))

    println(f"Sorting $records%d records ($KeyBytes%d-byte random key, $ValueBytes%d-byte value) in $partitions%d partitions, " +
      s"local[1], $memory of execution memory per task (native budget $memory); $runs runs after a warm-up")
    cases.foreach { case (_, job) => job() } // warm-up: JIT, class loading, the native library
    val times = mutable.Map.empty[String, mutable.Buffer[Double]]
    val spilled = mutable.Map.empty[String, (Long, Long)]
    for (_ <- 1 to runs; (name, job) <- cases) {
      spills.reset()
      val start = System.nanoTime()
      job()
      times.getOrElseUpdate(name, mutable.Buffer.empty) += (System.nanoTime() - start) / 1e9
      spilled(name) = spills.totalsOfJob()
    }

    val median = times.map { case (name, t) => name -> t.sorted.apply(t.size / 2) }
    println()
    println(f"${"case"}%-18s ${"median s"}%9s ${"runs (s)"}%-40s ${"M rec/s"}%8s ${"mem spilled"}%12s ${"disk spilled"}%12s")
    cases.foreach { case (name, _) =>
      val (mem, disk) = spilled(name)
      println(f"$name%-18s ${median(name)}%9.2f ${times(name).map(t => f"$t%.2f").mkString(" ")}%-40s ${records / median(name) / 1e6}%8.2f ${mib(mem)}%12s ${mib(disk)}%12s")
    }
    val nativeSort = median("native sort") - median("native input only")
    val sparkSort = median("Spark sort") - median("Spark input only")
    println()
    println(f"whole job, Spark / native:           ${median("Spark sort") / median("native sort")}%.2fx")
    println(f"sort alone (job minus input only):   native $nativeSort%.2f s (${records / nativeSort / 1e6}%.2f M rec/s), " +
      f"Spark $sparkSort%.2f s (${records / sparkSort / 1e6}%.2f M rec/s), Spark / native ${sparkSort / nativeSort}%.2fx")
    val bothSpilled = spilled("native sort")._2 > 0 && spilled("Spark sort")._2 > 0
    println(s"both spilled to disk: $bothSpilled")
    if (!bothSpilled) println("WARNING: a sort did not spill; lower the memory or raise the records")
  }

  /** `n` records of a random key and a value, the same for every run. */
  private def generate(partition: Int, n: Int): Iterator[(Array[Byte], Array[Byte])] = {
    val random = new java.util.Random(partition)
    Iterator.fill(n) {
      val key = new Array[Byte](KeyBytes)
      val value = new Array[Byte](ValueBytes)
      random.nextBytes(key)
      random.nextBytes(value)
      (key, value)
    }
  }

  private def mib(bytes: Long): String = f"${bytes / (1024.0 * 1024)}%.1f MiB"

  /** Memory and disk bytes spilled by the tasks of one job (events arrive after the job returns). */
  private final class SpillListener extends SparkListener {
    private var memory = 0L
    private var disk = 0L
    private var jobEnded = false
    def reset(): Unit = synchronized { memory = 0; disk = 0; jobEnded = false }

    /** Waits for the job's end event: the bus delivers its tasks' end events before it. */
    def totalsOfJob(): (Long, Long) = synchronized {
      val deadline = System.nanoTime() + 60L * 1000 * 1000 * 1000
      while (!jobEnded && System.nanoTime() < deadline) wait(100)
      (memory, disk)
    }

    override def onTaskEnd(end: SparkListenerTaskEnd): Unit = synchronized {
      if (end.taskMetrics != null) {
        memory += end.taskMetrics.memoryBytesSpilled
        disk += end.taskMetrics.diskBytesSpilled
      }
    }

    override def onJobEnd(end: SparkListenerJobEnd): Unit = synchronized {
      jobEnded = true
      notifyAll()
    }
  }
}
