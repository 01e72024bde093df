package spillway.demo

import java.io.File
import java.nio.ByteBuffer
import java.nio.file.{Files, Path, Paths}

import scala.util.control.NonFatal

import org.apache.spark.SparkEnv
import org.apache.spark.scheduler.{SparkListener, SparkListenerEvent}
import org.apache.spark.spillway.demo.ListenerDrain
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanHelper

import spillway.{NativeStats, OrphanSweep, SpillwayConf, SpillwayExecutorUpdate}
import spillway.sql.SpillwaySortExec

/** One executor as [[ClusterOverflow]] sees it, from a task: its local dirs' filesystem and the library's counters. */
final case class OverflowExecutor(
    executorId: String,
    pid: Long,
    localDirs: Seq[String], // the block manager's dirs
    localDirBytes: Long, // the size of their filesystems, added up
    localDirUsedBytes: Long, // used in those filesystems now
    planDirs: Seq[String], // plan dirs and owner locks in the local dirs
    counters: Map[String, Long])

/** One partition of the overflow sort's input or result: rows, an order-free digest of them, whether in (k, id) order. */
final case class OverflowPartition(index: Int, rows: Long, digest: Long, ordered: Boolean)

/**
 * A native SQL sort larger than its executors' local dirs, on a real cluster (project/cluster-test.sh
 * runs it last, on workers whose only local dir is a small tmpfs, inside project/s3-server.sh):
 * with the remote tier on (`spark.spillway.remote.uri` on the store of s3-server.sh), the sort's
 * runs that no local dir can take go to the store, and the job completes with Spark's result.
 *
 * The rows are made inside the stage (`spark.range` and expressions, sorted within partitions: no
 * shuffle, so nothing of Spark's own outgrows the tmpfs) and their sort key, (k, id), is unique: the
 * sorted result is the only one with the input's rows in that order. Checked, per partition: the
 * rows' count and an order-free digest of them (k, id and v) against the input's, read by a job that
 * does not sort, and strictly increasing keys. Each executor's library counters over the sort must
 * show spill files in the store (`remoteSpillFiles`, `remoteBytesSpilled`, read back in full:
 * `remoteBytesRead`) and more bytes spilled than its local dirs' filesystem holds, then no byte in
 * use and no plan dir; its last [[SpillwayExecutorUpdate]] must carry the same remote figures (what
 * the Spillway tab shows); the sort's SQL metrics must count runs in the store (`remote runs`,
 * `remote spill size`). After the application ends (the driver removes its prefix), the bucket must
 * hold no file at all in the server's backend: no object, no part of an upload.
 *
 * Reads the store from the environment project/s3-server.sh gives: SPILLWAY_S3_ENDPOINT,
 * SPILLWAY_S3_ACCESS_KEY, SPILLWAY_S3_SECRET_KEY, SPILLWAY_S3_BUCKET, SPILLWAY_S3_DATA. Prints the
 * figures, then `cluster-overflow-result=passed` (exit status 0) or `cluster-overflow-result=failed
 * N check(s)` (exit status 1). Needs one core per executor and exactly `executors` executors.
 *
 * Usage: spark-submit --class spillway.demo.ClusterOverflow --jars spillway.jar spillway-demo.jar [executors (2)]
 */
object ClusterOverflow extends AdaptiveSparkPlanHelper {
  val ResultKey = "cluster-overflow-result"

  /**
   * Rows per partition, one partition per executor: k, id and a 64-character v, some 80 bytes each
   * in a run once compressed, 24 MB of runs per executor: several times a tmpfs of a few MiB.
   */
  val RowsPerPartition = 300000L
  /** The sort's memory: a run every 8 MiB of records, six runs per executor, merged in one pass. */
  val SortBudget = "8m"
  /** Where the application's remote files go in the bucket. */
  val Prefix = "cluster-overflow"
  private val UpdateWaitMillis = 30L * 1000

  private def env(name: String): String =
    sys.env.getOrElse(name, throw new IllegalStateException(s"$name is not set: run inside project/s3-server.sh"))

