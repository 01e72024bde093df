package spillway

import java.nio.file.{Files, Path}

import org.apache.spark.{SparkContext, SparkEnv}
import org.apache.spark.sql.SparkSession
import org.scalatest.{BeforeAndAfterAll, Suite}

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
}
