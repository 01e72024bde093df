package spillway

import java.nio.{ByteBuffer, ByteOrder}
import java.nio.file.{Files, Path}

import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

/**
 * The sort natives of NativeSpill called directly (no Spark): malformed batches are
 * IllegalArgumentExceptions that add nothing and leave the sort usable, and the batch format
 * round-trips. XcheckJniSuite runs this suite again under -Xcheck:jni.
 */
class NativeSortContractSuite extends AnyFunSuite with BeforeAndAfterEach {
  private var base: Path = _
  private var plan: Long = 0

  override def beforeEach(): Unit = {
    NativeLoader.load()
    base = Files.createTempDirectory("spillway-sort-contract-")
    plan = NativeSpill.createPlan(Array(base.toString), 1L << 30)
  }

  override def afterEach(): Unit =
    try NativeSpill.releasePlan(plan)
    finally TestFiles.deleteRecursively(base)

  private def direct(bytes: Array[Byte]): ByteBuffer = {
    val b = ByteBuffer.allocateDirect(math.max(1, bytes.length))
    b.put(bytes).clear()
    b
  }

  private def batch(records: (Array[Byte], Array[Byte])*): Array[Byte] = SortBatch.encode(records)

  private def header(keyLength: Int, valueLength: Int): Array[Byte] =
    ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putInt(keyLength).putInt(valueLength).array()

  private def readAll(sort: Long, bufferBytes: Int = 1 << 16): Seq[(Seq[Byte], Seq[Byte])] = {
    var out = ByteBuffer.allocateDirect(bufferBytes).order(ByteOrder.LITTLE_ENDIAN)
    val result = Seq.newBuilder[(Seq[Byte], Seq[Byte])]
    var n = NativeSpill.sortNext(sort, out, 0, out.capacity())
    while (n != 0) {
      if (n < 0) out = ByteBuffer.allocateDirect(-n).order(ByteOrder.LITTLE_ENDIAN)
      else {
        var pos = 0
        while (pos < n) {
          val k = new Array[Byte](out.getInt(pos))
          val v = new Array[Byte](out.getInt(pos + 4))
          out.get(pos + 8, k).get(pos + 8 + k.length, v)
          result += ((k.toSeq, v.toSeq))
          pos += 8 + k.length + v.length
        }
        assert(pos == n, "a batch ends where its last record ends")
      }
      n = NativeSpill.sortNext(sort, out, 0, out.capacity())
    }
    result.result()
  }

  private val b = (s: String) => s.getBytes("UTF-8")

  /** Adds `bad` (which must be refused), then a valid batch, and reads back only the valid records. */
  private def assertRefusedAndStillUsable(bad: Array[Byte]): Unit = {
    val sort = NativeSpill.createSort(plan, 1 << 20)
    try {
      NativeSpill.sortAdd(sort, direct(batch(b("k2") -> b("v2"))), 0, batch(b("k2") -> b("v2")).length, Long.MaxValue, null)
      val e = intercept[IllegalArgumentException](NativeSpill.sortAdd(sort, direct(bad), 0, bad.length, Long.MaxValue, null))
      assert(e.getMessage.contains("malformed batch"), e.getMessage)
      val good = batch(b("k1") -> b("v1"), b("") -> b(""))
      NativeSpill.sortAdd(sort, direct(good), 0, good.length, Long.MaxValue, null)
      assert(readAll(sort) == Seq(b("") -> b(""), b("k1") -> b("v1"), b("k2") -> b("v2")).map { case (k, v) => (k.toSeq, v.toSeq) })
      val stats = new Array[Long](NativeSpill.SORT_STATS_LENGTH)
      NativeSpill.sortStats(sort, stats)
      assert(stats(NativeSpill.sortStatsIndex("records")) == 3, "the refused batch added nothing")
    } finally NativeSpill.releaseSort(sort)
  }

  test("a truncated header is refused; the sort stays usable") {
    assertRefusedAndStillUsable(Array[Byte](1, 0, 0))
    assertRefusedAndStillUsable(batch(b("a") -> b("b")) ++ Array[Byte](0, 0, 0, 0, 0, 0, 0))
  }

  test("lengths past the end of the batch are refused; the sort stays usable") {
    assertRefusedAndStillUsable(header(5, 0) ++ b("abcd"))
    assertRefusedAndStillUsable(header(1, 10) ++ b("abc"))
    // A good record first, then one running one byte past the end.
    assertRefusedAndStillUsable(batch(b("a") -> b("b")) ++ header(2, 2) ++ b("xyz"))
  }

