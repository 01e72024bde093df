package spillway

import java.io.IOException
import java.nio.ByteBuffer
import java.nio.file.{Files, Path, Paths}

import scala.util.Random

import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

/**
 * The JNI contract of DESIGN.md, called directly (no Spark): bad inputs get the contract's
 * exceptions and the JVM survives; good inputs do exactly what the contract says on disk.
 * XcheckJniSuite runs this suite again under -Xcheck:jni.
 */
class NativeSpillContractSuite extends AnyFunSuite with BeforeAndAfterEach {
  private val Key = "spark.spillway.maxTempDirectorySize"
  private val GiB = 1L << 30

  private var base: Path = _
  private var rootA: Path = _
  private var rootB: Path = _

  override def beforeEach(): Unit = {
    NativeLoader.load()
    base = Files.createTempDirectory("spillway-contract-")
    rootA = Files.createDirectory(base.resolve("a"))
    rootB = Files.createDirectory(base.resolve("b"))
  }

  override def afterEach(): Unit = TestFiles.deleteRecursively(base)

  private def roots: Array[String] = Array(rootA.toString, rootB.toString)
  private def rootEntries: Seq[String] = TestFiles.entriesUnder(base)
  private def spillDirs: Seq[String] = TestFiles.spillDirsUnder(Seq(rootA.toString, rootB.toString))

  private def illegalArgument(call: => Any): IllegalArgumentException = described(intercept[IllegalArgumentException](call))
  private def illegalState(call: => Any): IllegalStateException = described(intercept[IllegalStateException](call))
  private def described[E <: Throwable](e: E): E = {
    assert(e.getMessage != null && e.getMessage.trim.nonEmpty, s"$e has no message")
    e
  }

  private def fileBytes(file: Long): Array[Byte] = Files.readAllBytes(Paths.get(NativeSpill.path(file)))

  /** Every handle-taking method with `h` as both plan and file handle: each must refuse it. */
  private def assertRefusedEverywhere(h: Long): Unit = {
    val buf = ByteBuffer.allocateDirect(16)
    illegalState(NativeSpill.createTmpFile(h))
    illegalState(NativeSpill.usedDiskSpace(h))
    illegalState(NativeSpill.path(h))
    illegalState(NativeSpill.write(h, buf, 0, 1))
    illegalState(NativeSpill.releaseTmpFile(h))
    illegalState(NativeSpill.releasePlan(h))
  }

  // ---- bad inputs ------------------------------------------------------------------------------

  test("createPlan: a null array is an IllegalArgumentException") {
    illegalArgument(NativeSpill.createPlan(null, GiB))
  }

  test("createPlan: a null element is an IllegalArgumentException") {
    illegalArgument(NativeSpill.createPlan(Array(rootA.toString, null), GiB))
    illegalArgument(NativeSpill.createPlan(Array(null), GiB))
  }

  test("createPlan: an empty array is an IllegalArgumentException") {
    illegalArgument(NativeSpill.createPlan(Array.empty[String], GiB))
  }

  test("createPlan: a relative or empty path is an IllegalArgumentException") {
    illegalArgument(NativeSpill.createPlan(Array("relative/dir"), GiB))
    illegalArgument(NativeSpill.createPlan(Array(rootA.toString, "relative"), GiB))
    illegalArgument(NativeSpill.createPlan(Array(""), GiB))
    assert(rootEntries == Seq("a", "b"))
  }

  test("createPlan: a negative limit is an IllegalArgumentException") {
    illegalArgument(NativeSpill.createPlan(roots, -1))
    illegalArgument(NativeSpill.createPlan(roots, Long.MinValue))
  }

  test("handle 0 is an IllegalStateException on every method") {
    assertRefusedEverywhere(0L)
  }

  test("random and forged handles are IllegalStateExceptions on every method") {
    val random = new Random(20261130L)
    (Seq(-1L, 1L, 2L, Long.MaxValue, Long.MinValue, 0x5eed5eed5eedL) ++ Seq.fill(20)(random.nextLong()))
      .foreach(assertRefusedEverywhere)
  }

  test("a plan handle is not a file handle, and a file handle is not a plan handle") {
    val plan = NativeSpill.createPlan(roots, GiB)
    val file = NativeSpill.createTmpFile(plan)
    val buf = ByteBuffer.allocate(8)
    illegalState(NativeSpill.path(plan))
    illegalState(NativeSpill.write(plan, buf, 0, 8))
    illegalState(NativeSpill.releaseTmpFile(plan))
    illegalState(NativeSpill.createTmpFile(file))
    illegalState(NativeSpill.usedDiskSpace(file))
    illegalState(NativeSpill.releasePlan(file))
    // Both are still intact.
    assert(NativeSpill.write(file, buf, 0, 8) == 8)
    assert(NativeSpill.usedDiskSpace(plan) == 8)
    NativeSpill.releasePlan(plan)
  }