  def main(args: Array[String]): Unit = {
    val executors = args.headOption.map(_.toInt).getOrElse(2)
    val bucketFiles = Paths.get(env("SPILLWAY_S3_DATA"))
    val spark = SparkSession.builder().appName("spillway-cluster-overflow")
      .config(SpillwayConf.RemoteUri.key, s"s3a://${env("SPILLWAY_S3_BUCKET")}/$Prefix")
      .config("spark.hadoop.fs.s3a.endpoint", env("SPILLWAY_S3_ENDPOINT"))
      .config("spark.hadoop.fs.s3a.endpoint.region", "us-east-1")
      .config("spark.hadoop.fs.s3a.path.style.access", "true")
      .config("spark.hadoop.fs.s3a.access.key", env("SPILLWAY_S3_ACCESS_KEY"))
      .config("spark.hadoop.fs.s3a.secret.key", env("SPILLWAY_S3_SECRET_KEY"))
      .config(SpillwayConf.SortMemoryBudgetKey, SortBudget) // read by the executors' tasks from the SparkConf
      .config(SpillwayConf.UiUpdateInterval.key, "500ms")
      .getOrCreate()
    val failures =
      try run(spark, executors)
      catch { case NonFatal(e) => e.printStackTrace(); Seq(s"the application broke: $e") }
      finally spark.stop()
    // The driver removed its application's prefix as it stopped: nothing of it may be left.
    val left = filesUnder(bucketFiles)
    println(s"overflow: after the application, the bucket holds ${left.size} files in the server's backend (objects and parts of uploads)" +
      left.take(10).map("\n  " + _).mkString)
    val all = failures ++ (if (left.nonEmpty) Seq(s"${left.size} files left in the bucket: ${left.take(10).mkString(", ")}") else Nil)
    all.foreach(f => println(s"FAILED: $f"))
    println(s"$ResultKey=${if (all.isEmpty) "passed" else s"failed ${all.size} check(s)"}")
    if (all.nonEmpty) sys.exit(1)
  }

  /** The rows: k a hash of id, v a 64-character string of id; (k, id) is unique. */
  private def input(spark: SparkSession, partitions: Int): DataFrame =
    spark.range(0, RowsPerPartition * partitions, 1, partitions)
      .selectExpr("xxhash64(id) AS k", "id", "sha2(CAST(id AS STRING), 256) AS v")

