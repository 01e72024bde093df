package spillway

import java.nio.{ByteBuffer, ByteOrder}
import java.nio.file.{Files, Path, Paths}
import java.util.concurrent.{CountDownLatch, TimeUnit}
import java.util.concurrent.atomic.AtomicReference

import scala.util.Random

import org.scalatest.{BeforeAndAfterAll, BeforeAndAfterEach}
import org.scalatest.funsuite.AnyFunSuite

/**
 * The JNI bad-input matrix of docs/reliability.md: every NativeSpill method against null, empty,
 * negative, out-of-range, released, never-issued, wrong-kind and other plans' handles. Each must be
 * the contract's exception — IllegalArgumentException for a bad argument, IllegalStateException for
 * an unknown, released or wrong-kind handle — and must leave every live plan, file and sort exactly
 * as it was.
 *
 * Each test works against a fixture of two live plans: P (one file F holding known bytes, one sort
 * S holding one record) and Q (one file G holding other bytes). After each test the fixture is
 * checked byte for byte, so a refused call that nevertheless wrote, released or reached a live
 * object fails the test even though it threw the right exception.
 *
 * XcheckJniSuite runs this suite again in a child JVM under -Xcheck:jni, which turns JNI misuse on
 * these error paths (a JNI call with an exception pending, a leaked local reference) into a
 * failure. The number of cases is printed at the end ("JNI bad-input matrix: N cases").
 */
class JniBadInputMatrixSuite extends AnyFunSuite with BeforeAndAfterEach with BeforeAndAfterAll {
  private val GiB = 1L << 30

  private var base: Path = _
  private var root: Path = _
  private var p, f, s, q, g, d: Long = 0L
  private val fBytes = TestFiles.pattern(100, 1)
  private val gBytes = TestFiles.pattern(77, 2)
  private val record = batch("key".getBytes("UTF-8") -> "value".getBytes("UTF-8"))

  // Every expectation checked, by exception kind: the figure for docs/reliability.md.
  private var argumentCases = 0
  private var stateCases = 0

  override def beforeAll(): Unit = {
    super.beforeAll()
    NativeLoader.load()
  }

  override def afterAll(): Unit = {
    try {
      println(s"JNI bad-input matrix: ${argumentCases + stateCases} cases " +
        s"($argumentCases IllegalArgumentException, $stateCases IllegalStateException), 0 crashes")
    } finally super.afterAll()
  }

  override def beforeEach(): Unit = {
    base = Files.createTempDirectory("spillway-matrix-")
    root = Files.createDirectory(base.resolve("root"))
    p = NativeSpill.createPlan(Array(root.toString), GiB)
    f = NativeSpill.createTmpFile(p)
    NativeSpill.write(f, ByteBuffer.wrap(fBytes), 0, fBytes.length)
    s = NativeSpill.createSort(p, 1 << 20)
    NativeSpill.sortAdd(s, direct(record), 0, record.length, Long.MaxValue, null)
    q = NativeSpill.createPlan(Array(root.toString), GiB)
    g = NativeSpill.createTmpFile(q)
    NativeSpill.write(g, ByteBuffer.wrap(gBytes), 0, gBytes.length)
    d = NativeSpill.registerLocalDirs(Array(root.toString))
  }

  override def afterEach(): Unit = {
    try assertFixtureIntact()
    finally {
      // A test may have released P or Q on purpose; whatever is left goes now.
      for (plan <- Seq(p, q)) try NativeSpill.releasePlan(plan) catch { case _: IllegalStateException => }
      try NativeSpill.releaseLocalDirs(d) catch { case _: IllegalStateException => }
      val left = TestFiles.spillDirsUnder(Seq(root.toString))
      TestFiles.deleteRecursively(base)
      assert(left.isEmpty, s"plan dirs left after releasing every plan: $left")
    }
  }

  // ---- helpers -----------------------------------------------------------------------------------

  private def direct(bytes: Array[Byte]): ByteBuffer = {
    val b = ByteBuffer.allocateDirect(math.max(1, bytes.length))
    b.put(bytes).clear()
    b.limit(bytes.length)
    b
  }

  private def batch(records: (Array[Byte], Array[Byte])*): Array[Byte] = SortBatch.encode(records)