  test("negative (>= 2^31 as u32) and absurd lengths are refused; the sort stays usable") {
    assertRefusedAndStillUsable(header(Int.MinValue, 0) ++ b("abc"))
    assertRefusedAndStillUsable(header(0, -1) ++ b("abc"))
    assertRefusedAndStillUsable(header(-8, 8))
    assertRefusedAndStillUsable(header(Int.MaxValue, Int.MaxValue) ++ b("abc"))
  }

  test("offset and length outside the buffer are refused; the sort stays usable") {
    val sort = NativeSpill.createSort(plan, 1 << 20)
    try {
      val good = batch(b("k") -> b("v"))
      val buf = direct(good)
      intercept[IllegalArgumentException](NativeSpill.sortAdd(sort, buf, 0, good.length + 1, Long.MaxValue, null))
      intercept[IllegalArgumentException](NativeSpill.sortAdd(sort, buf, -1, good.length, Long.MaxValue, null))
      intercept[IllegalArgumentException](NativeSpill.sortAdd(sort, buf, 1, -1, Long.MaxValue, null))
      intercept[IllegalArgumentException](NativeSpill.sortAdd(sort, null, 0, 0, Long.MaxValue, null))
      // Heap buffers go in as well (offset honoured); only the output must be direct.
      val heap = ByteBuffer.wrap(Array[Byte](9, 9) ++ good)
      NativeSpill.sortAdd(sort, heap, 2, good.length, Long.MaxValue, null)
      intercept[IllegalArgumentException](NativeSpill.sortNext(sort, ByteBuffer.allocate(64), 0, 64))
      assert(readAll(sort) == Seq((b("k").toSeq, b("v").toSeq)))
    } finally NativeSpill.releaseSort(sort)
  }

  test("records come back in unsigned key order, stable, with a buffer too small reported as -n") {
    val sort = NativeSpill.createSort(plan, 1 << 20)
    try {
      val records = Seq(
        Array[Byte](-1) -> b("ff"), Array[Byte](0) -> b("00"), Array[Byte]() -> b("empty"),
        Array[Byte](0, 0) -> b("0000"), Array[Byte](0x7f) -> b("7f"), Array[Byte](-128) -> b("80"),
        Array[Byte](0) -> b("00 again"))
      val encoded = batch(records: _*)
      NativeSpill.sortAdd(sort, direct(encoded), 0, encoded.length, Long.MaxValue, null)
      val tiny = ByteBuffer.allocateDirect(8)
      assert(NativeSpill.sortNext(sort, tiny, 0, 8) == -(8 + 0 + "empty".length))
      assert(readAll(sort, bufferBytes = 8).map(_._2.map(_.toChar).mkString) ==
        Seq("empty", "00", "00 again", "0000", "7f", "80", "ff"))
    } finally NativeSpill.releaseSort(sort)
  }

  test("sortAdd takes no record past its limit and says what the next needs; a negative limit or a short state is refused") {
    val sort = NativeSpill.createSort(plan, 64L << 20)
    try {
      val state = new Array[Long](NativeSpill.SORT_STATS_LENGTH)
      val needed = NativeSpill.sortStatsIndex("memoryNeeded")
      var added = 0
      for (round <- 1 to 3) {
        val records = Seq.tabulate(1000 * round)(i => b(f"key$i%08d-$round") -> Array.fill[Byte](round * 7)(1))
        val encoded = batch(records: _*)
        val buf = direct(encoded)
        // As the session does: grant what the sort holds, then what it says the next record needs.
        var limit = NativeSpill.sortMemoryUsed(sort)
        var (off, stops) = (0, 0)
        while (off < encoded.length) {
          off += NativeSpill.sortAdd(sort, buf, off, encoded.length - off, limit, state)
          assert(NativeSpill.sortMemoryUsed(sort) <= limit, s"round $round: past the limit $limit")
          assert(state(NativeSpill.sortStatsIndex("memoryUsed")) == NativeSpill.sortMemoryUsed(sort))
          if (off < encoded.length) {
            assert(state(needed) > limit, s"round $round: stopped short, the next record needs more")
            limit = state(needed)
            stops += 1
          } else assert(state(needed) == 0)
        }
        assert(stops > 0, s"round $round: the first record needed more than the sort held")
        added += records.size
        assert(state(NativeSpill.sortStatsIndex("records")) == added)
      }
      val one = batch(b("k") -> b("v"))
      intercept[IllegalArgumentException](NativeSpill.sortAdd(sort, direct(one), 0, one.length, -1, null))
      intercept[IllegalArgumentException](NativeSpill.sortAdd(sort, direct(one), 0, one.length, Long.MaxValue, new Array[Long](2)))
      assert(readAll(sort).size == added, "the refused calls added nothing")
    } finally NativeSpill.releaseSort(sort)
  }