  private def run(spark: SparkSession, n: Int): Seq[String] = {
    val failures = Seq.newBuilder[String]
    def check(ok: Boolean, what: => String): Unit = if (!ok) failures += what
    val sc = spark.sparkContext
    ClusterExecutors.await(sc, n)

    // The latest update of each executor, as the driver's plugin posts them (the Spillway tab's source).
    val updates = scala.collection.concurrent.TrieMap.empty[String, SpillwayExecutorUpdate]
    val listener = new SparkListener {
      override def onOtherEvent(event: SparkListenerEvent): Unit = event match {
        case u: SpillwayExecutorUpdate => updates(u.executorId) = u
        case _ =>
      }
    }
    sc.addSparkListener(listener)
    try {
      val before = onEachExecutor(spark, n)
      before.foreach { e =>
        println(s"overflow: executor ${e.executorId} (pid ${e.pid}): local dirs ${e.localDirs.mkString(", ")}: " +
          s"${mib(e.localDirBytes)} MiB in all, ${mib(e.localDirUsedBytes)} MiB used before the sort")
      }
      val t = System.nanoTime()
      val expected = digest(input(spark, n), sorted = false)
      println(f"overflow: the input's digest (a job that does not sort) in ${(System.nanoTime() - t) / 1e9}%.1f s")

      val df = input(spark, n).sortWithinPartitions("k", "id")
      val sorts = collect(df.queryExecution.executedPlan) { case s: SpillwaySortExec => s }
      check(sorts.size == 1, s"the sort within partitions does not run as the native sort (spark.sql.extensions unset?):\n${df.queryExecution.executedPlan}")
      val t0 = System.nanoTime()
      val got = digest(df, sorted = true)
      val seconds = (System.nanoTime() - t0) / 1e9
      val after = onEachExecutor(spark, n)

      def rows(p: Seq[OverflowPartition]) = p.map(p => (p.index, p.rows, p.digest))
      println(f"overflow: ${got.map(_.rows).sum} rows in ${got.size} partitions, made and sorted in $seconds%.1f s, in order: ${got.forall(_.ordered)}, " +
        s"the input's rows (count and digest per partition): ${rows(got) == rows(expected)}")
      check(got.map(_.rows).sum == RowsPerPartition * n, s"the sort returned ${got.map(_.rows).sum} rows, not ${RowsPerPartition * n}")
      check(got.forall(_.ordered), s"the sort's result is out of order: $got")
      check(rows(got) == rows(expected), s"the sort's result is not its input's rows: $got against $expected")

      // Each executor's counters over the sort.
      val was = before.map(e => e.executorId -> e.counters).toMap
      var remoteFiles = 0L
      var remoteBytes = 0L
      after.foreach { e =>
        def delta(name: String) = e.counters.getOrElse(name, 0L) - was.get(e.executorId).flatMap(_.get(name)).getOrElse(0L)
        remoteFiles += delta("remoteSpillFiles")
        remoteBytes += delta("remoteBytesSpilled")
        println(s"overflow: executor ${e.executorId}: spillFiles +${delta("spillFiles")} (remoteSpillFiles +${delta("remoteSpillFiles")}), " +
          s"bytesSpilled +${delta("bytesSpilled")} (remoteBytesSpilled +${delta("remoteBytesSpilled")}), remoteBytesRead +${delta("remoteBytesRead")}, " +
          s"remoteRetries +${delta("remoteRetries")}, filesystemErrors +${delta("filesystemErrors")}; then bytesInUse ${e.counters.getOrElse("bytesInUse", -1L)}, " +
          s"livePlans ${e.counters.getOrElse("livePlans", -1L)}, plan dirs ${e.planDirs.size}, ${mib(e.localDirUsedBytes)} MiB used in its local dirs")
        check(was.contains(e.executorId), s"executor ${e.executorId} was not there before the sort (${was.keys.mkString(", ")})")
        check(delta("remoteSpillFiles") > 0 && delta("remoteBytesSpilled") > 0, s"executor ${e.executorId}: no spill file went to the store")
        check(delta("remoteBytesRead") >= delta("remoteBytesSpilled"), s"executor ${e.executorId}: the merge did not read every remote byte back")
        check(delta("bytesSpilled") > e.localDirBytes,
          s"executor ${e.executorId}: spilled ${delta("bytesSpilled")} bytes, no more than its local dirs' ${e.localDirBytes}: they were not too small")
        check(e.counters.get("bytesInUse").contains(0L) && e.counters.get("livePlans").contains(0L),
          s"executor ${e.executorId}: still in use after the sort: bytesInUse ${e.counters.get("bytesInUse")}, livePlans ${e.counters.get("livePlans")}")
        check(e.planDirs.isEmpty, s"executor ${e.executorId}: left ${e.planDirs.mkString(", ")}")
      }

      // The sort's SQL metrics (the SQL tab's `remote runs`, `remote spill size`).
      sorts.headOption.foreach { s =>
        val m = s.metrics.map { case (k, v) => k -> v.value }.withDefaultValue(-1L)
        println(s"overflow: the sort's SQL metrics: runs spilled ${m("runsSpilled")}, remote runs ${m("remoteRuns")}, " +
          s"spill size ${m("spillSize")}, remote spill size ${m("remoteSpillSize")}, merge passes ${m("mergePasses")}")
        check(m("remoteRuns") > 0 && m("remoteRuns") <= remoteFiles, s"the sort's remote runs ${m("remoteRuns")}, the executors' remote spill files $remoteFiles")
        check(m("remoteSpillSize") > 0 && m("remoteSpillSize") <= remoteBytes,
          s"the sort's remote spill size ${m("remoteSpillSize")}, the executors' remote bytes spilled $remoteBytes")
      }

      // Each executor's updates catch up with its counters (every 500 ms once they change).
      val deadline = System.currentTimeMillis() + UpdateWaitMillis
      def caughtUp(e: OverflowExecutor) = updates.get(e.executorId).exists(u =>
        u.remoteSpillFiles >= e.counters.getOrElse("remoteSpillFiles", 0L) && u.remoteBytesSpilled >= e.counters.getOrElse("remoteBytesSpilled", 0L))
      while (!after.forall(caughtUp) && System.currentTimeMillis() < deadline) Thread.sleep(200)
      ListenerDrain(sc)
      after.foreach { e =>
        val u = updates.get(e.executorId)
        println(s"overflow: executor ${e.executorId}'s last update: " + u.fold("none")(u =>
          s"remoteSpillFiles ${u.remoteSpillFiles}, remoteBytesSpilled ${u.remoteBytesSpilled}, remoteBytesRead ${u.remoteBytesRead}"))
        check(caughtUp(e), s"executor ${e.executorId}: its updates do not show its remote files within ${UpdateWaitMillis / 1000} s: $u")
      }
    } finally sc.removeSparkListener(listener)
    failures.result()
  }

