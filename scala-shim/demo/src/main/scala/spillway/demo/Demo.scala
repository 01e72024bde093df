package spillway.demo

import java.io.File
import java.nio.file.{Files, Path}
import java.util.Comparator

import scala.util.Using

import org.apache.spark.SparkEnv
import org.apache.spark.sql.SparkSession

import spillway.{NativeLoader, NativeSort, NativeSortIterator, NativeStats, SpillwayConf, TaskSpill}

/** What one demo task did. */
final case class TaskReport(
    partition: Int,
    spilled: Boolean,
    files: Int,
    logicalBytes: Long, // written by the task
    bytes: Long, // on disk: compressed, framed
    planDirs: Seq[String])

/** What one sort task did. */
final case class SortReport(
    partition: Int,
    records: Long,
    outOfOrder: Long,
    runs: Long,
    bytesSpilled: Long,
    logicalBytesSpilled: Long,
    taskDiskBytesSpilled: Long,
    planDirsWhileSorting: Seq[String])

/**
 * Runs two Spark local-mode jobs:
 *
 *  1. the lifecycle: every task asks for its spill plan and half of them spill a few MiB through
 *     it; prints plans, plans that spilled, dirs created, bytes spilled (logical, and on disk after
 *     compression and framing) and the dirs left (0);
 *  2. the native sort: tasks sort ~1.5M records of 16-byte random keys each with a memory budget
 *     far below their size, so each spills several runs; prints per task the records, runs and
 *     bytes spilled (logical and on disk), the plan dir it created and the dirs left after it (0).
 *
 * First it prints the spill format: the codec (`spark.spillway.compression.codec`, lz4 by default)
 * and whether spills are encrypted (`spark.io.encryption.enabled`; pass
 * `-Dspark.io.encryption.enabled=true` to see it on).
 *
 * One local dir, so that a plan that spills creates exactly one dir. Exits with status 1 if
 * anything is left behind or a sort is out of order.
 *
 * Usage: make demo (or `spark-submit --class spillway.demo.Demo spillway.jar` in local mode).
 */
object Demo {
  private val Tasks = 8
  private val FilesPerSpillingTask = 2
  private val BytesPerFile = 2L * 1024 * 1024

  private val SortTasks = 4
  private val RecordsPerSortTask = 1500000
  private val SortMemoryBudget = "16m"

  def main(args: Array[String]): Unit = {
    val base = Files.createTempDirectory("spillway-demo-")
    val roots = Seq("local").map(n => Files.createDirectory(base.resolve(n)))
    val spark = SparkSession
      .builder()
      .appName("spillway-demo")
      .master(sys.props.getOrElse("spark.master", "local[2]"))
      .config("spark.local.dir", roots.mkString(","))
      .config("spark.ui.enabled", "false")
      .getOrCreate()
    val ok =
      try run(spark) & runSort(spark)
      finally {
        spark.stop()
        deleteRecursively(base)
      }
    if (!ok) sys.exit(1)
  }

