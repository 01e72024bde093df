package spillway

import java.util.Arrays

import scala.util.Random

import org.apache.spark.{SparkException, TaskContext}
import org.apache.spark.spillway.MemoryHog
import org.scalatest.funsuite.AnyFunSuite

import spillway.NativeSort._

/** What a task saw of its native sort. */
final case class SortObservation(
    records: Int,
    mismatches: Int,
    firstMismatch: Int, // -1 if none
    runs: Long,
    spilledBytes: Long,
    spilledMemory: Long,
    spillDirsWhileSorting: Seq[String],
    taskMemoryBytesSpilled: Long,
    taskDiskBytesSpilled: Long,
    executionMemoryAfter: Long,
    peakExecutionMemory: Long)

/**
 * The native sort in real Spark tasks (local mode, one local dir, the real library): results equal
 * to a stable JVM sort by unsigned key, spilling through the task's plan, Spark's memory manager
 * making it spill, the plan's limit. Every check runs before spark.stop(), which deletes the
 * blockmgr dirs.
 */
class NativeSortSuite extends AnyFunSuite with LocalSpark {
  import NativeSortSuite._

  private val BudgetKey = SpillwayConf.SortMemoryBudgetKey
  private val LimitKey = SpillwayConf.MaxTempDirectorySizeKey

  // One local dir: a plan spills every run into one root, so "exactly one plan dir" is checkable.
  override protected def localDirNames: Seq[String] = Seq("local")

  private def assertNothingLeft(): Unit = {
    assert(TestFiles.spillDirsUnder(roots).isEmpty)
    assert(TaskSpill.activePlans == 0)
  }

  /**
   * Generates each partition's records with `generate(partition)` inside its task, sorts them with
   * the RDD helper and checks them there against a stable JVM sort of the same records.
   */
  private def sortAndCheck(partitions: Int, generate: Int => IndexedSeq[Record], hooks: Hooks = NoHooks): Seq[SortObservation] = {
    val roots = this.roots
    sc.parallelize(0 until partitions, partitions)
      .mapPartitionsWithIndex((p, _) => hooks.input(generate(p).iterator))
      .nativeSortWithinPartitions()
      .mapPartitionsWithIndex((p, sorted) => Iterator(check(sorted, jvmSort(generate(p)), roots, hooks)))
      .collect()
      .toSeq
  }

  private def assertSorted(seen: Seq[SortObservation]): Unit =
    seen.foreach { o =>
      assert(o.mismatches == 0, s"first mismatch at record ${o.firstMismatch}: $o")
      assert(o.executionMemoryAfter == 0, s"execution memory still held after the sort: $o")
    }

  test("data that fits in memory: same as the JVM's stable unsigned sort; no spill, no dir") {
    val seen = sortAndCheck(2, p => randomRecords(20000, seed = p, maxKeyLength = 12))
    assertSorted(seen)
    assert(seen.map(_.records) == Seq(20000, 20000))
    assert(seen.forall(o => o.runs == 0 && o.spilledBytes == 0 && o.spillDirsWhileSorting.isEmpty), seen)
    assert(seen.forall(o => o.taskDiskBytesSpilled == 0 && o.taskMemoryBytesSpilled == 0), seen)
    assert(seen.forall(_.peakExecutionMemory > 0), "the sort took its memory from Spark")
    assertNothingLeft()
  }

  test("data 20x the budget: same as the JVM's sort; one plan dir while sorting, none after; task metrics") {
    val budget = 1L << 20
    val seen = withLocalProperties(BudgetKey -> budget.toString) {
      sortAndCheck(1, p => randomRecords(400000, seed = 10 + p, maxKeyLength = 16, valueLength = 50))
    }
    assertSorted(seen)
    val o = seen.head
    assert(o.records == 400000)
    assert(o.spilledBytes >= 20 * budget, s"the records spilled alone are 20x the budget: $o")
    assert(o.runs >= 20, o)
    assert(o.spillDirsWhileSorting.size == 1, o)
    assert(new java.io.File(o.spillDirsWhileSorting.head).getName.startsWith(TestFiles.SpillDirPrefix))
    assert(o.taskDiskBytesSpilled == o.spilledBytes && o.taskMemoryBytesSpilled == o.spilledMemory, o)
    // Spark granted the memory: the budget, a batch in flight and the merge's read buffers.
    assert(o.peakExecutionMemory > 0 && o.peakExecutionMemory <= budget + (4L << 20), o)
    assertNothingLeft()
  }

  test("an empty partition: nothing out, no plan, no sort") {
    val before = NativeStats.read()
    val seen = sortAndCheck(1, _ => IndexedSeq.empty)
    assertSorted(seen)
    assert(seen.head.records == 0)
    assert((NativeStats.read() - before)("plansCreated") == 0)
    assertNothingLeft()
  }