  private def illegalArgument(what: String)(call: => Any): Unit = {
    val e = withClue(s"$what: ")(intercept[IllegalArgumentException](call))
    assert(e.getMessage != null && e.getMessage.trim.nonEmpty, s"$what: $e has no message")
    argumentCases += 1
  }

  private def illegalState(what: String)(call: => Any): Unit = {
    val e = withClue(s"$what: ")(intercept[IllegalStateException](call))
    assert(e.getMessage != null && e.getMessage.trim.nonEmpty, s"$what: $e has no message")
    stateCases += 1
  }

  private sealed trait Kind
  private case object PlanKind extends Kind
  private case object FileKind extends Kind
  private case object SortKind extends Kind
  private case object DirsKind extends Kind

  /**
   * Every NativeSpill method that takes a handle, with otherwise valid arguments, so that the
   * handle is the only thing wrong with the call.
   */
  private def handleMethods: Seq[(String, Kind, Long => Any)] = Seq(
    ("createTmpFile", PlanKind, h => NativeSpill.createTmpFile(h)),
    ("usedDiskSpace", PlanKind, h => NativeSpill.usedDiskSpace(h)),
    ("createSort", PlanKind, h => NativeSpill.createSort(h, 1 << 20)),
    ("releasePlan", PlanKind, h => NativeSpill.releasePlan(h)),
    ("path", FileKind, h => NativeSpill.path(h)),
    ("write", FileKind, h => NativeSpill.write(h, direct(fBytes), 0, 10)),
    ("releaseTmpFile", FileKind, h => NativeSpill.releaseTmpFile(h)),
    ("releaseSpillFile", FileKind, h => NativeSpill.releaseSpillFile(h)),
    ("sortAdd", SortKind, h => NativeSpill.sortAdd(h, direct(record), 0, record.length, Long.MaxValue, null)),
    ("sortSpill", SortKind, h => NativeSpill.sortSpill(h, false)),
    ("sortSpill(refill)", SortKind, h => NativeSpill.sortSpill(h, true)),
    ("sortMemoryUsed", SortKind, h => NativeSpill.sortMemoryUsed(h)),
    ("sortNext", SortKind, h => NativeSpill.sortNext(h, ByteBuffer.allocateDirect(256), 0, 256)),
    ("sortStats", SortKind, h => NativeSpill.sortStats(h, new Array[Long](5))),
    ("releaseSort", SortKind, h => NativeSpill.releaseSort(h)),
    ("createPlanIn", DirsKind, h => NativeSpill.createPlanIn(h, GiB, GiB)),
    ("releaseLocalDirs", DirsKind, h => NativeSpill.releaseLocalDirs(h)))

  /** `h` is refused by every handle-taking method, or by those expecting one of `kinds`. */
  private def refusedBy(label: String, h: Long, kinds: Set[Kind] = Set(PlanKind, FileKind, SortKind, DirsKind)): Unit =
    for ((name, kind, call) <- handleMethods if kinds(kind)) illegalState(s"$name($label = $h)")(call(h))

  private def fileContent(file: Long): Seq[Byte] = Files.readAllBytes(Paths.get(NativeSpill.path(file))).toSeq

  /** P, F, S, Q, G and D are exactly as beforeEach left them (for the ones a test did not release). */
  private def assertFixtureIntact(): Unit = {
    if (registered(d)) {
      val plan = NativeSpill.createPlanIn(d, GiB, GiB)
      assert(NativeSpill.path(NativeSpill.createTmpFile(plan)).startsWith(root.toString + "/"), "D's dirs changed")
      NativeSpill.releasePlan(plan)
    }
    if (alive(p)) {
      assert(NativeSpill.usedDiskSpace(p) == fBytes.length)
      assert(fileContent(f) == fBytes.toSeq, "F changed")
      val stats = new Array[Long](NativeSpill.SORT_STATS_LENGTH)
      NativeSpill.sortStats(s, stats)
      val records = stats(NativeSpill.sortStatsIndex("records"))
      assert(records == 1, s"S holds $records records, not 1")
    }
    if (alive(q)) {
      assert(NativeSpill.usedDiskSpace(q) == gBytes.length)
      assert(fileContent(g) == gBytes.toSeq, "G changed")
    }
  }

  private def registered(dirs: Long): Boolean =
    try { NativeSpill.releasePlan(NativeSpill.createPlanIn(dirs, GiB, GiB)); true }
    catch { case _: IllegalStateException => false }