  /**
   * Per partition: rows, the wrapping sum of a 64-bit hash of each row (k, id and v: the same
   * for any order of the same rows), and, for a sorted result, whether (k, id) strictly increases.
   * Run by `df`'s own executed plan (`df.rdd` would plan the query again), whose metrics then hold.
   */
  private def digest(df: DataFrame, sorted: Boolean): Seq[OverflowPartition] =
    df.queryExecution.toRdd.mapPartitionsWithIndex { (i, rows) =>
      var n, sum = 0L
      var ordered = true
      var lastK, lastId = 0L
      rows.foreach { r =>
        val (k, id) = (r.getLong(0), r.getLong(1))
        if (n > 0 && (k < lastK || (k == lastK && id <= lastId))) ordered = false
        lastK = k
        lastId = id
        sum += rowHash(k, id, r.getUTF8String(2).getBytes)
        n += 1
      }
      Iterator(OverflowPartition(i, n, sum, ordered || !sorted))
    }.collect().toSeq.sortBy(_.index)

  /** A 64-bit hash of one row: each field mixed in turn (splitmix64's finalizer). */
  private def rowHash(k: Long, id: Long, v: Array[Byte]): Long = {
    def mix(x: Long): Long = {
      var z = x + 0x9E3779B97F4A7C15L
      z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L
      z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL
      z ^ (z >>> 31)
    }
    var h = mix(mix(k) ^ id)
    val b = ByteBuffer.wrap(v)
    while (b.remaining >= 8) h = mix(h ^ b.getLong)
    while (b.hasRemaining) h = mix(h ^ b.get)
    mix(h ^ v.length)
  }

  /** Each executor's view, from a task on each (one core each). */
  private def onEachExecutor(spark: SparkSession, n: Int): Seq[OverflowExecutor] =
    ClusterExecutors.onEach(spark.sparkContext, n) { () =>
      val localDirs = SparkEnv.get.blockManager.getLocalDiskDirs.toSeq
      val stores = localDirs.map(d => Files.getFileStore(Paths.get(d))).distinct
      val e = OverflowExecutor(
        executorId = SparkEnv.get.executorId,
        pid = ProcessHandle.current().pid(),
        localDirs = localDirs,
        localDirBytes = stores.map(_.getTotalSpace).sum,
        localDirUsedBytes = stores.map(s => s.getTotalSpace - s.getUnallocatedSpace).sum,
        planDirs = DemoFiles.spillwayEntries(OrphanSweep.blockManagerDirs(localDirs)._1, ownerLocks = true),
        counters = NativeStats.read().values.toMap)
      e
    }.sortBy(_.executorId)

  /** The regular files under `root`, relative to it. */
  private def filesUnder(root: Path): Seq[String] = {
    val files = Seq.newBuilder[String]
    def walk(f: File): Unit =
      if (f.isDirectory) Option(f.listFiles()).toSeq.flatten.foreach(walk)
      else if (f.isFile) files += root.relativize(f.toPath).toString
    walk(root.toFile)
    files.result().sorted
  }

  private def mib(bytes: Long): String = f"${bytes / 1048576.0}%.1f"
}