  test("one record") {
    val seen = sortAndCheck(1, _ => IndexedSeq(Record(Array[Byte](0, -1), Array[Byte](1, 2, 3))))
    assertSorted(seen)
    assert(seen.head.records == 1)
    assertNothingLeft()
  }

  test("all keys equal: input order is kept, across spilled runs") {
    val seen = withLocalProperties(BudgetKey -> "64k") {
      sortAndCheck(1, _ => IndexedSeq.tabulate(20000)(i => Record(Array[Byte](7, 0, -1), BigInt(i).toByteArray)))
    }
    assertSorted(seen)
    assert(seen.head.records == 20000 && seen.head.runs > 1, seen)
    assertNothingLeft()
  }

  test("zero-length keys and values, spilled and not") {
    val generate = (_: Int) => IndexedSeq.tabulate(5000) { i =>
      val key = if (i % 3 == 0) Array.emptyByteArray else Array[Byte]((i % 5).toByte)
      val value = if (i % 2 == 0) Array.emptyByteArray else BigInt(i).toByteArray
      Record(key, value)
    }
    assertSorted(sortAndCheck(1, generate))
    val spilled = withLocalProperties(BudgetKey -> "16k")(sortAndCheck(1, generate))
    assertSorted(spilled)
    assert(spilled.head.runs > 1, spilled)
    assertNothingLeft()
  }

  test("records of 1 MiB (keys and values), larger than the budget and the batch buffers") {
    val MiB = 1 << 20
    val generate = (_: Int) => {
      val random = new Random(3)
      val big = (n: Int) => { val a = new Array[Byte](n); random.nextBytes(a); a }
      IndexedSeq.tabulate(12) { i =>
        if (i % 3 == 0) Record(big(MiB), big(10)) else if (i % 3 == 1) Record(big(8), big(MiB)) else Record(big(8), big(100))
      }
    }
    val seen = withLocalProperties(BudgetKey -> "1m")(sortAndCheck(1, generate))
    assertSorted(seen)
    assert(seen.head.records == 12 && seen.head.runs >= 2, seen)
    assertNothingLeft()
  }

  test("random binary keys full of 0x00 and 0xFF bytes, with prefixes and ties, spilled") {
    val seen = withLocalProperties(BudgetKey -> "256k") {
      sortAndCheck(1, p => randomRecords(40000, seed = 20 + p, maxKeyLength = 6))
    }
    assertSorted(seen)
    assert(seen.head.runs > 1)
    assertNothingLeft()
  }

  test("Spark makes the sort spill, while it takes input and while it is read: the result stays right") {
    // With no cap the sort holds all of it: every run is written because Spark asked.
    val seen = sortAndCheck(1, p => randomRecords(60000, seed = 30 + p, maxKeyLength = 10, valueLength = 40), SparkSpillHooks)
    assertSorted(seen)
    val o = seen.head
    assert(o.runs == 2, s"one run per request of Spark's: $o")
    assert(o.taskMemoryBytesSpilled == o.spilledMemory && o.taskDiskBytesSpilled == o.spilledBytes && o.spilledBytes > 0, o)
    assertNothingLeft()
  }

  test("a limit too small for the data fails the task with SpillLimitExceededException; nothing left") {
    val e = withLocalProperties(BudgetKey -> "1m", LimitKey -> "1m") {
      intercept[SparkException](sortAndCheck(1, p => randomRecords(200000, seed = 40 + p, maxKeyLength = 16, valueLength = 34)))
    }
    val limitErrors = TestFiles.causeChain(e).collect { case s: SpillLimitExceededException => s }
    assert(limitErrors.nonEmpty, s"no SpillLimitExceededException in the cause chain of $e")
    assert(limitErrors.head.getMessage.contains(LimitKey))
    assertNothingLeft()
  }

  test("a bad budget fails the task naming the key") {
    val e = withLocalProperties(BudgetKey -> "0")(intercept[SparkException](sortAndCheck(1, _ => IndexedSeq(Record(Array[Byte](1), Array[Byte](2))))))
    assert(TestFiles.causeChain(e).exists {
      case i: IllegalArgumentException => i.getMessage.contains(BudgetKey)
      case _ => false
    }, e)
    assertNothingLeft()
  }

  test("outside a task, sorting is an IllegalStateException (and an empty input needs no task)") {
    intercept[IllegalStateException](NativeSort.sort(Iterator(Array[Byte](1) -> Array[Byte](2))).hasNext)
    assert(NativeSort.sort(Iterator.empty).isEmpty)
  }
}