  private def alive(plan: Long): Boolean =
    try { NativeSpill.usedDiskSpace(plan); true }
    catch { case _: IllegalStateException => false }

  // ---- handles -----------------------------------------------------------------------------------

  test("handle 0, small, extreme and random (never issued) handles are refused by every handle-taking method") {
    val random = new Random(6L)
    val forged = Seq(0L, 1L, 2L, 3L, -1L, -2L, Long.MaxValue, Long.MinValue, Int.MaxValue.toLong, Int.MinValue.toLong) ++
      Seq.fill(16)(random.nextLong())
    forged.foreach(h => refusedBy("forged", h))
  }

  test("near misses of live handles (one bit flipped, plus or minus one) are never issued handles") {
    // Handles are sparse: a handle corrupted by one bit, or an off-by-one, must miss every table.
    for ((label, live) <- Seq("plan" -> p, "file" -> f, "sort" -> s, "dirs" -> d); flip <- Seq(0, 1, 7, 31, 32, 62, 63)) {
      refusedBy(s"$label with bit $flip flipped", live ^ (1L << flip))
    }
    for ((label, live) <- Seq("plan" -> p, "file" -> f, "sort" -> s, "dirs" -> d); delta <- Seq(-1L, 1L)) {
      refusedBy(s"$label ${if (delta > 0) "+" else "-"} 1", live + delta)
    }
  }

  test("a live handle of the wrong kind is refused: plan as file or sort, file as plan or sort, sort as plan or file") {
    refusedBy("plan handle", p, Set(FileKind, SortKind, DirsKind))
    refusedBy("file handle", f, Set(PlanKind, SortKind, DirsKind))
    refusedBy("sort handle", s, Set(PlanKind, FileKind, DirsKind))
    refusedBy("dirs registration", d, Set(PlanKind, FileKind, SortKind))
    refusedBy("other plan's file handle", g, Set(PlanKind, SortKind, DirsKind))
    refusedBy("other plan's handle", q, Set(FileKind, SortKind, DirsKind))
    // afterEach checks that none of these released or changed P, F, S, Q or G.
  }

  test("a released file is refused by the file methods, its plan and the other plan are untouched") {
    val extra = NativeSpill.createTmpFile(p)
    NativeSpill.write(extra, direct(fBytes), 0, 50)
    NativeSpill.releaseTmpFile(extra)
    refusedBy("released file", extra)
    assert(NativeSpill.usedDiskSpace(p) == fBytes.length)
  }

  test("a released sort is refused by the sort methods (double release included)") {
    val other = NativeSpill.createSort(p, 1 << 20)
    NativeSpill.releaseSort(other)
    refusedBy("released sort", other)
  }

  test("a released registration of local dirs is refused (double release included); plans made from it live on") {
    val plan = NativeSpill.createPlanIn(d, GiB, GiB)
    NativeSpill.releaseLocalDirs(d)
    refusedBy("released dirs registration", d)
    val file = NativeSpill.createTmpFile(plan)
    assert(NativeSpill.write(file, direct(fBytes), 0, 10) == 10)
    NativeSpill.releasePlan(plan)
  }

  test("a released plan is refused by every method, and so are its files and sorts (double release included)") {
    NativeSpill.releasePlan(p)
    refusedBy("released plan", p)
    refusedBy("file of a released plan", f)
    refusedBy("sort of a released plan", s)
    assert(!alive(p))
  }

  test("plan A's handles after A's release never reach plan B, which lives on, nor plans created later") {
    // P is A, Q is B. A's handles are all stale now; every use must fail without touching B.
    val fPath = NativeSpill.path(f)
    NativeSpill.releasePlan(p)
    assert(!TestFiles.exists(fPath))
    refusedBy("A's plan", p)
    refusedBy("A's file", f)
    refusedBy("A's sort", s)
    // New plans and files are issued meanwhile: a stale handle must not come back as one of them.
    val later = (1 to 64).map { _ =>
      val plan = NativeSpill.createPlan(Array(root.toString), GiB)
      val file = NativeSpill.createTmpFile(plan)
      val sort = NativeSpill.createSort(plan, 1 << 16)
      assert(!Set(p, f, s).contains(plan) && !Set(p, f, s).contains(file) && !Set(p, f, s).contains(sort))
      (plan, file)
    }
    refusedBy("A's plan after new plans", p)
    refusedBy("A's file after new plans", f)
    refusedBy("A's sort after new plans", s)
    assert(later.forall { case (plan, _) => NativeSpill.usedDiskSpace(plan) == 0 })
    later.foreach { case (plan, _) => NativeSpill.releasePlan(plan) }
    assert(NativeSpill.usedDiskSpace(q) == gBytes.length)
    assert(fileContent(g) == gBytes.toSeq)
  }