  private def run(spark: SparkSession): Boolean = {
    import spark.implicits._
    // A session value: it reaches the tasks as a local property of the Dataset action below.
    spark.conf.set("spark.spillway.maxTempDirectorySize", "64m")
    val localDirs = SparkEnv.get.blockManager.getLocalDiskDirs.toSeq
    println(s"Spillway demo: library ${NativeLoader.platform()}, ${sys.props.getOrElse("spillway.library.path", "from the jar")}")
    println(s"Spark local dirs: ${localDirs.mkString(", ")}")
    val format = SpillwayConf.spillFormat(spark.sparkContext.getConf)
    val codec = if (format.codec == "zstd") s"zstd level ${format.zstdLevel}" else format.codec
    val encryption =
      if (format.encrypt) s"on (AES-${format.keyBits}-GCM, a key made in the executor's memory only)"
      else "off (spark.io.encryption.enabled=false)"
    println(s"spill format: codec $codec, encryption $encryption")
    println(s"$Tasks tasks; even ones spill $FilesPerSpillingTask files of ${mib(BytesPerFile)}, odd ones never spill")
    println()

    val before = NativeStats.read()
    val bytesPerFile = BytesPerFile
    val filesPerTask = FilesPerSpillingTask
    val reports = spark
      .range(0, Tasks, 1, Tasks)
      .mapPartitions { _ =>
        val partition = org.apache.spark.TaskContext.getPartitionId()
        Iterator(runTask(partition, spills = partition % 2 == 0, filesPerTask, bytesPerFile))
      }
      .collect()
      .sortBy(_.partition)
    val delta = NativeStats.read() - before
    val (logical, onDisk) = (delta("logicalBytesSpilled"), delta("bytesSpilled"))
    val left = spillDirsUnder(localDirs)

    reports.foreach { r =>
      if (r.spilled) {
        println(f"task ${r.partition}%d: spilled ${mib(r.logicalBytes)} (${r.bytes}%d bytes on disk) in ${r.files} files into ${r.planDirs.mkString(", ")}")
      } else {
        println(f"task ${r.partition}%d: plan created, never spilled: no directory, ${r.bytes}%d bytes on disk")
      }
    }
    println()
    println(f"plans created:      ${delta("plansCreated")}%d")
    println(f"plans that spilled: ${delta("plansSpilled")}%d")
    println(f"dirs created:       ${delta("dirsCreated")}%d")
    println(f"files created:      ${delta("spillFiles")}%d")
    println(f"bytes spilled:      $logical%d logical (${mib(logical)}), $onDisk%d on disk (${mib(onDisk)}, ${ratio(onDisk, logical)})")
    println(f"live plans after:   ${delta("livePlans")}%+d")
    println(f"dirs left:          ${left.size}%d${if (left.isEmpty) "" else left.mkString(" (", ", ", ")")}")

    val expected = (Tasks + 1) / 2 * FilesPerSpillingTask * BytesPerFile
    val ok = left.isEmpty && delta("livePlans") == 0 && TaskSpill.activePlans == 0 &&
      logical == expected && onDisk > 0
    if (!ok) println(s"FAILED: the lifecycle left something behind, or did not spill the $expected bytes it wrote")
    ok
  }

  private def runSort(spark: SparkSession): Boolean = {
    import NativeSort._
    val sc = spark.sparkContext
    val localDirs = SparkEnv.get.blockManager.getLocalDiskDirs.toSeq
    println()
    println(s"Native sort: $SortTasks tasks x $RecordsPerSortTask records (16-byte random key, 8-byte value), " +
      s"memory budget $SortMemoryBudget per sort")
    // One task at a time (one job per partition), so that what a task sees in the local dir while
    // it sorts is its own plan dir only.
    val records = RecordsPerSortTask
    val sorted = sc
      .parallelize(0 until SortTasks, SortTasks)
      .mapPartitionsWithIndex((p, _) => randomRecords(p, records))
      .nativeSortWithinPartitions()
    val started = System.nanoTime()
    val before = NativeStats.read()
    val reports = (0 until SortTasks).map { p =>
      sc.setLocalProperty(SpillwayConf.SortMemoryBudgetKey, SortMemoryBudget) // RDD jobs see local properties, not session confs
      val report =
        try sc.runJob(sorted, (it: Iterator[(Array[Byte], Array[Byte])]) => inspectSorted(it, localDirs), Seq(p)).head
        finally sc.setLocalProperty(SpillwayConf.SortMemoryBudgetKey, null)
      val left = spillDirsUnder(localDirs)
      println(f"sort task ${report.partition}%d: ${report.records}%d records${if (report.outOfOrder == 0) " in order" else s", ${report.outOfOrder} OUT OF ORDER"}, " +
        f"${report.runs}%d runs spilled, ${mib(report.logicalBytesSpilled)} written, ${mib(report.bytesSpilled)} on disk " +
        f"(task diskBytesSpilled ${mib(report.taskDiskBytesSpilled)}), " +
        f"plan dir ${report.planDirsWhileSorting.mkString(", ")}; dirs left after: ${left.size}%d")
      (report, left)
    }
    val seconds = (System.nanoTime() - started) / 1e9
    val total = reports.map(_._1.records).sum
    val delta = NativeStats.read() - before
    val (logical, onDisk) = (delta("logicalBytesSpilled"), delta("bytesSpilled"))
    println(f"sorted $total%d records in $seconds%.1f s (${total / seconds / 1e6}%.2f M records/s, one task at a time, generation included)")
    println(f"sort runs spilled:  $logical%d logical (${mib(logical)}), $onDisk%d on disk (${mib(onDisk)}, ${ratio(onDisk, logical)})")
    val ok = reports.forall { case (r, left) =>
      r.records == RecordsPerSortTask && r.outOfOrder == 0 && r.runs > 1 && r.planDirsWhileSorting.size == 1 && left.isEmpty
    } && TaskSpill.activePlans == 0
    if (!ok) println("FAILED: a sort was wrong, did not spill into one plan dir, or left something behind")
    ok
  }

