package spillway

import java.nio.file.Files

import org.apache.spark.SparkException
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanHelper
import org.apache.spark.sql.functions.col
import org.scalatest.BeforeAndAfterAll
import org.scalatest.concurrent.Eventually._
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.funsuite.AnyFunSuite

import spillway.sql.SpillwaySortExec

/**
 * The remote tier in Spark, against a real S3-compatible server (s3proxy on loopback, started by
 * project/s3-server.sh around the JVM suites): a native SQL sort whose spill is larger than its
 * only local dir, a small real tmpfs, fails there as it always did without the tier, and succeeds
 * through the tier with Spark's result, leaving nothing in the bucket once the driver removed its
 * application's prefix; the driver sweeps what a killed application left; a store that refuses the
 * credentials fails the executor at start, naming the key and never the secret.
 */
class RemoteSpillSuite extends AnyFunSuite with BeforeAndAfterAll with AdaptiveSparkPlanHelper {
  private val ApplicationMarker = "alive" // spill.ApplicationMarker
  private def env(name: String): String =
    sys.env.getOrElse(name, fail(s"$name is not set: run the JVM suites through project/s3-server.sh (make test-jvm)"))

  private lazy val endpoint = env("SPILLWAY_S3_ENDPOINT")
  private lazy val bucket = env("SPILLWAY_S3_BUCKET")
  private lazy val prefix = s"spark-${java.util.UUID.randomUUID()}"
  private lazy val bucketFiles = java.nio.file.Paths.get(env("SPILLWAY_S3_DATA"))

  /** The files under this suite's prefix in the server's backend (objects, and parts of uploads). */
  private def leftInBucket(): Seq[String] = {
    val files = scala.collection.mutable.ArrayBuffer[String]()
    val walk = Files.walk(bucketFiles)
    // forEach, not map: Scala 2.12 cannot infer Stream.map's result type from a lambda.
    try walk.forEach(p => if (Files.isRegularFile(p)) files += bucketFiles.relativize(p).toString)
    finally walk.close()
    files.toSeq.filter(_.contains(prefix))
  }

  private def remoteConf(secret: String): Map[String, String] = Map(
    "spark.spillway.remote.uri" -> s"s3a://$bucket/$prefix",
    "spark.hadoop.fs.s3a.endpoint" -> endpoint,
    "spark.hadoop.fs.s3a.endpoint.region" -> "us-east-1",
    "spark.hadoop.fs.s3a.path.style.access" -> "true",
    "spark.hadoop.fs.s3a.access.key" -> env("SPILLWAY_S3_ACCESS_KEY"),
    "spark.hadoop.fs.s3a.secret.key" -> secret)

  /** A local-mode session whose only local dir is `localDir`, with the plugin and the extension. */
  private def withSpark[T](localDir: String, conf: Map[String, String])(body: SparkSession => T): T = {
    val spark = (conf ++ Map(
      "spark.plugins" -> classOf[SpillwayPlugin].getName,
      "spark.sql.extensions" -> "spillway.SpillwayExtensions",
      "spark.local.dir" -> localDir,
      "spark.ui.enabled" -> "false",
      SpillwayConf.SortMemoryBudgetKey -> "1m"))
      .foldLeft(SparkSession.builder().master("local[1]").appName(getClass.getSimpleName)) { case (b, (k, v)) => b.config(k, v) }
      .getOrCreate()
    try body(spark)
    finally spark.stop()
  }

  // 800k rows (about 40 MiB in runs) in one partition, sorted within it: no shuffle, so the only writes to the
  // local dir are the sort's runs, about 11 MiB once compressed (more than twice the tmpfs).
  private def sorted(spark: SparkSession): DataFrame =
    spark.range(0, 800000, 1, 1)
      .selectExpr("xxhash64(id) AS k", "sha2(CAST(id AS STRING), 256) AS v", "id")
      .sortWithinPartitions(col("k"), col("id"))
      .select("k", "id")

  /**
   * Spark's result, as checked: the rows' count, a sum of their ids, and whether k is in order.
   * Run by df's own executed plan (`df.rdd` would plan the query again), whose metrics then hold.
   */
  private def digest(df: DataFrame): (Long, Long, Boolean) =
    df.queryExecution.toRdd.mapPartitions { rows =>
      var (n, sum, ordered, last) = (0L, 0L, true, Long.MinValue)
      rows.foreach { r =>
        val k = r.getLong(0)
        ordered &&= k >= last
        last = k
        n += 1
        sum += r.getLong(1)
      }
      Iterator((n, sum, ordered))
    }.collect().head

  private def withTinyLocalDir[T](body: String => T): T = RealMounts.withTmpfs("size=4m")(dir => body(dir.toString))

  override def afterAll(): Unit =
    try NativeSpill.configureRemote(Array("", "", "", "", "", ""), false, false, 0) // no tier for later suites
    finally super.afterAll()