  test("releasing a plan while another thread writes to its file: each write succeeds or is an IllegalStateException") {
    // A caller bug the Scala layer's lock prevents, but a direct JNI user can make: the release
    // and the write race inside the library. Neither may crash, corrupt the accounting or throw
    // anything but the contract's exception for a released handle.
    val rounds = 200
    val random = new Random(66L)
    val before = new Array[Long](NativeSpill.STATS_LENGTH)
    NativeSpill.stats(before)
    for (round <- 1 to rounds) {
      val plan = NativeSpill.createPlan(Array(root.toString), GiB)
      val file = NativeSpill.createTmpFile(plan)
      val started = new CountDownLatch(1)
      val failure = new AtomicReference[Throwable]()
      val writer = new Thread(() => {
        val buf = ByteBuffer.allocateDirect(512)
        started.countDown()
        try while (true) NativeSpill.write(file, buf, 0, 512)
        catch { case t: Throwable => failure.set(t) }
      })
      writer.start()
      started.await()
      val spin = random.nextInt(2000)
      var i = 0
      while (i < spin) { i += 1; Thread.onSpinWait() }
      NativeSpill.releasePlan(plan)
      writer.join(TimeUnit.MINUTES.toMillis(1))
      assert(!writer.isAlive, s"round $round: the writer is still writing to a released plan's file")
      withClue(s"round $round: ") {
        assert(failure.get.isInstanceOf[IllegalStateException], s"the writer ended with ${failure.get}")
      }
      stateCases += 1
    }
    val after = new Array[Long](NativeSpill.STATS_LENGTH)
    NativeSpill.stats(after)
    for (name <- Seq("livePlans", "bytesInUse")) {
      val i = NativeSpill.statsIndex(name)
      assert(after(i) == before(i), name)
    }
  }

  // ---- arguments ---------------------------------------------------------------------------------

  test("createPlan, createPlanWithExecutorLimit and registerLocalDirs: null, empty, null element, empty, relative, NUL, unpaired surrogate, duplicate dirs") {
    val r = root.toString
    val badDirs: Seq[(String, Array[String])] = Seq(
      "null array" -> null,
      "empty array" -> Array.empty[String],
      "null element" -> Array[String](null),
      "null after a good dir" -> Array(r, null),
      "empty path" -> Array(""),
      "relative path" -> Array("relative/dir"),
      "dot path" -> Array("."),
      "relative after a good dir" -> Array(r, "rel"),
      "NUL byte" -> Array(s"$r/a\u0000b"),
      "duplicate" -> Array(r, r),
      "duplicate after cleaning" -> Array(r, s"$r/./"),
      "unpaired high surrogate" -> Array(r, s"$r/a\uD800"),
      "unpaired low surrogate" -> Array(s"$r/\uDC00b"),
      "surrogates in the wrong order" -> Array(s"$r/\uDE00\uD83D"),
      "too long a path" -> Array(r, s"$r/${"x" * 40000}"))
    for ((label, dirs) <- badDirs) {
      illegalArgument(s"createPlan($label)")(NativeSpill.createPlan(dirs, GiB))
      illegalArgument(s"createPlanWithExecutorLimit($label)")(NativeSpill.createPlanWithExecutorLimit(dirs, GiB, GiB))
      illegalArgument(s"registerLocalDirs($label)")(NativeSpill.registerLocalDirs(dirs))
    }
    // A refused element is named by its index.
    val e = intercept[IllegalArgumentException](NativeSpill.registerLocalDirs(Array(r, s"$r/z", s"$r/\uD800")))
    assert(e.getMessage.contains("localDirs[2]") && e.getMessage.contains("surrogate"), e.getMessage)
    assert(TestFiles.entriesUnder(root).forall(e => e.startsWith("spillway-") || e.startsWith(".spillway-")))
  }

