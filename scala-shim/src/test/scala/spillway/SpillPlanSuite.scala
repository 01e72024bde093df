package spillway

import java.io.IOException
import java.nio.ByteBuffer
import java.nio.channels.ClosedChannelException
import java.nio.file.{Files, Path}

import scala.util.Using

import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

/** The Scala wrapper over the contract (no Spark): SpillPlan, SpillFile, its stream and channel. */
class SpillPlanSuite extends AnyFunSuite with BeforeAndAfterEach {
  private var base: Path = _
  private var roots: Array[String] = _

  override def beforeEach(): Unit = {
    base = Files.createTempDirectory("spillway-plan-")
    roots = Array("a", "b").map(n => Files.createDirectory(base.resolve(n)).toString)
  }

  override def afterEach(): Unit = TestFiles.deleteRecursively(base)

  private def readBack(file: SpillFile): Array[Byte] = Using.resource(file.inputStream())(_.readAllBytes())

  test("the output stream writes single bytes, small and large arrays, in order") {
    Using.resource(SpillPlan.create(roots, 1L << 30)) { plan =>
      val file = plan.createTmpFile()
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
      assert(plan.usedDiskSpace == expected.length)
    }
  }

  test("the output stream holds the limit: usage never exceeds it and matches the file") {
    Using.resource(SpillPlan.create(roots, 100 * 1024)) { plan =>
      val file = plan.createTmpFile()
      val out = file.outputStream()
      val chunk = TestFiles.pattern(10 * 1024)
      val e = intercept[SpillLimitExceededException] {
        (1 to 20).foreach(_ => out.write(chunk))
        out.close()
      }
      assert(e.getMessage.contains("spark.spillway.maxTempDirectorySize"))
      assert(plan.usedDiskSpace <= 100 * 1024)
      assert(TestFiles.size(file.path) == plan.usedDiskSpace)
      assert(file.bytesWritten == plan.usedDiskSpace)
    }
  }

  test("the stream rejects writes after close; close is idempotent and flushes") {
    Using.resource(SpillPlan.create(roots, 1L << 30)) { plan =>
      val file = plan.createTmpFile()
      val out = file.outputStream(16)
      out.write(Array[Byte](1, 2, 3))
      assert(TestFiles.size(file.path) == 0) // still buffered
      out.close()
      out.close()
      assert(readBack(file).toSeq == Seq[Byte](1, 2, 3))
      intercept[IOException](out.write(4))
    }
  }

  test("the channel writes heap and direct buffers from their position and advances it") {
    Using.resource(SpillPlan.create(roots, 1L << 30)) { plan =>
      val file = plan.createTmpFile()
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
    val a = plan.createTmpFile()
    val b = plan.createTmpFile()
    a.write(ByteBuffer.allocate(100), 0, 100)
    b.write(ByteBuffer.allocate(50), 0, 50)
    a.release()
    a.release()
    assert(!TestFiles.exists(a.path))
    assert(plan.usedDiskSpace == 50)
    intercept[IllegalStateException](a.write(ByteBuffer.allocate(1), 0, 1))
    plan.close()
    b.release()
    assert(!TestFiles.exists(b.path))
  }

  test("close is idempotent, deletes everything, and the plan and its files refuse use afterwards") {
    val plan = SpillPlan.create(roots, 1L << 30)
    val file = plan.createTmpFile()
    file.write(ByteBuffer.allocate(10), 0, 10)
    plan.close()
    plan.close()
    assert(plan.isClosed)
    assert(TestFiles.spillDirsUnder(roots.toSeq).isEmpty)
    intercept[IllegalStateException](plan.createTmpFile())
    intercept[IllegalStateException](plan.usedDiskSpace)
    intercept[IllegalStateException](file.write(ByteBuffer.allocate(1), 0, 1))
    intercept[IllegalStateException](file.inputStream())
  }

  test("bad arguments pass through as the contract's exceptions") {
    intercept[IllegalArgumentException](SpillPlan.create(Array("relative"), 1))
    intercept[IllegalArgumentException](SpillPlan.create(roots, -1))
    Using.resource(SpillPlan.create(roots, 1L << 30)) { plan =>
      val file = plan.createTmpFile()
      intercept[IllegalArgumentException](file.write(ByteBuffer.allocate(10), 5, 6))
      assert(plan.usedDiskSpace == 0)
    }
  }

  test("(g) unusable local dirs fail at the first spill with an IOException naming them") {
    val missing = Array(base.resolve("gone-1").toString, base.resolve("gone-2").toString)
    Using.resource(SpillPlan.create(missing, 1L << 30)) { plan =>
      val e = intercept[IOException](plan.createTmpFile())
      assert(missing.forall(e.getMessage.contains), e.getMessage)
      assert(missing.forall(d => !TestFiles.exists(d)))
    }
  }

  test("metrics count plans, plans that spilled, dirs, files and bytes") {
    val before = SpillwayMetrics.snapshot()
    SpillPlan.create(roots, 1L << 30).close() // never spills
    val planDirs = Using.resource(SpillPlan.create(roots, 1L << 30)) { plan =>
      val files = Seq.fill(3)(plan.createTmpFile())
      files.foreach(f => f.write(ByteBuffer.allocate(1000), 0, 1000))
      files.map(f => TestFiles.parentOf(f.path)).distinct
    }
    val d = SpillwayMetrics.snapshot() - before
    assert(d.plansCreated == 2 && d.plansReleased == 2 && d.plansSpilled == 1)
    assert(d.filesCreated == 3 && d.bytesWritten == 3000)
    assert(d.dirsCreated == planDirs.size) // one per local dir the plan spilled into
  }
}