  test("a released plan is an IllegalStateException, double release included") {
    val plan = NativeSpill.createPlan(roots, GiB)
    NativeSpill.releasePlan(plan)
    illegalState(NativeSpill.releasePlan(plan))
    illegalState(NativeSpill.createTmpFile(plan))
    illegalState(NativeSpill.usedDiskSpace(plan))
  }

  test("a released file is an IllegalStateException: write, path and double release") {
    val plan = NativeSpill.createPlan(roots, GiB)
    val file = NativeSpill.createTmpFile(plan)
    val path = NativeSpill.path(file)
    NativeSpill.releaseTmpFile(file)
    assert(!TestFiles.exists(path))
    illegalState(NativeSpill.write(file, ByteBuffer.allocateDirect(4), 0, 4))
    illegalState(NativeSpill.path(file))
    illegalState(NativeSpill.releaseTmpFile(file))
    assert(NativeSpill.usedDiskSpace(plan) == 0)
    NativeSpill.releasePlan(plan)
  }

  test("the files of a released plan are IllegalStateExceptions") {
    val plan = NativeSpill.createPlan(roots, GiB)
    val file = NativeSpill.createTmpFile(plan)
    NativeSpill.releasePlan(plan)
    illegalState(NativeSpill.write(file, ByteBuffer.allocate(4), 0, 4))
    illegalState(NativeSpill.path(file))
    illegalState(NativeSpill.releaseTmpFile(file))
  }

  test("write: a null buffer is an IllegalArgumentException") {
    val plan = NativeSpill.createPlan(roots, GiB)
    val file = NativeSpill.createTmpFile(plan)
    illegalArgument(NativeSpill.write(file, null, 0, 0))
    illegalArgument(NativeSpill.write(file, null, 0, 10))
    assert(NativeSpill.usedDiskSpace(plan) == 0)
    NativeSpill.releasePlan(plan)
  }

  test("write: offset or length outside the buffer's limit is an IllegalArgumentException") {
    val plan = NativeSpill.createPlan(roots, GiB)
    val file = NativeSpill.createTmpFile(plan)
    for (buf <- Seq(ByteBuffer.allocate(100), ByteBuffer.allocateDirect(100))) {
      buf.limit(50).position(7) // bounds are the limit (50), not the capacity (100)
      illegalArgument(NativeSpill.write(file, buf, -1, 10))
      illegalArgument(NativeSpill.write(file, buf, 0, -1))
      illegalArgument(NativeSpill.write(file, buf, Int.MinValue, 1))
      illegalArgument(NativeSpill.write(file, buf, 0, Int.MinValue))
      illegalArgument(NativeSpill.write(file, buf, 0, 51))
      illegalArgument(NativeSpill.write(file, buf, 40, 11))
      illegalArgument(NativeSpill.write(file, buf, 51, 0))
      illegalArgument(NativeSpill.write(file, buf, 60, 10)) // inside the capacity, past the limit
      illegalArgument(NativeSpill.write(file, buf, Int.MaxValue, 10)) // offset + length overflows an int
      illegalArgument(NativeSpill.write(file, buf, 10, Int.MaxValue))
      assert(buf.position() == 7 && buf.limit() == 50)
    }
    assert(NativeSpill.usedDiskSpace(plan) == 0)
    assert(fileBytes(file).isEmpty)
    NativeSpill.releasePlan(plan)
  }

  test("after all the bad inputs the JVM and the library still work") {
    NativeSpill.noop()
    val plan = NativeSpill.createPlan(roots, GiB)
    val file = NativeSpill.createTmpFile(plan)
    assert(NativeSpill.write(file, ByteBuffer.wrap(TestFiles.pattern(10)), 0, 10) == 10)
    assert(NativeSpill.usedDiskSpace(plan) == 10)
    NativeSpill.releasePlan(plan)
    assert(spillDirs.isEmpty)
  }

  // ---- the contract on good inputs -------------------------------------------------------------

  test("createPlan and releasePlan of a plan that never spills touch no filesystem") {
    val before = rootEntries
    val plan = NativeSpill.createPlan(roots, GiB)
    assert(rootEntries == before)
    assert(NativeSpill.usedDiskSpace(plan) == 0)
    assert(rootEntries == before)
    NativeSpill.releasePlan(plan)
    assert(rootEntries == before)
  }

