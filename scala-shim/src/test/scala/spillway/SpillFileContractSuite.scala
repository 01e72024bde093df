package spillway

import java.io.IOException
import java.nio.ByteBuffer
import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Path, Paths}

import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

/**
 * The spill-file natives (NativeSpill's Javadoc: configureFormat, createSpillFile, finishWrite,
 * fileSizes, openReader, read, closeReader), called directly on the real library: round trips in
 * every codec, sealed or not, through direct and heap buffers; bad input gets the contract's
 * exceptions; a changed file is an IOException naming the file and the chunk.
 */
class SpillFileContractSuite extends AnyFunSuite with BeforeAndAfterEach {
  private val GiB = 1L << 30
  private var root: Path = _

  override def beforeEach(): Unit = {
    NativeLoader.load()
    root = Files.createTempDirectory("spillway-framed-")
  }

  override def afterEach(): Unit = {
    NativeSpill.configureFormat("none", 1, false, 128) // the process-wide format back to the default
    TestFiles.deleteRecursively(root)
  }

  private def newPlan(): Long = NativeSpill.createPlan(Array(root.toString), GiB)

  private val marker = "PLAINTEXT-MARKER-".getBytes(StandardCharsets.US_ASCII)
  private def payload(n: Int): Array[Byte] = {
    val b = new Array[Byte](n)
    for (i <- 0 until n) b(i) = if (i % 64 < marker.length) marker(i % 64) else ('a' + i % 7).toByte
    b
  }

  private def writeFramed(plan: Long, data: Array[Byte], direct: Boolean): Long = {
    val file = NativeSpill.createSpillFile(plan)
    var off = 0
    while (off < data.length) {
      val n = math.min(100000, data.length - off)
      val buf = if (direct) ByteBuffer.allocateDirect(n) else ByteBuffer.allocate(n)
      buf.put(data, off, n)
      assert(NativeSpill.write(file, buf, 0, n) == n)
      off += n
    }
    NativeSpill.finishWrite(file)
    file
  }

  private def readAll(file: Long, direct: Boolean, bufSize: Int): Array[Byte] = {
    val reader = NativeSpill.openReader(file)
    try {
      val out = new java.io.ByteArrayOutputStream()
      val buf = if (direct) ByteBuffer.allocateDirect(bufSize + 3) else ByteBuffer.allocate(bufSize + 3)
      var n = 0
      while ({ n = NativeSpill.read(reader, buf, 3, bufSize); n >= 0 }) {
        assert(n > 0, "read returns at least one byte before the end")
        assert(buf.position() == 0, "the buffer's position is left alone")
        for (i <- 3 until 3 + n) out.write(buf.get(i))
      }
      assert(NativeSpill.read(reader, buf, 0, 1) == -1, "-1 again at the end")
      out.toByteArray
    } finally NativeSpill.closeReader(reader)
  }

  for (codec <- Seq("none", "lz4", "zstd"); encrypt <- Seq(false, true); direct <- Seq(true, false)) {
    test(s"round trip: codec $codec, encryption $encrypt, ${if (direct) "direct" else "heap"} buffers") {
      NativeSpill.configureFormat(codec, 3, encrypt, 256)
      val plan = newPlan()
      try {
        val data = payload(3 << 20)
        val file = writeFramed(plan, data, direct)
        val sizes = new Array[Long](2)
        NativeSpill.fileSizes(file, sizes)
        assert(sizes(0) == data.length)
        val onDisk = Files.readAllBytes(Paths.get(NativeSpill.path(file)))
        assert(sizes(1) == onDisk.length)
        assert(NativeSpill.usedDiskSpace(plan) == onDisk.length, "usedDiskSpace counts bytes on disk")
        if (codec != "none") assert(onDisk.length < data.length / 2, s"$codec compresses")
        if (encrypt) assert(!containsSlice(onDisk, marker), "no plaintext on disk when encrypted")
        assert(java.util.Arrays.equals(readAll(file, direct, 70001), data))
      } finally NativeSpill.releasePlan(plan)
      assert(TestFiles.spillDirsUnder(Seq(root.toString)).isEmpty)
    }
  }

  private def containsSlice(hay: Array[Byte], needle: Array[Byte]): Boolean =
    hay.indices.exists(i => i + needle.length <= hay.length && (0 until needle.length).forall(j => hay(i + j) == needle(j)))

  test("a changed byte is an IOException naming the file and the chunk, never wrong bytes") {
    for (encrypt <- Seq(false, true)) {
      NativeSpill.configureFormat("lz4", 1, encrypt, 128)
      val plan = newPlan()
      try {
        val data = payload(1 << 20)
        val file = writeFramed(plan, data, direct = true)
        val path = Paths.get(NativeSpill.path(file))
        val raw = Files.readAllBytes(path)
        raw(raw.length - 7) = (raw(raw.length - 7) ^ 1).toByte
        Files.write(path, raw)
        val reader = NativeSpill.openReader(file)
        val buf = ByteBuffer.allocateDirect(1 << 16)
        val got = new java.io.ByteArrayOutputStream()
        val e = intercept[IOException] {
          while (true) {
            val n = NativeSpill.read(reader, buf, 0, buf.capacity())
            assert(n >= 0, "the end was reached through a corrupt chunk")
            for (i <- 0 until n) got.write(buf.get(i))
          }
        }
        assert(e.getMessage.contains(path.toString), e.getMessage)
        assert(e.getMessage.matches("(?s).*chunk \\d+.*"), e.getMessage)
        val prefix = got.toByteArray
        assert(prefix.length < data.length && java.util.Arrays.equals(prefix, data.take(prefix.length)))
        intercept[IOException](NativeSpill.read(reader, buf, 0, 10))
        NativeSpill.closeReader(reader)
      } finally NativeSpill.releasePlan(plan)
    }
  }

