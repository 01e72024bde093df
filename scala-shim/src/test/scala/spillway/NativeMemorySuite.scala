package spillway

import java.nio.file.{Files, Paths}
import java.util.concurrent.atomic.AtomicLong

import scala.concurrent.duration._
import scala.jdk.CollectionConverters._
import scala.util.Random

import org.apache.spark.{SparkException, TaskContext}
import org.apache.spark.scheduler.{SparkListener, SparkListenerTaskEnd}
import org.apache.spark.spillway.ListenerBusProbe
import org.apache.spark.unsafe.Platform
import org.scalatest.concurrent.Eventually._
import org.scalatest.funsuite.AnyFunSuite

/**
 * The native sort's memory as a container sees it: the process's resident set (VmRSS). A sort of
 * 320 MiB in a real Spark task, in the default on-heap mode with no cap, holds its records
 * resident at its peak (so the test measures something), and once the task ends — the sort
 * completed, failed, cancelled, or abandoned by a LIMIT — nothing is mapped for a sort, what it
 * freed is kept for the next sorts (the library's cache, an opt-in turned on here:
 * `spark.spillway.sort.memoryCacheIdle` of 2 s), and once the cache has let it go the process is
 * back within 64 MiB of where it was, its Go heap near its idle size.
 */
class NativeMemorySuite extends AnyFunSuite with LocalSpark {
  import NativeMemorySuite._

  override protected def master: String = "local[1]"
  override protected def sparkConf: Map[String, String] = Map(
    "spark.testing.memory" -> (1L << 30).toString, "spark.testing.reservedMemory" -> "0", "spark.memory.fraction" -> "1.0",
    "spark.sql.extensions" -> "spillway.SpillwayExtensions", "spark.sql.shuffle.partitions" -> "2",
    "spark.spillway.sort.memoryCacheIdle" -> "2s")

  private def run(way: Way): Unit = sc.parallelize(Seq(0), 1).foreach(_ => sortInTask(way))

  // The cache is on here (2 s), though off by default, so that what it keeps and lets go is seen.
  private def cacheLetGo(): Unit =
    eventually(timeout(20.seconds), interval(100.millis))(assert(NativeStats.read()("nativeCachedBytes") == 0L))

  override def beforeAll(): Unit = {
    super.beforeAll()
    run(Completed(batches = 16)) // classes loaded, the buffer pool and the library's heap warm
  }

  for (way <- Seq(Completed(Batches), AbandonedByLimit, Failed, Cancelled)) {
    test(s"a sort of $Batches MiB gives its memory back when it ends: ${way.name}") {
      cacheLetGo() // what the warm-up's sort freed
      val before = settledRss()
      val statsBefore = NativeStats.read()
      peakRss.set(0L)
      peakNative.set(0L)
      way match {
        case Cancelled =>
          // Cancelled from the driver once the sort holds most of its records, as a user's
          // cancelJobGroup or a failed stage's other tasks would be.
          val group = s"native-memory-${System.nanoTime()}"
          val canceller = new Thread(() => {
            val deadline = System.nanoTime() + 60L * 1000 * 1000 * 1000 // the input never ends: never hang
            while (NativeStats.read()("nativeBytes") < (Batches.toLong << 20) / 2 && System.nanoTime() < deadline) Thread.sleep(5)
            peakRss.set(rssBytes())
            peakNative.set(NativeStats.read()("nativeBytes"))
            sc.cancelJobGroup(group)
          })
          canceller.setDaemon(true)
          canceller.start()
          sc.setJobGroup(group, "cancelled sort", interruptOnCancel = false)
          try {
            val e = intercept[SparkException](run(way))
            assert(e.getMessage.contains("cancel"), e)
          } finally sc.clearJobGroup()
          canceller.join(60000)
        case Failed =>
          val e = intercept[SparkException](run(way))
          assert(e.getMessage.contains(FailureMessage), e)
        case _ => run(way)
      }
      // A cancelled job returns before its task stops (at its next batch): wait for the task to end.
      eventually(timeout(60.seconds), interval(50.millis))(assert(NativeStats.read()("livePlans") == 0L))
      // The library keeps what the sort freed mapped for the next sorts, 2 s unused at most here.
      val cachedAtEnd = NativeStats.read()("nativeCachedBytes")
      cacheLetGo()
      val after = settledRss()
      val statsAfter = NativeStats.read()
      val report = f"RSS before ${before / MiB}%.1f MiB, at the peak ${peakRss.get / MiB}%.1f MiB, after ${after / MiB}%.1f MiB; " +
        f"native at the peak ${peakNative.get / MiB}%.1f MiB; Go heap before ${statsBefore("goHeapBytes") / MiB}%.1f MiB, " +
        f"after ${statsAfter("goHeapBytes") / MiB}%.1f MiB"
      info(report)
      // Cancelled when it held half of the others' records.
      val heldAtPeak = if (way == Cancelled) (Batches.toLong << 20) / 2 else Batches.toLong << 20
      assert(peakNative.get >= heldAtPeak, s"the records were in native memory: $report")
      assert(peakRss.get - before >= heldAtPeak * 3 / 4, s"and resident: $report")
      assert(statsAfter("nativeBytes") == 0L, s"nothing mapped once the task ended: $report")
      assert(cachedAtEnd > 0L, s"what the sort freed was kept for the next sorts, then let go: $report")
      assert(after <= before + (64L << 20), s"the resident set back within 64 MiB: $report")
      assert(statsAfter("goHeapBytes") <= statsBefore("goHeapBytes") + (16L << 20), s"the Go heap near its idle size: $report")
      assert(statsAfter("livePlans") == 0L && TaskSpill.activePlans == 0)
      assert(TestFiles.spillDirsUnder(roots).isEmpty, "no spill: no cap, and Spark granted it all")
    }
  }

