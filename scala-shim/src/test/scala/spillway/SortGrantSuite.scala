package spillway

import scala.util.Random

import org.apache.spark.TaskContext
import org.apache.spark.spillway.MemoryHog
import org.apache.spark.unsafe.Platform
import org.scalatest.funsuite.AnyFunSuite

/** What a task saw of a native sort fed `batches` MiB of records. */
final case class GrantObservation(budget: Long, peakGranted: Long, runs: Long, records: Long, sortedOut: Long, outOfOrder: Long,
    heldAfter: Long, lowestGrantAfterFirstRun: Long)

/**
 * A native sort's memory follows Spark's grant: with no cap (`unlimited`, the default in both
 * memory modes) it grows past 64 MiB as long as Spark grants memory, spills when Spark grants no
 * more, and spills at the cap when one is set. (That it spills when Spark asks for memory back is NativeSortSuite's.) 512 MiB of execution
 * memory, one task at a time.
 */
class SortGrantSuite extends AnyFunSuite with LocalSpark {
  import SortGrantSuite._

  override protected def master: String = "local[1]"
  override protected def sparkConf: Map[String, String] = Map(
    "spark.testing.memory" -> (512L << 20).toString, "spark.testing.reservedMemory" -> "0", "spark.memory.fraction" -> "1.0")

  private def sortInTask(batches: Int, leaveForSort: Option[Long] = None): GrantObservation =
    sc.parallelize(Seq(0), 1).map(_ => feed(batches, leaveForSort)).collect().head

  test("unlimited: the sort holds all Spark grants, past 64 MiB, and writes no run") {
    val o = withLocalProperty(SpillwayConf.SortMemoryBudgetKey, SpillwayConf.Unlimited)(sortInTask(batches = 96))
    assert(o.budget >= (512L << 20), s"the budget is what Spark could grant: $o")
    assert(o.runs == 0 && o.peakGranted >= (96L << 20), s"96 MiB held in memory, granted by Spark: $o")
    assert(o.sortedOut == o.records && o.outOfOrder == 0 && o.heldAfter == 0, o)
    assert(TaskSpill.activePlans == 0)
  }

  test("Spark grants no more: the sort spills at what it was granted") {
    val o = sortInTask(batches = 96, leaveForSort = Some(24L << 20))
    // One batch (1 MiB and its index) may be held beyond the grant before the sort spills.
    assert(o.runs >= 4 && o.peakGranted <= (24L << 20), s"spilled at Spark's 24 MiB: $o")
    // Spark spilled the sort for the sort's own next batch: it kept its arena (about 20 MiB) to
    // refill rather than give it back and map it again.
    assert(o.lowestGrantAfterFirstRun >= (16L << 20), s"the arena was kept across the runs: $o")
    assert(o.sortedOut == o.records && o.outOfOrder == 0 && o.heldAfter == 0, o)
    assert(TestFiles.spillDirsUnder(roots).isEmpty && TaskSpill.activePlans == 0)
  }

  test("unset in Spark's on-heap mode: no cap, the sort holds all Spark grants and writes no run (as Spark's sort would not)") {
    val o = sortInTask(batches = 96)
    assert(o.budget >= (512L << 20), s"the budget is what Spark could grant: $o")
    assert(o.runs == 0 && o.peakGranted >= (96L << 20), s"96 MiB held in memory, granted by Spark: $o")
    assert(o.sortedOut == o.records && o.outOfOrder == 0 && o.heldAfter == 0, o)
    assert(TaskSpill.activePlans == 0)
  }

  test("a cap below Spark's grant: the sort spills at the cap") {
    val o = withLocalProperty(SpillwayConf.SortMemoryBudgetKey, "16m")(sortInTask(batches = 48))
    assert(o.budget == (16L << 20) && o.runs >= 3 && o.peakGranted <= (16L << 20) + (2L << 20), o)
    assert(o.sortedOut == o.records && o.outOfOrder == 0 && o.heldAfter == 0, o)
    assert(TestFiles.spillDirsUnder(roots).isEmpty && TaskSpill.activePlans == 0)
  }
}

/**
 * In Spark's off-heap mode the grant is native memory the operator sized
 * (`spark.memory.offHeap.size`): unset, the sort follows it with no cap.
 */
class SortGrantOffHeapSuite extends AnyFunSuite with LocalSpark {
  override protected def master: String = "local[1]"
  override protected def sparkConf: Map[String, String] = Map(
    "spark.memory.offHeap.enabled" -> "true", "spark.memory.offHeap.size" -> "512m")

  test("unset in off-heap mode: the sort holds all Spark grants, past 64 MiB, and writes no run") {
    val o = sc.parallelize(Seq(0), 1).map(_ => SortGrantSuite.feed(96, None)).collect().head
    assert(o.budget == (512L << 20), s"the budget is the off-heap size: $o")
    assert(o.runs == 0 && o.peakGranted >= (96L << 20), s"96 MiB held in memory, granted by Spark: $o")
    assert(o.sortedOut == o.records && o.outOfOrder == 0 && o.heldAfter == 0, o)
    assert(TaskSpill.activePlans == 0)
  }
}

object SortGrantSuite {
  private val BatchBytes = 1 << 20
  private val KeyBytes = 12
  private val ValueBytes = 100

  /**
   * Runs in a task: adds `batches` MiB of random records through a session (another consumer
   * first takes all but `leaveForSort` of Spark's memory, if given), then reads the sorted output
   * and checks its order.
   */
  def feed(batches: Int, leaveForSort: Option[Long]): GrantObservation = {
    val task = TaskContext.get()
    val hog = leaveForSort.map(MemoryHog.holdAllBut(task, _))
    try {
      val session = NativeSortSession.forCurrentTask()
      val random = new Random(batches)
      val key = new Array[Byte](KeyBytes)
      val value = new Array[Byte](ValueBytes)
      val recordBytes = SortBatch.HeaderBytes + KeyBytes + ValueBytes
      val perBatch = BatchBytes / recordBytes
      var peakGranted = 0L
      var spilled = false
      var lowestAfterRun = Long.MaxValue
      for (_ <- 0 until batches) {
        for (_ <- 0 until perBatch) {
          random.nextBytes(key)
          SortBatch.put(session.recordAt(recordBytes), key, value)
          peakGranted = math.max(peakGranted, session.getUsed)
          if (spilled) lowestAfterRun = math.min(lowestAfterRun, session.getUsed)
        }
        spilled = spilled || session.stats.runs > 0
      }
      session.endInput()
      peakGranted = math.max(peakGranted, session.getUsed)
      var sortedOut = 0L
      var outOfOrder = 0L
      var previous = Array.emptyByteArray
      while (session.hasRecord) {
        val at = session.record
        val k = new Array[Byte](SortBatch.keyLength(at))
        Platform.copyMemory(null, at + SortBatch.HeaderBytes, k, Platform.BYTE_ARRAY_OFFSET, k.length.toLong)
        if (java.util.Arrays.compareUnsigned(previous, k) > 0) outOfOrder += 1
        previous = k
        sortedOut += 1
        session.advance(SortBatch.HeaderBytes + k.length + SortBatch.valueLength(at))
      }
      val stats = session.stats
      session.close()
      GrantObservation(session.memoryBudget, peakGranted, stats.runs, stats.records, sortedOut, outOfOrder,
        MemoryHog.taskExecutionMemory(task) - hog.fold(0L)(_.getUsed), lowestAfterRun)
    } finally hog.foreach(MemoryHog.release)
  }
}