  test("without the tier, a sort whose runs outgrow the only local dir fails as it always did") {
    withTinyLocalDir { dir =>
      withSpark(dir, Map.empty) { spark =>
        val e = intercept[SparkException](digest(sorted(spark)))
        assert(e.getMessage.contains("no local dir could take a spill file"), e.getMessage)
      }
    }
  }

  test("a store that refuses the credentials fails the executor at start, naming the key and not the secret") {
    val secret = "wrong-" + java.util.UUID.randomUUID()
    withTinyLocalDir { dir =>
      val e = intercept[Exception](withSpark(dir, remoteConf(secret))(_ => ()))
      val messages = Iterator.iterate[Throwable](e)(_.getCause).takeWhile(_ != null).map(_.getMessage).mkString(" / ")
      assert(messages.contains("spark.hadoop.fs.s3a.secret.key"), messages)
      assert(messages.contains("refused the credentials"), messages)
      assert(!messages.contains(secret), "the secret is in the message")
    }
    assert(leftInBucket().isEmpty)
  }

  test("with the tier, the same sort succeeds through the store with Spark's result, and leaves nothing") {
    withTinyLocalDir { dir =>
      withSpark(dir, remoteConf(env("SPILLWAY_S3_SECRET_KEY"))) { spark =>
        spark.conf.set(SpillwayConf.SqlSortEnabledKey, "false")
        val expected = digest(sorted(spark)) // Spark's own sort, in memory
        spark.conf.set(SpillwayConf.SqlSortEnabledKey, "true")
        val before = NativeStats.read()
        val df = sorted(spark)
        val got = digest(df)
        val delta = NativeStats.read() - before
        assert(got == expected)
        assert(got._1 == 800000 && got._3)
        assert(delta("remoteSpillFiles") > 0, delta)
        assert(delta("bytesSpilled") > (8L << 20), s"more spilled than the 4 MiB tmpfs holds: $delta")
        assert(delta("remoteBytesSpilled") > 0, delta)
        assert(delta("remoteBytesRead") >= delta("remoteBytesSpilled"), s"the merge read every remote run: $delta")
        // The sort's own SQL metrics say what went to the store: each remote run is a spill file of
        // the tier, and its bytes are among the remote bytes written.
        val sorts = collect(df.queryExecution.executedPlan) { case s: SpillwaySortExec => s }
        assert(sorts.size == 1)
        val m = sorts.head.metrics
        assert(m("remoteRuns").value > 0 && m("remoteRuns").value <= delta("remoteSpillFiles"), s"${m("remoteRuns").value} / $delta")
        assert(m("remoteSpillSize").value > 0 && m("remoteSpillSize").value <= delta("remoteBytesSpilled"))
        assert(NativeStats.read()("livePlans") == 0)
        assert(leftInBucket().forall(_.endsWith("/" + ApplicationMarker)), s"the task's plans removed their objects: ${leftInBucket()}")
        assert(TestFiles.spillDirsUnder(Seq(dir)).isEmpty)
      }
      assert(leftInBucket().isEmpty, "the driver removed its application's prefix at its end")
    }
  }

  test("the driver sweeps what a killed application left at its start, and spares a live one") {
    // Planted in the server's backend, whose files' times are the objects' times.
    def plant(key: String, ageMs: Long): Unit = {
      val f = bucketFiles.resolve(s"$prefix/$key")
      Files.createDirectories(f.getParent)
      Files.write(f, "x".getBytes)
      Files.setLastModifiedTime(f, java.nio.file.attribute.FileTime.fromMillis(System.currentTimeMillis() - ageMs))
    }
    val hour = java.util.concurrent.TimeUnit.HOURS.toMillis(1)
    plant("spillway-app-killed/spillway-1/spillway-2/spill-3", 2 * hour)
    plant("spillway-app-killed/alive", 2 * hour)
    plant("spillway-app-running/alive", 0)
    plant("not-ours/data", 2 * hour)
    try withTinyLocalDir { dir =>
      withSpark(dir, remoteConf(env("SPILLWAY_S3_SECRET_KEY")) + (SpillwayConf.RemoteOrphanAge.key -> "1h")) { _ =>
        eventually(timeout(Span(60, Seconds)), interval(Span(200, Millis))) {
          assert(!leftInBucket().exists(_.contains("spillway-app-killed")), leftInBucket())
        }
        val left = leftInBucket()
        assert(left.exists(_.contains("spillway-app-running")), left)
        assert(left.exists(_.contains("not-ours")), left)
        assert(left.count(_.endsWith("/" + ApplicationMarker)) == 2, s"this application's marker and the running one's: $left")
      }
      assert(leftInBucket().map(k => k.substring(k.indexOf(prefix) + prefix.length + 1)).sorted ==
        Seq("not-ours/data", "spillway-app-running/alive"))
    } finally {
      Seq("spillway-app-killed", "spillway-app-running", "not-ours").foreach(d => TestFiles.deleteRecursively(bucketFiles.resolve(s"$prefix/$d")))
    }
  }
}