  test("createPlan and createPlanWithExecutorLimit: negative limits") {
    val dirs = Array(root.toString)
    for (limit <- Seq(-1L, -4096L, Long.MinValue)) {
      illegalArgument(s"createPlan(limit $limit)")(NativeSpill.createPlan(dirs, limit))
      illegalArgument(s"createPlanWithExecutorLimit(limit $limit)")(NativeSpill.createPlanWithExecutorLimit(dirs, limit, GiB))
      illegalArgument(s"createPlanWithExecutorLimit(executor limit $limit)")(NativeSpill.createPlanWithExecutorLimit(dirs, GiB, limit))
    }
  }

  test("out-of-range but valid-looking dirs: a path too long for the OS fails at the first spill with an IOException naming it") {
    val long = root.resolve("x" * 300).resolve("y" * 5000).toString // NAME_MAX and PATH_MAX both exceeded
    val plan = NativeSpill.createPlan(Array(long), GiB)
    try {
      val e = intercept[java.io.IOException](NativeSpill.createTmpFile(plan))
      assert(!e.isInstanceOf[SpillLimitExceededException])
      assert(e.getMessage.contains("x" * 300), e.getMessage.take(500))
      assert(NativeSpill.usedDiskSpace(plan) == 0)
    } finally NativeSpill.releasePlan(plan)
  }

  test("many dirs in one call (4096) are converted without exhausting JNI local references") {
    // Under -Xcheck:jni a native that creates more local references than it ensured is reported.
    val dirs = Array.tabulate(4096)(i => root.resolve(s"d$i").toString)
    Files.createDirectory(Paths.get(dirs(0)))
    val plan = NativeSpill.createPlan(dirs, GiB)
    val files = (1 to 3).map(_ => NativeSpill.createTmpFile(plan)) // missing dirs are skipped
    assert(files.map(NativeSpill.path).forall(_.startsWith(dirs(0) + "/")))
    NativeSpill.releasePlan(plan)
    assert(TestFiles.entriesUnder(Paths.get(dirs(0))).isEmpty)
    illegalArgument("sweepOrphans(4096 dirs, one duplicated)")(NativeSpill.sweepOrphans(dirs :+ dirs(0)))
  }

  test("write: null buffer, negative and out-of-range offset and length (heap and direct buffers)") {
    illegalArgument("write(null)")(NativeSpill.write(f, null, 0, 1))
    for (buf <- Seq(ByteBuffer.allocate(64), ByteBuffer.allocateDirect(64))) {
      buf.limit(32)
      val kind = if (buf.isDirect) "direct" else "heap"
      for ((off, len) <- Seq(-1 -> 1, 0 -> -1, Int.MinValue -> 1, 1 -> Int.MinValue, 0 -> 33, 32 -> 1, 33 -> 0,
          40 -> 1, Int.MaxValue -> 1, 1 -> Int.MaxValue, Int.MaxValue -> Int.MaxValue)) {
        illegalArgument(s"write($kind, $off, $len)")(NativeSpill.write(f, buf, off, len))
      }
    }
    assert(fileContent(f) == fBytes.toSeq)
  }

  test("stats: null or too short an array; longer arrays are fine") {
    illegalArgument("stats(null)")(NativeSpill.stats(null))
    for (n <- Seq(0, 1, NativeSpill.STATS_LENGTH - 1)) illegalArgument(s"stats(long[$n])")(NativeSpill.stats(new Array[Long](n)))
    val longer = Array.fill(NativeSpill.STATS_LENGTH + 3)(-7L)
    NativeSpill.stats(longer)
    assert(longer(0) >= 2, "P and Q are live")
    assert(longer.drop(NativeSpill.STATS_LENGTH).forall(_ == -7L), "stats wrote past its STATS_LENGTH longs")
  }

  test("sweepOrphans: null, empty, null element, empty, relative, NUL and duplicate dirs") {
    val r = root.toString
    for ((label, dirs) <- Seq(
        "null array" -> null, "empty array" -> Array.empty[String], "null element" -> Array[String](null),
        "null after a good dir" -> Array(r, null), "empty path" -> Array(""), "relative" -> Array("rel"),
        "NUL byte" -> Array(s"${r}\u0000"), "duplicate" -> Array(r, r), "unpaired surrogate" -> Array(s"$r/\uD800"))) {
      illegalArgument(s"sweepOrphans($label)")(NativeSpill.sweepOrphans(dirs))
    }
    // P's and Q's dirs live under root and are locked: a valid sweep leaves them.
    assert(NativeSpill.sweepOrphans(Array(r, base.resolve("missing").toString)) == 0)
  }

