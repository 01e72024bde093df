package spillway

import java.io.IOException
import java.nio.ByteBuffer
import java.nio.file.{Files, Path, Paths}
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.{AtomicBoolean, AtomicInteger}

import scala.util.Random

import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

/**
 * The JNI contract (NativeSpill's Javadoc), called directly (no Spark): bad inputs get the contract's
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

  test("after a burst of bad inputs the JVM and the library still work") {
    // Its own bad inputs, so that it holds whichever tests ran before it.
    for (_ <- 1 to 100) {
      illegalArgument(NativeSpill.createPlan(null, GiB))
      illegalArgument(NativeSpill.createPlan(Array(rootA.toString, null), GiB))
      assertRefusedEverywhere(0L)
      val bad = NativeSpill.createPlan(roots, GiB)
      val badFile = NativeSpill.createTmpFile(bad)
      illegalArgument(NativeSpill.write(badFile, null, 0, 10))
      illegalArgument(NativeSpill.write(badFile, ByteBuffer.allocate(4), 2, 4))
      NativeSpill.releasePlan(bad)
      assertRefusedEverywhere(badFile)
    }
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

  // ---- local dirs: registration, and conversion of the String[] ------------------------------

  test("registerLocalDirs: plans from the registration spill into its dirs; releasing it leaves them working") {
    val before = rootEntries
    val dirs = NativeSpill.registerLocalDirs(roots)
    val plans = (1 to 3).map(_ => NativeSpill.createPlanIn(dirs, GiB, Long.MaxValue))
    assert(rootEntries == before, "registering and creating plans touch no filesystem")
    NativeSpill.releaseLocalDirs(dirs)
    for (plan <- plans) {
      val file = NativeSpill.createTmpFile(plan)
      assert(roots.contains(TestFiles.parentOf(TestFiles.parentOf(NativeSpill.path(file)))))
      assert(NativeSpill.write(file, ByteBuffer.allocate(10), 0, 10) == 10)
      NativeSpill.releasePlan(plan)
    }
    assert(spillDirs.isEmpty)
    illegalState(NativeSpill.createPlanIn(dirs, GiB, Long.MaxValue))
    illegalState(NativeSpill.releaseLocalDirs(dirs))
  }

  test("createPlanIn: limits are the plan's own, negative ones refused") {
    val dirs = NativeSpill.registerLocalDirs(roots)
    try {
      illegalArgument(NativeSpill.createPlanIn(dirs, -1, Long.MaxValue))
      illegalArgument(NativeSpill.createPlanIn(dirs, GiB, -1))
      val plan = NativeSpill.createPlanIn(dirs, 100, Long.MaxValue)
      val file = NativeSpill.createTmpFile(plan)
      intercept[SpillLimitExceededException](NativeSpill.write(file, ByteBuffer.allocate(101), 0, 101))
      NativeSpill.releasePlan(plan)
    } finally NativeSpill.releaseLocalDirs(dirs)
  }

  test("a thread flipping arr(0) between a dir and a relative path never gets a plan for the relative path") {
    // What is validated must be what is used: each element is read once. A relative String that
    // was in the array while another thread's call succeeded must still be refused afterwards.
    val relative = Array.tabulate(4)(i => s"relative-dir-$i")
    val arr = Array(rootA.toString, rootB.toString)
    val stop = new AtomicBoolean(false)
    val flips = new AtomicInteger(0)
    val mutator = new Thread(() => {
      var i = 0
      while (!stop.get()) {
        arr(0) = if (i % 2 == 0) relative((i / 2) % relative.length) else rootA.toString
        i += 1
        flips.set(i)
      }
    })
    mutator.setDaemon(true)
    mutator.start()
    var succeeded, refused = 0
    try {
      // The old dir cache gave a plan for a relative path after 7 to 1,900 rounds here.
      for (round <- 1 to 20000) {
        val call: () => Long =
          if (round % 2 == 0) () => NativeSpill.createPlan(arr, GiB)
          else () => NativeSpill.registerLocalDirs(arr)
        try {
          val h = call()
          succeeded += 1
          if (round % 2 == 1) NativeSpill.releaseLocalDirs(h)
          else {
            if (round % 100 == 0) { // where its files go, now and then (the filesystem is slow)
              val path = NativeSpill.path(NativeSpill.createTmpFile(h))
              assert(roots.contains(TestFiles.parentOf(TestFiles.parentOf(path))), path)
            }
            NativeSpill.releasePlan(h)
          }
        } catch {
          case e: IllegalArgumentException =>
            assert(e.getMessage.contains("relative"), e.getMessage)
            refused += 1
        }
        for (rel <- relative) {
          illegalArgument(NativeSpill.createPlan(Array(rel, rootB.toString), GiB))
          illegalArgument(NativeSpill.registerLocalDirs(Array(rel, rootB.toString)))
        }
      }
    } finally {
      stop.set(true)
      mutator.join(TimeUnit.SECONDS.toMillis(30))
    }
    assert(flips.get() > 0 && succeeded > 0 && refused > 0, s"the race never ran: $succeeded succeeded, $refused refused")
    info(s"$succeeded calls succeeded, $refused were refused, ${flips.get()} flips")
    assert(spillDirs.isEmpty)
    assert(rootEntries == Seq("a", "b"))
  }

  test("more than 32 createPlan calls with freshly built dir strings (local references under -Xcheck:jni)") {
    // XcheckJniSuite runs this under -Xcheck:jni, which reports a native holding more than 32
    // local references at once.
    for (i <- 1 to 40) {
      val fresh = Array.fill(33)(new String(rootA.toString + "/")) ++ Array(new String(rootB.toString))
      illegalArgument(NativeSpill.createPlan(fresh, GiB)) // a duplicate: every element read first
      // Two dirs, as in an executor: the removed dir cache compared each call with every cached
      // set of the same size, keeping a local reference per set.
      val dirs = Array.tabulate(2)(j => base.resolve(s"fresh-$i-$j").toString)
      NativeSpill.releasePlan(NativeSpill.createPlan(dirs, GiB))
      NativeSpill.releaseLocalDirs(NativeSpill.registerLocalDirs(dirs))
    }
  }

  test("65,600 dirs: createPlan, registerLocalDirs and sweepOrphans work, and refusals still throw") {
    // Past the 65,528 local references a JNI frame can be given: nothing may fail silently.
    val n = 65600
    val many = base.resolve("many")
    val dirs = Array.tabulate(n)(i => many.resolve(s"d$i").toString)
    Files.createDirectories(Paths.get(dirs(n - 1)))
    val plan = NativeSpill.createPlan(dirs, GiB)
    assert(plan != 0)
    assert(NativeSpill.usedDiskSpace(plan) == 0)
    // Only the last dir exists: the plan's file lands there.
    assert(NativeSpill.path(NativeSpill.createTmpFile(plan)).startsWith(dirs(n - 1) + "/"))
    NativeSpill.releasePlan(plan)
    val registered = NativeSpill.registerLocalDirs(dirs)
    val fromRegistration = NativeSpill.createPlanIn(registered, GiB, Long.MaxValue)
    NativeSpill.releasePlan(fromRegistration)
    NativeSpill.releaseLocalDirs(registered)
    // An orphan (a plan dir whose owner lock nobody holds) in the last dir: the sweep must find it.
    Files.createDirectory(Paths.get(dirs(n - 1), "spillway-orphan"))
    Files.createFile(Paths.get(dirs(n - 1), ".spillway-orphan.owner"))
    assert(NativeSpill.sweepOrphans(dirs) == 1)
    assert(TestFiles.entriesUnder(Paths.get(dirs(n - 1))).isEmpty)
    val e = illegalArgument(NativeSpill.createPlan(dirs :+ dirs(7), GiB))
    assert(e.getMessage.contains("#7") && e.getMessage.contains(s"#$n"), e.getMessage)
    illegalArgument(NativeSpill.sweepOrphans(dirs :+ "relative"))
    illegalArgument(NativeSpill.registerLocalDirs(dirs.updated(n - 2, null)))
  }

  test("a dir with an unpaired UTF-16 surrogate is refused, never mapped onto another dir") {
    // A lenient UTF-8 encoder writes '?' (or U+FFFD) for the lone surrogate: "lone-" + U+D800
    // would become lone-?, another dir.
    val lookalike = Files.createDirectory(base.resolve("lone-?"))
    val lone = base.resolve("lone-").toString + "\uD800"
    for (dirs <- Seq(Array(lone), Array(rootA.toString, lone), Array(base.resolve("x").toString + "\uDC00y"))) {
      val index = dirs.length - 1
      for (call <- Seq[() => Any](
          () => NativeSpill.createPlan(dirs, GiB), () => NativeSpill.createPlanWithExecutorLimit(dirs, GiB, GiB),
          () => NativeSpill.registerLocalDirs(dirs), () => NativeSpill.sweepOrphans(dirs))) {
        val e = illegalArgument(call())
        assert(e.getMessage.contains(s"[$index]") && e.getMessage.contains("surrogate"), e.getMessage)
      }
    }
    assert(TestFiles.entriesUnder(lookalike).isEmpty)
    // A valid pair is a real character, used exactly.
    val emoji = Files.createDirectory(base.resolve("pair-\uD83D\uDE00"))
    val plan = NativeSpill.createPlan(Array(emoji.toString), GiB)
    val path = NativeSpill.path(NativeSpill.createTmpFile(plan))
    assert(path.startsWith(emoji.toString + "/"), path)
    assert(Files.exists(Paths.get(path)))
    NativeSpill.releasePlan(plan)
    assert(TestFiles.entriesUnder(emoji).isEmpty)
  }

  test("a heap buffer of 3 MiB + 5 bytes is written whole, in order, through the bounded copy") {
    val data = TestFiles.pattern((3 << 20) + 5, 9)
    val plan = NativeSpill.createPlan(roots, GiB)
    for (buf <- Seq(ByteBuffer.wrap(data), ByteBuffer.wrap(data).asReadOnlyBuffer())) {
      val file = NativeSpill.createTmpFile(plan)
      assert(NativeSpill.write(file, buf, 3, data.length - 3) == data.length - 3)
      assert(java.util.Arrays.equals(fileBytes(file), data.drop(3)), s"$buf")
    }
    NativeSpill.releasePlan(plan)
  }

  test("a 320 MiB heap-buffer write with the address space 128 MiB above its size does not kill the JVM") {
    // Go's allocator aborts the whole process ("fatal error: out of memory", exit 134) when the
    // address space runs out: nothing the library does may allocate in proportion to a write.
    val child = ChildJvm.start(classOf[HeapWriteChild].getName.stripSuffix("$"), Seq("-Xmx512m", "-XX:+UseSerialGC", s"-XX:ErrorFile=$base/hs_err_%p.log"), // a crash report goes with base
      Seq(rootA.toString))
    try {
      child.awaitLine("READY")
      val vmSize = Files.readAllLines(Paths.get(s"/proc/${child.pid}/status")).toArray.map(_.toString)
        .collectFirst { case l if l.startsWith("VmSize:") => l.split("\\s+")(1).toLong * 1024 }
        .getOrElse(fail("no VmSize in /proc/<child>/status"))
      val limit = vmSize + (128L << 20)
      val prlimit = new ProcessBuilder("prlimit", s"--pid=${child.pid}", s"--as=$limit").redirectErrorStream(true).start()
      val prlimitOutput = new String(prlimit.getInputStream.readAllBytes())
      assert(prlimit.waitFor(30, TimeUnit.SECONDS) && prlimit.exitValue() == 0, s"prlimit: $prlimitOutput")
      child.send("go")
      val exit = child.waitFor(300)
      val output = child.output
      withClue(s"child (address space limited to $limit bytes) output:\n$output\n") {
        assert(exit == 0)
        assert(!output.contains("fatal error"))
        val write = output.linesIterator.find(_.startsWith("write:")).getOrElse(fail("no write: line"))
        assert(write == s"write: wrote ${HeapWriteChild.Size}" || write.startsWith("write: threw java.io.IOException"))
        val sortAdd = output.linesIterator.find(_.startsWith("sortAdd:")).getOrElse(fail("no sortAdd: line"))
        // The copy of a 320 MiB heap batch cannot fit in 128 MiB: refused, not fatal.
        assert(sortAdd.startsWith("sortAdd: threw java.lang.OutOfMemoryError: spillway: out of memory"))
        assert(output.contains("released"))
        info(s"$write; $sortAdd")
      }
    } finally child.destroy()
    assert(spillDirs.isEmpty)
  }
}
