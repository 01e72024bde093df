package spillway

import java.nio.file.{Files, Path}

import scala.concurrent.{Await, ExecutionContext, Future}
import scala.concurrent.duration._

import org.apache.spark.{SparkContext, SparkEnv, SparkException}
import org.apache.spark.sql.SparkSession
import org.scalatest.{BeforeAndAfterAll, Suite}
import org.scalatest.concurrent.Eventually._

/**
 * One Spark session in local mode per suite, over fresh local dirs under a temp dir that is
 * deleted afterwards. Suites assert before `spark.stop()`, which deletes the blockmgr dirs.
 */
trait LocalSpark extends BeforeAndAfterAll { self: Suite =>
  /** The Spark master; local[2] runs two tasks at once. */
  protected def master: String = "local[2]"

  /** Names of the dirs given as spark.local.dir, created under [[base]]. */
  protected def localDirNames: Seq[String] = Seq("local")

  /** Spark conf values for the session, on top of the local dirs. */
  protected def sparkConf: Map[String, String] = Map.empty

  protected var base: Path = _
  protected var spark: SparkSession = _
  protected var localDirs: Seq[String] = _ // the blockmgr-* dirs, read back from Spark
  protected var roots: Seq[String] = _ // their parents: where anything of ours could appear

  protected def sc: SparkContext = spark.sparkContext

  override def beforeAll(): Unit = {
    super.beforeAll()
    base = Files.createTempDirectory(s"spillway-${getClass.getSimpleName}-")
    val configured = localDirNames.map(n => Files.createDirectory(base.resolve(n)).toString)
    spark = sparkConf
      .foldLeft(SparkSession.builder().master(master).appName(getClass.getSimpleName)) {
        case (b, (k, v)) => b.config(k, v)
      }
      .config("spark.local.dir", configured.mkString(","))
      .config("spark.ui.enabled", "false")
      .getOrCreate()
    localDirs = SparkEnv.get.blockManager.getLocalDiskDirs.toSeq
    roots = localDirs.map(TestFiles.parentOf).distinct
  }

  override def afterAll(): Unit =
    try if (spark != null) spark.stop()
    finally {
      if (base != null) TestFiles.deleteRecursively(base)
      super.afterAll()
    }

  /** Runs `body` with job-level local properties set (what SQL actions do with session confs). */
  protected def withLocalProperties[T](props: (String, String)*)(body: => T): T = {
    props.foreach { case (k, v) => sc.setLocalProperty(k, v) }
    try body
    finally props.foreach { case (k, _) => sc.setLocalProperty(k, null) }
  }

  protected def withLocalProperty[T](key: String, value: String)(body: => T): T =
    withLocalProperties(key -> value)(body)

  /**
   * Runs `job`, a one-task job whose task spills and then waits to be interrupted
   * ([[LocalSpark.awaitCancellation]]), in job group `group`; cancels the group once the task's
   * plan dir is under the roots, and returns when the job has failed. The job fails on the driver
   * before the cancelled task has run its completion listeners: callers wait for those. The bounds
   * only keep a broken test from hanging.
   */
  protected def cancelOnceSpilled(group: String)(job: => Unit): Unit = {
    val roots = this.roots
    val running = Future {
      sc.setJobGroup(group, "cancelled by the test", interruptOnCancel = true)
      job
    }(ExecutionContext.global)
    eventually(timeout(2.minutes), interval(20.millis))(assert(TestFiles.spillDirsUnder(roots).size == 1, "the task to spill"))
    sc.cancelJobGroup(group)
    intercept[SparkException](Await.result(running, 2.minutes))
  }
}

object LocalSpark {
  /** In a task: waits to be cancelled (interrupted); the bound only keeps a broken test from hanging. */
  def awaitCancellation(): Unit = {
    val deadline = System.nanoTime() + 2.minutes.toNanos
    while (System.nanoTime() < deadline) Thread.sleep(20)
  }
}
