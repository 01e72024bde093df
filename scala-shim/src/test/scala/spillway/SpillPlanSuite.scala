package spillway

import java.io.IOException
import java.nio.ByteBuffer
import java.nio.channels.ClosedChannelException
import java.nio.file.{Files, Path}

import scala.util.Using

import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

/**
 * The Scala wrapper over the contract (no Spark): SpillPlan, SpillFile, its stream and channel.
 * Files are in the spill format with lz4 (set for this suite), so sizes on disk differ from the
 * bytes written: usage is checked against what each file reports on disk and the file's real size.
 */
class SpillPlanSuite extends AnyFunSuite with BeforeAndAfterEach {
  private var base: Path = _
  private var roots: Array[String] = _

  override def beforeEach(): Unit = {
    base = Files.createTempDirectory("spillway-plan-")
    roots = Array("a", "b").map(n => Files.createDirectory(base.resolve(n)).toString)
    NativeLoader.load()
    NativeSpill.configureFormat("lz4", 1, false, 128)
  }

  override def afterEach(): Unit = {
    NativeSpill.configureFormat("none", 1, false, 128) // the process-wide format back to the default
    TestFiles.deleteRecursively(base)
  }

  /** Bytes that do not compress: lz4 stores them raw, so each chunk takes more on disk than in memory. */
  private def incompressible(n: Int): Array[Byte] = {
    val b = new Array[Byte](n)
    new java.util.Random(n).nextBytes(b)
    b
  }

  private def readBack(file: SpillFile): Array[Byte] = Using.resource(file.inputStream())(_.readAllBytes())

  test("the output stream writes single bytes, small and large arrays, in order") {
    Using.resource(SpillPlan.create(roots, 1L << 30)) { plan =>
      val file = plan.createSpillFile()
      val small = TestFiles.pattern(1000, 1)
      val large = TestFiles.pattern(200 * 1024, 2) // larger than the 64 KiB buffer: written directly
      Using.resource(file.outputStream()) { out =>
        out.write(7)
        out.write(small)
        out.write(large, 10, large.length - 10)
        out.write(small, 0, 500)
      }
      val expected = Array[Byte](7) ++ small ++ large.drop(10) ++ small.take(500)
      assert(readBack(file).toSeq == expected.toSeq)
      assert(file.bytesWritten == expected.length)
      assert(file.bytesOnDisk < expected.length, "the pattern compresses")
      assert(plan.usedDiskSpace == file.bytesOnDisk)
      assert(TestFiles.size(file.path) == file.bytesOnDisk)
    }
  }

  test("the output stream holds the limit: usage never exceeds it and matches the file") {
    // Room for one 256 KiB chunk of incompressible bytes (stored raw, plus framing), not two.
    val limit = 300 * 1024
    Using.resource(SpillPlan.create(roots, limit)) { plan =>
      val file = plan.createSpillFile()
      val out = file.outputStream()
      val data = incompressible(600 * 1024) // not one piece repeated: lz4 would find the repeats
      val e = intercept[SpillLimitExceededException] {
        data.grouped(10 * 1024).foreach(out.write)
        out.close()
      }
      assert(e.getMessage.contains("spark.spillway.maxTempDirectorySize"))
      assert(plan.usedDiskSpace <= limit)
      assert(TestFiles.size(file.path) == plan.usedDiskSpace)
      assert(file.bytesOnDisk == plan.usedDiskSpace)
      assert(file.bytesOnDisk > 256 * 1024, "the file keeps its whole first chunk")
      assert(file.bytesWritten >= 256 * 1024, "the writes that filled the kept chunk count")
    }
  }

  test("the stream rejects writes after close; close is idempotent and flushes") {
    Using.resource(SpillPlan.create(roots, 1L << 30)) { plan =>
      val file = plan.createSpillFile()
      val out = file.outputStream(16)
      out.write(Array[Byte](1, 2, 3))
      assert(file.bytesWritten == 0) // still in the stream's buffer
      out.close()
      out.close()
      assert(readBack(file).toSeq == Seq[Byte](1, 2, 3))
      intercept[IOException](out.write(4))
    }
  }