  test("createTmpFile creates the plan's spillway-* dir (0700) in one local dir, and a file (0600) in it") {
    val plan = NativeSpill.createPlan(roots, GiB)
    val file = NativeSpill.createTmpFile(plan)
    val path = NativeSpill.path(file)
    assert(Paths.get(path).isAbsolute)
    assert(spillDirs.size == 1, s"spill dirs: $spillDirs")
    val dir = spillDirs.head
    assert(roots.contains(TestFiles.parentOf(dir)))
    assert(TestFiles.parentOf(path) == dir)
    assert(TestFiles.permissions(dir) == "rwx------")
    assert(Files.isRegularFile(Paths.get(path)))
    assert(TestFiles.permissions(path) == "rw-------")
    assert(TestFiles.size(path) == 0)
    assert(NativeSpill.usedDiskSpace(plan) == 0)
    NativeSpill.releasePlan(plan)
  }

  test("files get distinct paths; releasePlan deletes every file and dir it created and nothing else") {
    val foreignA = Files.write(rootA.resolve("foreign"), Array[Byte](1, 2, 3))
    val foreignB = Files.createDirectory(rootB.resolve("spark-owned"))
    val plan = NativeSpill.createPlan(roots, GiB)
    val files = (1 to 6).map { i =>
      val f = NativeSpill.createTmpFile(plan)
      assert(NativeSpill.write(f, ByteBuffer.wrap(TestFiles.pattern(100 * i, i)), 0, 100 * i) == 100 * i)
      f
    }
    val paths = files.map(NativeSpill.path)
    assert(paths.distinct.size == paths.size)
    assert(paths.forall(TestFiles.exists))
    assert(NativeSpill.usedDiskSpace(plan) == (1 to 6).map(_ * 100).sum)
    NativeSpill.releasePlan(plan)
    assert(paths.forall(p => !TestFiles.exists(p)))
    assert(spillDirs.isEmpty)
    assert(rootEntries == Seq("a", "a/foreign", "b", "b/spark-owned"))
    assert(Files.readAllBytes(foreignA).toSeq == Seq[Byte](1, 2, 3))
    assert(Files.isDirectory(foreignB))
  }

  test("write appends, returns the length and counts the bytes") {
    val plan = NativeSpill.createPlan(roots, GiB)
    val file = NativeSpill.createTmpFile(plan)
    val first = TestFiles.pattern(1000, 1)
    val second = TestFiles.pattern(234, 2)
    assert(NativeSpill.write(file, ByteBuffer.wrap(first), 0, first.length) == 1000)
    assert(NativeSpill.write(file, ByteBuffer.wrap(second), 0, second.length) == 234)
    assert(NativeSpill.write(file, ByteBuffer.wrap(second), 0, 0) == 0)
    assert(NativeSpill.usedDiskSpace(plan) == 1234)
    assert(fileBytes(file).toSeq == (first ++ second).toSeq)
    NativeSpill.releasePlan(plan)
  }

  test("write: offset is an absolute index, the position is not used or changed (heap and direct)") {
    val data = TestFiles.pattern(256, 3)
    val heap = ByteBuffer.wrap(data.clone())
    val direct = ByteBuffer.allocateDirect(256).put(data)
    val plan = NativeSpill.createPlan(roots, GiB)
    for ((buf, name) <- Seq(heap -> "heap", direct -> "direct")) {
      buf.clear().position(5).limit(200)
      val file = NativeSpill.createTmpFile(plan)
      assert(NativeSpill.write(file, buf, 10, 20) == 20, name)
      assert(NativeSpill.write(file, buf, 150, 50) == 50, name) // up to the limit exactly
      assert(NativeSpill.write(file, buf, 200, 0) == 0, name) // empty, at the limit
      assert(buf.position() == 5 && buf.limit() == 200, name)
      assert(fileBytes(file).toSeq == (data.slice(10, 30) ++ data.slice(150, 200)).toSeq, name)
    }
    assert(NativeSpill.usedDiskSpace(plan) == 140)
    NativeSpill.releasePlan(plan)
  }

  test("write: read-only and sliced buffers (index 0 is the slice's first byte)") {
    val data = TestFiles.pattern(128, 4)
    val plan = NativeSpill.createPlan(roots, GiB)
    val readOnlyHeap = ByteBuffer.wrap(data.clone()).asReadOnlyBuffer()
    val readOnlyDirect = ByteBuffer.allocateDirect(128).put(data).flip().asReadOnlyBuffer()
    val heapSlice = ByteBuffer.wrap(data.clone()).position(32).slice() // arrayOffset 32
    val directSlice = ByteBuffer.allocateDirect(128).put(data).position(32).slice()
    assert(readOnlyHeap.isReadOnly && heapSlice.arrayOffset() == 32)
    for ((buf, expected) <- Seq(
        readOnlyHeap -> data.slice(16, 48),
        readOnlyDirect -> data.slice(16, 48),
        heapSlice -> data.slice(48, 80),
        directSlice -> data.slice(48, 80))) {
      val file = NativeSpill.createTmpFile(plan)
      assert(NativeSpill.write(file, buf, 16, 32) == 32)
      assert(fileBytes(file).toSeq == expected.toSeq, s"$buf")
    }
    illegalArgument(NativeSpill.write(NativeSpill.createTmpFile(plan), heapSlice, 90, 10)) // slice limit is 96
    NativeSpill.releasePlan(plan)
  }