object NativeSortSuite {
  /** A record whose equality is by content (arrays compare by identity). */
  final case class Record(key: Array[Byte], value: Array[Byte]) {
    def sameAs(key: Array[Byte], value: Array[Byte]): Boolean = Arrays.equals(this.key, key) && Arrays.equals(this.value, value)
  }

  /** The reference: a stable sort (TimSort) by unsigned byte-wise key. */
  def jvmSort(records: IndexedSeq[Record]): IndexedSeq[Record] =
    records.sortWith((a, b) => Arrays.compareUnsigned(a.key, b.key) < 0)

  // Bytes that sort differently signed and unsigned, and the extremes, so most keys hit them.
  private val Edges = Array[Byte](0x00, 0x01, 0x7f, 0x80.toByte, 0xfe.toByte, 0xff.toByte)

  /**
   * `n` records with keys of 0 to `maxKeyLength` bytes, half of them edge bytes (so many keys are
   * equal or prefixes of each other), and values carrying the record's index (so stability shows).
   */
  def randomRecords(n: Int, seed: Int, maxKeyLength: Int, valueLength: Int = 0): IndexedSeq[Record] = {
    val random = new Random(seed)
    IndexedSeq.tabulate(n) { i =>
      val key = Array.fill[Byte](random.nextInt(maxKeyLength + 1)) {
        if (random.nextBoolean()) Edges(random.nextInt(Edges.length)) else random.nextInt(256).toByte
      }
      val value = new Array[Byte](4 + valueLength)
      random.nextBytes(value)
      java.nio.ByteBuffer.wrap(value).putInt(i)
      Record(key, value)
    }
  }

  /** Task-side hooks: on the input before the sort, and while the sorted output is read. */
  trait Hooks extends Serializable {
    def input(records: Iterator[Record]): Iterator[(Array[Byte], Array[Byte])] = records.map(r => (r.key, r.value))
    def output(index: Int): Unit = ()
  }
  object NoHooks extends Hooks

  /**
   * Another consumer of the task asks Spark for all its memory halfway through the input and again
   * a third of the way through the output, so Spark makes the sort spill each time.
   */
  object SparkSpillHooks extends Hooks {
    override def input(records: Iterator[Record]): Iterator[(Array[Byte], Array[Byte])] = {
      val all = records.toIndexedSeq
      all.iterator.zipWithIndex.map { case (r, i) =>
        if (i == all.size / 2) {
          val task = TaskContext.get()
          // Batches are 1 MiB: by now the sort holds records, and their memory is Spark's.
          if (MemoryHog.taskExecutionMemory(task) == 0) throw new AssertionError("the sort holds no Spark memory")
          MemoryHog.grabAndRelease(task)
        }
        (r.key, r.value)
      }
    }
    override def output(index: Int): Unit = if (index == 20000) MemoryHog.grabAndRelease(TaskContext.get())
  }

  /** Runs in the task: reads `sorted` and compares it with `expected`. */
  def check(sorted: Iterator[(Array[Byte], Array[Byte])], expected: IndexedSeq[Record], roots: Seq[String], hooks: Hooks): SortObservation = {
    val task = TaskContext.get()
    val dirsWhileSorting = if (sorted.hasNext) TestFiles.spillDirsUnder(roots) else Seq.empty // hasNext took the input
    var n = 0
    var mismatches = 0
    var firstMismatch = -1
    while (sorted.hasNext) {
      hooks.output(n)
      val (k, v) = sorted.next()
      if (n >= expected.size || !expected(n).sameAs(k, v)) {
        mismatches += 1
        if (firstMismatch < 0) firstMismatch = n
      }
      n += 1
    }
    if (n != expected.size) {
      mismatches += math.abs(expected.size - n)
      if (firstMismatch < 0) firstMismatch = math.min(n, expected.size)
    }
    val stats = sorted match {
      case s: NativeSortIterator => s.stats
      case _ => None
    }
    val metrics = task.taskMetrics()
    SortObservation(
      records = n,
      mismatches = mismatches,
      firstMismatch = firstMismatch,
      runs = stats.fold(0L)(_.runs),
      spilledBytes = stats.fold(0L)(_.spilledBytes),
      spilledMemory = stats.fold(0L)(_.spilledMemory),
      spillDirsWhileSorting = dirsWhileSorting,
      taskMemoryBytesSpilled = metrics.memoryBytesSpilled,
      taskDiskBytesSpilled = metrics.diskBytesSpilled,
      executionMemoryAfter = MemoryHog.taskExecutionMemory(task),
      peakExecutionMemory = MemoryHog.peakExecutionMemory(task))
  }
}