  test("createSort: zero and negative memory budgets") {
    for (budget <- Seq(0L, -1L, Long.MinValue)) {
      illegalArgument(s"createSort(budget $budget)")(NativeSpill.createSort(p, budget))
    }
  }

  test("sortAdd: null buffer, negative and out-of-range offset and length, a negative limit, a short state; the sort is unchanged") {
    val buf = direct(record)
    illegalArgument("sortAdd(null)")(NativeSpill.sortAdd(s, null, 0, record.length, Long.MaxValue, null))
    for ((off, len) <- Seq(-1 -> record.length, 0 -> -1, 0 -> (record.length + 1), record.length -> 1,
        (record.length + 1) -> 0, Int.MaxValue -> 1, 1 -> Int.MaxValue, Int.MinValue -> 0)) {
      illegalArgument(s"sortAdd($off, $len)")(NativeSpill.sortAdd(s, buf, off, len, Long.MaxValue, null))
    }
    for (limit <- Seq(-1L, Long.MinValue)) {
      illegalArgument(s"sortAdd(limit $limit)")(NativeSpill.sortAdd(s, buf, 0, record.length, limit, null))
    }
    for (state <- Seq(new Array[Long](0), new Array[Long](4))) {
      illegalArgument(s"sortAdd(state of ${state.length})")(NativeSpill.sortAdd(s, buf, 0, record.length, Long.MaxValue, state))
    }
  }

  test("sortNext: null, heap and read-only output buffers, negative and out-of-range offset and length") {
    // sortNext writes into the buffer: only a writable direct buffer can take its output.
    illegalArgument("sortNext(null)")(NativeSpill.sortNext(s, null, 0, 64))
    illegalArgument("sortNext(heap)")(NativeSpill.sortNext(s, ByteBuffer.allocate(64), 0, 64))
    val out = ByteBuffer.allocateDirect(64)
    out.limit(48)
    for ((off, len) <- Seq(-1 -> 8, 0 -> -1, 0 -> 49, 48 -> 1, 49 -> 0, Int.MaxValue -> 1, 1 -> Int.MaxValue)) {
      illegalArgument(s"sortNext($off, $len)")(NativeSpill.sortNext(s, out, off, len))
    }
  }

  test("sortNext: a read-only direct buffer is refused and left unwritten; the record stays in the sort") {
    // GetDirectBufferAddress answers for read-only views too, so the library must check itself.
    val readOnly = ByteBuffer.allocateDirect(64).asReadOnlyBuffer()
    illegalArgument("sortNext(read-only direct)")(NativeSpill.sortNext(s, readOnly, 0, 64))
    assert((0 until 64).forall(readOnly.get(_) == 0), "bytes were written into a read-only buffer")
    val out = ByteBuffer.allocateDirect(64)
    assert(NativeSpill.sortNext(s, out, 0, 64) == record.length, "the refused call consumed the record")
  }

  test("sortStats: null or too short an array") {
    illegalArgument("sortStats(null)")(NativeSpill.sortStats(s, null))
    for (n <- Seq(0, 4)) illegalArgument(s"sortStats(long[$n])")(NativeSpill.sortStats(s, new Array[Long](n)))
  }

  test("after the whole matrix the library still works: the sort returns its record, files take bytes") {
    val out = ByteBuffer.allocateDirect(256).order(ByteOrder.LITTLE_ENDIAN)
    val n = NativeSpill.sortNext(s, out, 0, 256)
    assert(n == record.length)
    assert((0 until n).map(out.get) == record.toSeq)
    assert(NativeSpill.sortNext(s, out, 0, 256) == 0)
    assert(NativeSpill.write(g, direct(gBytes), 0, 10) == 10)
    assert(NativeSpill.usedDiskSpace(q) == gBytes.length + 10)
    NativeSpill.releasePlan(q)
    NativeSpill.releasePlan(p)
  }
}
