package spillway.demo

import java.io.File
import java.nio.file.{Files, Path}
import java.util.Comparator

import scala.util.Using

import org.apache.spark.SparkEnv
import org.apache.spark.sql.SparkSession

import spillway.{NativeLoader, SpillwayMetrics, TaskSpill}

/** What one demo task did. */
final case class TaskReport(
    partition: Int,
    spilled: Boolean,
    files: Int,
    bytes: Long,
    planDirs: Seq[String])

/**
 * Runs a Spark local-mode job in which every task asks for its spill plan and half of them spill a
 * few MiB through it, then prints the lifecycle: plans, plans that spilled, dirs created, bytes
 * spilled, and the plan dirs left after the job (0). Exits with status 1 if anything is left.
 *
 * Usage: make demo (or `spark-submit --class spillway.demo.Demo spillway.jar` in local mode).
 */
object Demo {
  private val Tasks = 8
  private val FilesPerSpillingTask = 2
  private val BytesPerFile = 2L * 1024 * 1024

  def main(args: Array[String]): Unit = {
    val base = Files.createTempDirectory("spillway-demo-")
    val roots = Seq("local-a", "local-b").map(n => Files.createDirectory(base.resolve(n)))
    val spark = SparkSession
      .builder()
      .appName("spillway-demo")
      .master(sys.props.getOrElse("spark.master", "local[2]"))
      .config("spark.local.dir", roots.mkString(","))
      .config("spark.ui.enabled", "false")
      .getOrCreate()
    val ok =
      try run(spark)
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
    println(s"$Tasks tasks; even ones spill $FilesPerSpillingTask files of ${mib(BytesPerFile)}, odd ones never spill")
    println()

    val before = SpillwayMetrics.snapshot()
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
    val delta = SpillwayMetrics.snapshot() - before
    val left = spillDirsUnder(localDirs)

    reports.foreach { r =>
      if (r.spilled) {
        println(f"task ${r.partition}%d: spilled ${mib(r.bytes)} in ${r.files} files into ${r.planDirs.mkString(", ")}")
      } else {
        println(f"task ${r.partition}%d: plan created, never spilled: no directory, ${r.bytes}%d bytes on disk")
      }
    }
    println()
    println(f"plans created:      ${delta.plansCreated}%d")
    println(f"plans that spilled: ${delta.plansSpilled}%d")
    println(f"dirs created:       ${delta.dirsCreated}%d")
    println(f"files created:      ${delta.filesCreated}%d")
    println(f"bytes spilled:      ${delta.bytesWritten}%d (${mib(delta.bytesWritten)})")
    println(f"plans released:     ${delta.plansReleased}%d")
    println(f"dirs left:          ${left.size}%d${if (left.isEmpty) "" else left.mkString(" (", ", ", ")")}")

    val ok = left.isEmpty && delta.plansReleased == delta.plansCreated && TaskSpill.activePlans == 0
    if (!ok) println("FAILED: the lifecycle left something behind")
    ok
  }

  /** Runs inside a task: asks for the task's plan and spills through it if `spills`. */
  def runTask(partition: Int, spills: Boolean, files: Int, bytesPerFile: Long): TaskReport = {
    val plan = TaskSpill.plan()
    val chunk = Array.tabulate[Byte](64 * 1024)(i => (i * 31 + partition).toByte)
    val written = if (spills) {
      (0 until files).map { _ =>
        val file = plan.createTmpFile()
        Using.resource(file.outputStream()) { out =>
          var left = bytesPerFile
          while (left > 0) {
            val n = math.min(left, chunk.length.toLong).toInt
            out.write(chunk, 0, n)
            left -= n
          }
        }
        file
      }
    } else Seq.empty
    TaskReport(
      partition,
      spilled = written.nonEmpty,
      files = written.size,
      bytes = plan.usedDiskSpace,
      planDirs = written.map(f => new File(f.path).getParent).distinct)
  }

  /** `spillway-*` entries directly inside the local dirs, where plans create their dirs. */
  def spillDirsUnder(localDirs: Seq[String]): Seq[String] =
    localDirs.flatMap { dir =>
      Option(new File(dir).listFiles()).toSeq.flatten
        .filter(_.getName.startsWith("spillway-"))
        .map(_.getPath)
    }

  private def mib(bytes: Long): String = f"${bytes / (1024.0 * 1024)}%.1f MiB"

  private def deleteRecursively(path: Path): Unit =
    if (Files.exists(path)) {
      Using.resource(Files.walk(path)) { paths =>
        paths.sorted(Comparator.reverseOrder[Path]()).forEach(p => Files.deleteIfExists(p))
      }
    }
}