  test("sortSpill with refill keeps the arena for the next records, the first two times writing the older half; with nothing in memory it frees it") {
    val sort = NativeSpill.createSort(plan, 64L << 20)
    try {
      val value = Array.fill[Byte](100)(1)
      val recordBytes = SortBatch.recordBytes(b("key00000000"), value)
      def add(from: Int, n: Int): Unit = {
        val encoded = batch(Seq.tabulate(n)(i => b(f"key${(from + i) * 7919 % 100003}%08d") -> value): _*)
        NativeSpill.sortAdd(sort, direct(encoded), 0, encoded.length, Long.MaxValue, null)
      }
      def written: Long = {
        val stats = new Array[Long](NativeSpill.SORT_STATS_LENGTH)
        NativeSpill.sortStats(sort, stats)
        stats(NativeSpill.sortStatsIndex("spilledLogicalBytes")) / recordBytes
      }
      add(0, 20000)
      val used = NativeSpill.sortMemoryUsed(sort)
      // The first spill writes the older half of the records (their oldest chunks) and frees their
      // index alone: the writer's reservation stays with the records still held.
      val freed = NativeSpill.sortSpill(sort, true)
      val half = written
      assert(half > 5000 && half < 15000, s"about half the records written: $half")
      assert(freed == half * 16, "only the index of the records written is freed")
      assert(NativeSpill.sortMemoryUsed(sort) == used - half * 16, "the arena is kept, counted")
      val next = batch(Seq.tabulate(10000)(i => b(f"key${20000 + i}%08d") -> value): _*)
      val limit = NativeSpill.sortMemoryUsed(sort) + 10000L * 16
      assert(NativeSpill.sortAdd(sort, direct(next), 0, next.length, limit, null) == next.length,
        "the next batch needs only its index: the chunks kept have room for it")
      assert(NativeSpill.sortMemoryUsed(sort) == used + (10000 - half) * 16)
      for (_ <- 1 to 10 if written < 30000) NativeSpill.sortSpill(sort, true) // the second half, then all
      assert(written == 30000)
      val arena = NativeSpill.sortMemoryUsed(sort) // no records held: the chunks kept alone
      assert(arena > 0 && arena < used - 20000L * 16, "the writer's reservation went with the records")
      assert(NativeSpill.sortSpill(sort, true) == arena, "nothing in memory: the arena goes")
      assert(NativeSpill.sortMemoryUsed(sort) == 0)
      val out = readAll(sort).map(_._1.map(_.toChar).mkString)
      assert(out.size == 30000 && out == out.sorted)
    } finally NativeSpill.releaseSort(sort)
  }

  test("adding after the first sortNext is an IllegalStateException; a released sort refuses every call") {
    val sort = NativeSpill.createSort(plan, 1 << 20)
    val encoded = batch(b("k") -> b("v"))
    NativeSpill.sortAdd(sort, direct(encoded), 0, encoded.length, Long.MaxValue, null)
    assert(readAll(sort).size == 1)
    intercept[IllegalStateException](NativeSpill.sortAdd(sort, direct(encoded), 0, encoded.length, Long.MaxValue, null))
    NativeSpill.releaseSort(sort)
    intercept[IllegalStateException](NativeSpill.sortAdd(sort, direct(encoded), 0, encoded.length, Long.MaxValue, null))
    intercept[IllegalStateException](NativeSpill.sortNext(sort, ByteBuffer.allocateDirect(64), 0, 64))
    intercept[IllegalStateException](NativeSpill.sortSpill(sort, false))
    intercept[IllegalStateException](NativeSpill.sortSpill(sort, true))
    intercept[IllegalStateException](NativeSpill.releaseSort(sort))
    intercept[IllegalArgumentException](NativeSpill.createSort(plan, 0))
  }
}