  /** `n` records of a 16-byte random key and an 8-byte value (the record's index). */
  private def randomRecords(partition: Int, n: Int): Iterator[(Array[Byte], Array[Byte])] = {
    val random = new java.util.Random(partition)
    Iterator.tabulate(n) { i =>
      val key = new Array[Byte](16)
      random.nextBytes(key)
      (key, java.nio.ByteBuffer.allocate(8).putLong(i.toLong).array())
    }
  }

  /** Runs inside a sort task: reads the sorted records and checks their order. */
  private def inspectSorted(sorted: Iterator[(Array[Byte], Array[Byte])], localDirs: Seq[String]): SortReport = {
    val dirs = if (sorted.hasNext) spillDirsUnder(localDirs) else Seq.empty // the input is in, the runs on disk
    var n = 0L
    var outOfOrder = 0L
    var previous: Array[Byte] = null
    sorted.foreach { case (key, _) =>
      if (previous != null && java.util.Arrays.compareUnsigned(previous, key) > 0) outOfOrder += 1
      previous = key
      n += 1
    }
    val stats = sorted match {
      case s: NativeSortIterator => s.stats
      case _ => None
    }
    val task = org.apache.spark.TaskContext.get()
    SortReport(
      task.partitionId(),
      n,
      outOfOrder,
      stats.fold(0L)(_.runs),
      stats.fold(0L)(_.spilledBytes),
      stats.fold(0L)(_.spilledLogicalBytes),
      task.taskMetrics().diskBytesSpilled,
      dirs)
  }

  /** Runs inside a task: asks for the task's plan and spills through it if `spills`. */
  def runTask(partition: Int, spills: Boolean, files: Int, bytesPerFile: Long): TaskReport = {
    val plan = TaskSpill.plan()
    val written = if (spills) {
      (0 until files).map { _ =>
        val file = plan.createSpillFile()
        Using.resource(file.outputStream())(out => DemoFiles.writePattern(out, bytesPerFile, partition))
        file
      }
    } else Seq.empty
    TaskReport(
      partition,
      spilled = written.nonEmpty,
      files = written.size,
      logicalBytes = written.map(_.bytesWritten).sum,
      bytes = plan.usedDiskSpace,
      planDirs = written.map(f => new File(f.path).getParent).distinct)
  }

  /** Plan dirs directly inside the local dirs. */
  private def spillDirsUnder(localDirs: Seq[String]): Seq[String] = DemoFiles.spillwayEntries(localDirs, ownerLocks = false)

  private def mib(bytes: Long): String = f"${bytes / (1024.0 * 1024)}%.1f MiB"

  private def ratio(onDisk: Long, logical: Long): String =
    if (logical == 0) "nothing written" else f"${onDisk.toDouble / logical}%.3f of the logical bytes"

  private def deleteRecursively(path: Path): Unit =
    if (Files.exists(path)) {
      Using.resource(Files.walk(path)) { paths =>
        paths.sorted(Comparator.reverseOrder[Path]()).forEach(p => Files.deleteIfExists(p))
      }
    }
}