  test("the channel writes heap and direct buffers from their position and advances it") {
    Using.resource(SpillPlan.create(roots, 1L << 30)) { plan =>
      val file = plan.createSpillFile()
      val channel = file.channel()
      val data = TestFiles.pattern(100)
      val heap = ByteBuffer.wrap(data).position(10).limit(30)
      val direct = ByteBuffer.allocateDirect(100).put(data).position(50).limit(60)
      assert(channel.write(heap) == 20 && heap.position() == 30)
      assert(channel.write(direct) == 10 && direct.position() == 60)
      assert(channel.write(direct) == 0)
      channel.close()
      assert(!channel.isOpen)
      intercept[ClosedChannelException](channel.write(ByteBuffer.allocate(1)))
      assert(readBack(file).toSeq == (data.slice(10, 30) ++ data.slice(50, 60)).toSeq)
    }
  }

  test("release returns the file's bytes and is idempotent; after the plan's close it is a no-op") {
    val plan = SpillPlan.create(roots, 1L << 30)
    val a = plan.createSpillFile()
    val b = plan.createSpillFile()
    a.write(ByteBuffer.allocate(100), 0, 100)
    b.write(ByteBuffer.allocate(50), 0, 50)
    a.finishWrite()
    b.finishWrite()
    assert(plan.usedDiskSpace == a.bytesOnDisk + b.bytesOnDisk)
    a.release()
    a.release()
    assert(!TestFiles.exists(a.path))
    assert(plan.usedDiskSpace == b.bytesOnDisk && b.bytesOnDisk > 0)
    intercept[IllegalStateException](a.write(ByteBuffer.allocate(1), 0, 1))
    plan.close()
    b.release()
    assert(!TestFiles.exists(b.path))
  }

  test("close is idempotent, deletes everything, and the plan and its files refuse use afterwards") {
    val plan = SpillPlan.create(roots, 1L << 30)
    val file = plan.createSpillFile()
    file.write(ByteBuffer.allocate(10), 0, 10)
    plan.close()
    plan.close()
    assert(plan.isClosed)
    assert(TestFiles.spillDirsUnder(roots.toSeq).isEmpty)
    intercept[IllegalStateException](plan.createSpillFile())
    intercept[IllegalStateException](plan.usedDiskSpace)
    intercept[IllegalStateException](file.write(ByteBuffer.allocate(1), 0, 1))
    intercept[IllegalStateException](file.inputStream())
  }

  test("bad arguments pass through as the contract's exceptions") {
    intercept[IllegalArgumentException](SpillPlan.create(Array("relative"), 1))
    intercept[IllegalArgumentException](SpillPlan.create(roots, -1))
    Using.resource(SpillPlan.create(roots, 1L << 30)) { plan =>
      val file = plan.createSpillFile()
      intercept[IllegalArgumentException](file.write(ByteBuffer.allocate(10), 5, 6))
      assert(file.bytesWritten == 0)
      file.finishWrite()
      assert(readBack(file).isEmpty, "nothing of the refused write reached the file")
    }
  }

  test("(g) unusable local dirs fail at the first spill with an IOException naming them") {
    val missing = Array(base.resolve("gone-1").toString, base.resolve("gone-2").toString)
    Using.resource(SpillPlan.create(missing, 1L << 30)) { plan =>
      val e = intercept[IOException](plan.createSpillFile())
      assert(missing.forall(e.getMessage.contains), e.getMessage)
      assert(missing.forall(d => !TestFiles.exists(d)))
    }
  }

  test("the library's counters count the shim's plans, plans that spilled, dirs, files and bytes") {
    val before = NativeStats.read()
    SpillPlan.create(roots, 1L << 30).close() // never spills
    val planDirs = Using.resource(SpillPlan.create(roots, 1L << 30)) { plan =>
      val files = Seq.fill(3)(plan.createSpillFile())
      files.foreach(f => f.write(ByteBuffer.allocate(1000), 0, 1000))
      files.foreach(_.finishWrite()) // the bytes reach the disk, and the counters, chunk by chunk
      files.map(f => TestFiles.parentOf(f.path)).distinct
    }
    val d = NativeStats.read() - before
    assert(d("plansCreated") == 2 && d("livePlans") == 0 && d("plansSpilled") == 1)
    assert(d("spillFiles") == 3 && d("logicalBytesSpilled") == 3000) // before compression
    assert(d("dirsCreated") == planDirs.size) // one per local dir the plan spilled into
  }
}