  test("with Spillway's defaults, an ORDER BY that fits in Spark's execution memory spills no more than Spark's sort: not at all") {
    def orderBy(native: Boolean): Long = {
      spark.conf.set(SpillwayConf.SqlSortEnabledKey, native.toString)
      try {
        val df = spark.range(0, 1000000, 1, 2)
          .selectExpr("id", "CAST(rand(3) * 9e18 AS BIGINT) AS k", "concat(uuid(), uuid(), uuid(), uuid(), uuid()) AS s")
          .orderBy("k")
        assert(df.queryExecution.executedPlan.toString.contains("SpillwaySort") == native)
        diskSpilledBy(sc)(df.write.format("noop").mode("overwrite").save())
      } finally spark.conf.unset(SpillwayConf.SqlSortEnabledKey)
    }
    // About 200 MB of rows, over 100 MB a sort, in 1 GiB of execution memory: more than a cap of
    // 64m (the old default in on-heap mode) would hold.
    assert(orderBy(native = false) == 0L, "Spark's own sort spilled")
    assert(orderBy(native = true) == 0L, "the native sort spilled where Spark's did not")
  }
}

object NativeMemorySuite {
  /** Bytes the tasks of `body`'s jobs spilled to disk (their task metrics, Spark's sorts and the native one alike). */
  def diskSpilledBy(sc: org.apache.spark.SparkContext)(body: => Unit): Long = {
    val spilled = new AtomicLong
    val listener = new SparkListener {
      override def onTaskEnd(end: SparkListenerTaskEnd): Unit =
        if (end.taskMetrics != null) spilled.addAndGet(end.taskMetrics.diskBytesSpilled)
    }
    ListenerBusProbe.drain(sc)
    sc.addSparkListener(listener)
    try {
      body
      ListenerBusProbe.drain(sc)
    } finally sc.removeSparkListener(listener)
    spilled.get
  }

  private val Batches = 320
  private val MiB = 1024.0 * 1024
  private val FailureMessage = "the task failed after its sort sorted"
  private val KeyBytes = 12
  private val ValueBytes = 100

  /** How a test's sort ends. */
  sealed abstract class Way(val name: String) extends Serializable
  final case class Completed(batches: Int) extends Way("completed, read to the end")
  case object AbandonedByLimit extends Way("abandoned after 10 rows, as under a LIMIT")
  case object Failed extends Way("the task failed with rows still unread")
  case object Cancelled extends Way("the task was cancelled while adding rows")

  // Read in the driver after the job: local mode runs the task in this JVM.
  private val peakRss = new AtomicLong
  private val peakNative = new AtomicLong

  /**
   * The resident set once a full collection is done and the heap it shrank has been uncommitted
   * (G1 uncommits concurrently, after System.gc() returns): read until two reads 200 ms apart
   * agree within 2 MiB, for at most 10 s.
   */
  def settledRss(): Long = {
    System.gc()
    var last = rssBytes()
    var tries = 0
    var settled = false
    while (!settled && tries < 50) {
      Thread.sleep(200)
      val now = rssBytes()
      settled = math.abs(now - last) < (2L << 20)
      last = now
      tries += 1
    }
    last
  }

  def rssBytes(): Long =
    Files.readAllLines(Paths.get("/proc/self/status")).asScala.collectFirst {
      case l if l.startsWith("VmRSS:") => l.split("\\s+")(1).toLong * 1024
    }.getOrElse(throw new IllegalStateException("no VmRSS in /proc/self/status"))

  /** In a task: adds `batches` MiB of records (from reused arrays: the Java heap barely moves), then ends as `way` says. */
  def sortInTask(way: Way): Unit = {
    val batches = way match {
      case Completed(b) => b
      case Cancelled => Int.MaxValue // until cancelled
      case _ => Batches
    }
    val session = NativeSortSession.forCurrentTask()
    val random = new Random(7)
    val key = new Array[Byte](KeyBytes)
    val value = new Array[Byte](ValueBytes)
    val recordBytes = SortBatch.HeaderBytes + KeyBytes + ValueBytes
    val perBatch = (1 << 20) / recordBytes
    var b = 0
    while (b < batches) {
      for (_ <- 0 until perBatch) {
        random.nextBytes(key)
        SortBatch.put(session.recordAt(recordBytes), key, value)
      }
      b += 1
    }
    session.endInput()
    var read = 0L
    var previous = Array.emptyByteArray
    while (session.hasRecord) {
      if (read == 0) { // sorted, every record in memory: the peak
        peakRss.set(rssBytes())
        peakNative.set(NativeStats.read()("nativeBytes"))
      }
      val at = session.record
      val k = new Array[Byte](SortBatch.keyLength(at))
      Platform.copyMemory(null, at + SortBatch.HeaderBytes, k, Platform.BYTE_ARRAY_OFFSET, k.length.toLong)
      assert(java.util.Arrays.compareUnsigned(previous, k) <= 0, "sorted")
      previous = k
      read += 1
      session.advance(SortBatch.HeaderBytes + k.length + SortBatch.valueLength(at))
      way match {
        case AbandonedByLimit if read == 10 => return // the task ends; its completion listener closes the sort
        case Failed if read == 10 => throw new IllegalStateException(FailureMessage)
        case _ =>
      }
    }
    assert(TaskContext.get() != null && read == perBatch.toLong * batches)
  }
}