  test("bad input gets the contract's exceptions") {
    val e = intercept[IllegalArgumentException](NativeSpill.configureFormat("snappy", 1, false, 128))
    assert(e.getMessage.contains("none, lz4, zstd"), e.getMessage)
    intercept[IllegalArgumentException](NativeSpill.configureFormat(null, 1, false, 128))
    intercept[IllegalArgumentException](NativeSpill.configureFormat("x" * 10000, 1, false, 128))
    intercept[IllegalArgumentException](NativeSpill.configureFormat("zstd", 99, false, 128))
    intercept[IllegalArgumentException](NativeSpill.configureFormat("lz4", 1, true, 100))

    val plan = newPlan()
    try {
      val raw = NativeSpill.createTmpFile(plan)
      intercept[IllegalStateException](NativeSpill.finishWrite(raw))
      intercept[IllegalStateException](NativeSpill.openReader(raw))
      val framed = NativeSpill.createSpillFile(plan)
      intercept[IllegalStateException](NativeSpill.openReader(framed)) // not finished
      NativeSpill.finishWrite(framed)
      intercept[IllegalStateException](NativeSpill.write(framed, ByteBuffer.allocate(1), 0, 1))
      intercept[IllegalArgumentException](NativeSpill.fileSizes(framed, new Array[Long](1)))
      val reader = NativeSpill.openReader(framed)
      intercept[IllegalArgumentException](NativeSpill.read(reader, null, 0, 1))
      intercept[IllegalArgumentException](NativeSpill.read(reader, ByteBuffer.allocate(4), 2, 3))
      intercept[IllegalArgumentException](NativeSpill.read(reader, ByteBuffer.allocate(4), -1, 1))
      intercept[IllegalArgumentException](NativeSpill.read(reader, ByteBuffer.allocate(4).asReadOnlyBuffer(), 0, 1))
      intercept[IllegalArgumentException](NativeSpill.read(reader, ByteBuffer.allocateDirect(4).asReadOnlyBuffer(), 0, 1))
      assert(NativeSpill.read(reader, ByteBuffer.allocate(4), 0, 0) == 0)
      assert(NativeSpill.read(reader, ByteBuffer.allocate(4), 0, 4) == -1, "an empty file")
      NativeSpill.closeReader(reader)
      intercept[IllegalStateException](NativeSpill.closeReader(reader))
      intercept[IllegalStateException](NativeSpill.read(reader, ByteBuffer.allocate(4), 0, 1))
      intercept[IllegalStateException](NativeSpill.openReader(0L))
      intercept[IllegalStateException](NativeSpill.createSpillFile(0L))
      // Each kind of file has its release; the other kind's refuses it and leaves the file live.
      val refused = intercept[IllegalStateException](NativeSpill.releaseTmpFile(framed))
      assert(refused.getMessage.contains("releaseSpillFile"), refused.getMessage)
      intercept[IllegalStateException](NativeSpill.releaseSpillFile(raw))
      assert(Files.exists(Paths.get(NativeSpill.path(framed))) && Files.exists(Paths.get(NativeSpill.path(raw))))
      NativeSpill.releaseTmpFile(raw)
      val other = NativeSpill.createSpillFile(plan)
      NativeSpill.releaseSpillFile(other)
      intercept[IllegalStateException](NativeSpill.releaseSpillFile(other))
      // A reader left open is closed with its plan.
      NativeSpill.openReader(framed)
    } finally NativeSpill.releasePlan(plan)
    assert(TestFiles.spillDirsUnder(Seq(root.toString)).isEmpty)
  }

  test("sortStats reports disk and logical bytes and merge passes") {
    NativeSpill.configureFormat("lz4", 1, true, 128)
    val plan = newPlan()
    try {
      val sort = NativeSpill.createSort(plan, 64 << 10)
      val batch = ByteBuffer.allocateDirect(1 << 20).order(java.nio.ByteOrder.LITTLE_ENDIAN)
      val rnd = new scala.util.Random(7)
      for (_ <- 0 until 20) {
        batch.clear()
        while (batch.remaining() > 100) {
          val key = f"${rnd.nextInt(100000)}%08d".getBytes(StandardCharsets.US_ASCII)
          SortBatch.put(batch, key, ("v" * 40).getBytes(StandardCharsets.US_ASCII))
        }
        NativeSpill.sortAdd(sort, batch, 0, batch.position(), Long.MaxValue, null)
      }
      val out = ByteBuffer.allocateDirect(1 << 16)
      while (NativeSpill.sortNext(sort, out, 0, out.capacity()) > 0) {}
      val stats = new Array[Long](NativeSpill.SORT_STATS_LENGTH)
      NativeSpill.sortStats(sort, stats)
      def stat(name: String) = stats(NativeSpill.sortStatsIndex(name))
      assert(stat("runs") > 1, "runs spilled")
      assert(stat("spilledBytes") > 0 && stat("spilledLogicalBytes") > stat("spilledBytes"),
        s"compressed runs take less disk than their bytes: ${stats.toSeq}")
      assert(stat("mergePasses") >= 1, "merge passes")
      val five = Array.fill(6)(-7L)
      NativeSpill.sortStats(sort, five)
      assert(five(5) != -7L && five.forall(_ != -7L))
      NativeSpill.releaseSort(sort)
    } finally NativeSpill.releasePlan(plan)
  }
}