  test("releaseTmpFile deletes the file and returns its bytes to the plan") {
    val plan = NativeSpill.createPlan(roots, 1000)
    val a = NativeSpill.createTmpFile(plan)
    val b = NativeSpill.createTmpFile(plan)
    NativeSpill.write(a, ByteBuffer.allocate(600), 0, 600)
    NativeSpill.write(b, ByteBuffer.allocate(300), 0, 300)
    assert(NativeSpill.usedDiskSpace(plan) == 900)
    val pathA = NativeSpill.path(a)
    NativeSpill.releaseTmpFile(a)
    assert(!TestFiles.exists(pathA))
    assert(NativeSpill.usedDiskSpace(plan) == 300)
    // The returned bytes are available again under the limit.
    assert(NativeSpill.write(b, ByteBuffer.allocate(700), 0, 700) == 700)
    assert(NativeSpill.usedDiskSpace(plan) == 1000)
    NativeSpill.releasePlan(plan)
  }

  test("a write over the limit is a SpillLimitExceededException naming limit, usage, request and key; all or nothing") {
    val plan = NativeSpill.createPlan(roots, 1000)
    val a = NativeSpill.createTmpFile(plan)
    val b = NativeSpill.createTmpFile(plan)
    assert(NativeSpill.write(a, ByteBuffer.allocate(600), 0, 600) == 600)
    val e = intercept[SpillLimitExceededException](NativeSpill.write(b, ByteBuffer.allocateDirect(555), 0, 555))
    assert(e.isInstanceOf[IOException])
    val message = e.getMessage
    for (part <- Seq("1000", "600", "555", Key)) assert(message.contains(part), s"'$part' not in: $message")
    assert(NativeSpill.usedDiskSpace(plan) == 600)
    assert(fileBytes(b).isEmpty)
    // Exactly up to the limit is allowed; one byte more is not.
    assert(NativeSpill.write(b, ByteBuffer.allocate(400), 0, 400) == 400)
    intercept[SpillLimitExceededException](NativeSpill.write(a, ByteBuffer.allocate(1), 0, 1))
    assert(NativeSpill.usedDiskSpace(plan) == 1000)
    assert(fileBytes(a).length == 600 && fileBytes(b).length == 400)
    NativeSpill.releasePlan(plan)
  }

  test("a limit of 0 allows files but no bytes") {
    val plan = NativeSpill.createPlan(roots, 0)
    val file = NativeSpill.createTmpFile(plan)
    assert(NativeSpill.write(file, ByteBuffer.allocate(1), 0, 0) == 0)
    intercept[SpillLimitExceededException](NativeSpill.write(file, ByteBuffer.allocate(1), 0, 1))
    assert(NativeSpill.usedDiskSpace(plan) == 0)
    NativeSpill.releasePlan(plan)
  }

  test("plans have separate dirs and separate limits") {
    val p1 = NativeSpill.createPlan(roots, 1000)
    val p2 = NativeSpill.createPlan(roots, 1000)
    val f1 = NativeSpill.createTmpFile(p1)
    val f2 = NativeSpill.createTmpFile(p2)
    assert(NativeSpill.write(f1, ByteBuffer.allocate(800), 0, 800) == 800)
    assert(NativeSpill.write(f2, ByteBuffer.allocate(800), 0, 800) == 800)
    assert(TestFiles.parentOf(NativeSpill.path(f1)) != TestFiles.parentOf(NativeSpill.path(f2)))
    assert(spillDirs.size == 2)
    NativeSpill.releasePlan(p1)
    assert(TestFiles.exists(NativeSpill.path(f2)))
    assert(spillDirs.size == 1)
    NativeSpill.releasePlan(p2)
    assert(spillDirs.isEmpty)
  }

  test("(g) a plan whose local dirs are all unusable fails only at its first spill, with an IOException naming them") {
    val missing = base.resolve("missing").toString
    val notADir = Files.write(base.resolve("not-a-dir"), Array[Byte](1)).toString
    val before = rootEntries
    val plan = NativeSpill.createPlan(Array(missing, notADir), GiB)
    assert(rootEntries == before)
    val e = intercept[IOException](NativeSpill.createTmpFile(plan))
    assert(!e.isInstanceOf[SpillLimitExceededException])
    assert(e.getMessage.contains(missing) && e.getMessage.contains(notADir), e.getMessage)
    assert(rootEntries == before)
    assert(NativeSpill.usedDiskSpace(plan) == 0)
    NativeSpill.releasePlan(plan)
  }

  test("noop can be called") {
    (1 to 1000).foreach(_ => NativeSpill.noop())
  }
}
