package spillway

import java.nio.ByteBuffer
import java.nio.file.{Files, Path}
import java.util.concurrent.{ConcurrentHashMap, ConcurrentLinkedQueue, CountDownLatch, TimeUnit}
import java.util.concurrent.atomic.{AtomicBoolean, AtomicInteger}

import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

/**
 * createPlan(String[]) recognises in Java the lists the library accepted before (DirListCache),
 * through the real library. What is checked is where each plan's files land: always in the dirs
 * the array holds at the call. The JVM's own cache (NativeSpill.createPlan) is shared with every
 * other suite and may be full, so the tests that need a hit or a miss for sure use a cache of
 * their own; both run the same code.
 */
class DirListCacheSuite extends AnyFunSuite with BeforeAndAfterEach {
  private val GiB = 1L << 30

  private var base: Path = _
  private var roots: Seq[String] = _ // a, b, c, d

  override def beforeEach(): Unit = {
    NativeLoader.load()
    base = Files.createTempDirectory("spillway-dirlists-")
    roots = Seq("a", "b", "c", "d").map(n => Files.createDirectory(base.resolve(n)).toString)
  }

  override def afterEach(): Unit = TestFiles.deleteRecursively(base)

  private def a = roots(0)
  private def b = roots(1)

  /** A String equal to s that is not s: a caller building its list again. */
  private def copyOf(s: String): String = new String(s.toCharArray)

  /** The local dir the plan's first spill file lands in; the plan is released. */
  private def firstFileRoot(plan: Long): String =
    try TestFiles.parentOf(TestFiles.parentOf(NativeSpill.path(NativeSpill.createTmpFile(plan))))
    finally NativeSpill.releasePlan(plan)

  private def message(call: => Any): String = intercept[IllegalArgumentException](call).getMessage

  /** Bytes in the live files of all plans of this JVM (what an executor limit counts). */
  private def bytesInUse(): Long = {
    val stats = new Array[Long](NativeSpill.STATS_LENGTH)
    NativeSpill.stats(stats)
    stats(NativeSpill.statsIndex("bytesInUse"))
  }

  /** Runs body(i) for i in [0, n) on n threads started at once; the first failure is this call's. */
  private def onThreads(n: Int)(body: Int => Unit): Unit = {
    val failures = new ConcurrentLinkedQueue[Throwable]()
    val go = new CountDownLatch(1)
    val threads = (0 until n).map { i =>
      val t = new Thread(() => {
        go.await()
        try body(i)
        catch { case e: Throwable => failures.add(e) }
      })
      t.start()
      t
    }
    go.countDown()
    threads.foreach(_.join(TimeUnit.SECONDS.toMillis(120)))
    assert(threads.forall(!_.isAlive), "a thread did not finish in 120 s")
    Option(failures.peek()).foreach(e => throw e)
  }

  test("a caller that puts other Strings in its array gets plans in the new dirs, never the old ones") {
    val own = new DirListCache(64, 32 << 10)
    val shared: (Array[String]) => Long = NativeSpill.createPlan(_, GiB)
    val cached: (Array[String]) => Long = own.createPlan(_, GiB, Long.MaxValue)
    for ((create, label) <- Seq(shared -> "NativeSpill.createPlan", cached -> "a cache of its own")) {
      val arr = Array(a)
      val steps = Seq(
        (() => (), a), // the first call misses, the second hits
        (() => arr(0) = b, b), // another String, other content
        (() => arr(0) = copyOf(a), a), // back to a list seen before, in a new String
        (() => arr(0) = copyOf(b), b), // the same content as the last list, in a new String
        (() => arr(0) = a, a))
      for (((mutate, want), i) <- steps.zipWithIndex) {
        mutate()
        for (call <- 1 to 3) assert(firstFileRoot(create(arr)) == want, s"$label, step $i, call $call")
      }
    }
    assert(own.size() == 2)
    assert(own.find(Array(a)) != 0 && own.find(Array(copyOf(b))) != 0 && own.find(Array(roots(2))) == 0)
  }

  test("a list of several dirs: a plan's files go only to the dirs the array holds at the call") {
    val own = new DirListCache(64, 32 << 10)
    val arr = Array(a, b)
    def landings(plan: Long): Set[String] =
      try { (1 to 8).map(_ => TestFiles.parentOf(TestFiles.parentOf(NativeSpill.path(NativeSpill.createTmpFile(plan))))).toSet }
      finally NativeSpill.releasePlan(plan)
    assert(landings(own.createPlan(arr, GiB, Long.MaxValue)) == Set(a, b))
    arr(1) = roots(2)
    assert(own.find(arr) == 0)
    assert(landings(own.createPlan(arr, GiB, Long.MaxValue)) == Set(a, roots(2)))
    arr(0) = roots(3)
    assert(landings(NativeSpill.createPlan(arr, GiB)) == Set(roots(3), roots(2)))
    assert(landings(own.createPlan(arr, GiB, Long.MaxValue)) == Set(roots(3), roots(2)))
    assert(own.size() == 3)
  }

  test("a hit and a miss make the same plan: lazy, with its own limits, released alike") {
    val own = new DirListCache(64, 32 << 10)
    val arr = Array(a, b)
    def check(plan: Long, label: String): Unit = {
      assert(TestFiles.spillDirsUnder(roots).isEmpty, s"$label: a dir before the first file")
      val file = NativeSpill.createTmpFile(plan)
      assert(Seq(a, b).contains(TestFiles.parentOf(TestFiles.parentOf(NativeSpill.path(file)))), label)
      assert(NativeSpill.write(file, ByteBuffer.allocate(100), 0, 100) == 100)
      intercept[SpillLimitExceededException](NativeSpill.write(file, ByteBuffer.allocate(1), 0, 1))
      assert(NativeSpill.usedDiskSpace(plan) == 100, label)
      NativeSpill.releasePlan(plan)
      assert(TestFiles.spillDirsUnder(roots).isEmpty, s"$label: left behind")
      intercept[IllegalStateException](NativeSpill.releasePlan(plan))
    }
    assert(own.find(arr) == 0)
    check(own.createPlan(arr, 100, Long.MaxValue), "miss")
    assert(own.find(arr) != 0)
    check(own.createPlan(arr, 100, Long.MaxValue), "hit")
    check(own.createPlan(Array(copyOf(a), copyOf(b)), 100, Long.MaxValue), "hit by content")
    check(own.createPlan(arr, GiB, bytesInUse() + 100), "hit, executor limit")
    assert(own.size() == 1)

    // Negative limits: the same exception on a hit as on a miss (a cache that has not seen the list).
    for ((limit, executorLimit) <- Seq((-1L, Long.MaxValue), (GiB, -1L), (Long.MinValue, Long.MinValue))) {
      val onHit = message(own.createPlan(arr, limit, executorLimit))
      val onMiss = message(new DirListCache(64, 32 << 10).createPlan(arr, limit, executorLimit))
      assert(onHit == onMiss)
      assert(onHit == message(NativeSpill.createPlanWithExecutorLimit(arr, limit, executorLimit)))
    }
  }

  test("bad arrays get the library's exceptions exactly, however like a kept list they look") {
    val own = new DirListCache(64, 32 << 10)
    for (kept <- Seq(Array(a), Array(a, b), Array(s"$a/x"))) NativeSpill.releasePlan(own.createPlan(kept, GiB, Long.MaxValue))
    val bad: Seq[Array[String]] = Seq(
      null,
      Array.empty[String],
      Array[String](null),
      Array(a, null),
      Array(a, a),
      Array(a, s"$a/."),
      Array(a, "relative"),
      Array(""),
      Array(s"${a}\u0000"),
      Array(s"$a/x\uD800"),
      Array(a, b, null))
    for (dirs <- bad) {
      val label = Option(dirs).map(_.mkString("[", ", ", "]")).getOrElse("null")
      val want = message(NativeSpill.createPlanFromArray(dirs, GiB, Long.MaxValue))
      assert(message(own.createPlan(dirs, GiB, Long.MaxValue)) == want, label)
      assert(message(NativeSpill.createPlan(dirs, GiB)) == want, label)
      assert(message(NativeSpill.createPlanWithExecutorLimit(dirs, GiB, GiB)) == want, label)
    }
    assert(own.size() == 3)
  }

  test("a full cache keeps what it has and sends a new list to the library, every time") {
    val own = new DirListCache(2, 32 << 10)
    for (r <- roots) assert(firstFileRoot(own.createPlan(Array(r), GiB, Long.MaxValue)) == r)
    assert(own.size() == 2)
    assert(own.find(Array(roots(0))) != 0 && own.find(Array(roots(1))) != 0)
    assert(own.find(Array(roots(2))) == 0 && own.find(Array(roots(3))) == 0)
    for (_ <- 1 to 3; r <- roots) assert(firstFileRoot(own.createPlan(Array(r), GiB, Long.MaxValue)) == r)
    // A list longer than the chars a list may keep is never kept.
    val small = new DirListCache(64, a.length - 1)
    assert(firstFileRoot(small.createPlan(Array(a), GiB, Long.MaxValue)) == a)
    assert(small.size() == 0)
  }

  test("threads bringing one new list at once keep one entry, and every plan lands in its dirs") {
    val own = new DirListCache(64, 32 << 10)
    val landed = ConcurrentHashMap.newKeySet[String]()
    onThreads(8) { _ =>
      val arr = Array(copyOf(a)) // Strings of its own, equal to the other threads'
      for (_ <- 1 to 50) landed.add(firstFileRoot(own.createPlan(arr, GiB, Long.MaxValue)))
    }
    assert(landed.size == 1 && landed.contains(a))
    assert(own.size() == 1)
  }

  test("concurrent callers, their own arrays changed by themselves and a shared one by another thread") {
    val own = new DirListCache(64, 32 << 10)
    val shared = Array(a, b)
    val stop = new AtomicBoolean(false)
    val flips = new AtomicInteger(0)
    val mutator = new Thread(() => {
      val values = Seq(a, roots(2), "relative-dir", copyOf(a))
      var i = 0
      while (!stop.get()) {
        shared(0) = values(i % values.size)
        i += 1
        flips.set(i)
      }
    })
    mutator.setDaemon(true)
    val refused = new AtomicInteger(0)
    try {
      mutator.start()
      onThreads(4) { g =>
        val arr = Array(roots(g))
        for (round <- 0 until 400) {
          if (round % 7 == g) arr(0) = copyOf(roots((round + g) % roots.size))
          val want = arr(0)
          val create: Array[String] => Long =
            if (round % 2 == 0) own.createPlan(_, GiB, Long.MaxValue) else NativeSpill.createPlan(_, GiB)
          assert(firstFileRoot(create(arr)) == want, s"caller $g, round $round")
          // The shared array: element 0 is whatever it held when read, never another dir.
          try {
            val root = firstFileRoot(create(shared))
            assert(root == a || root == roots(2) || root == b, s"caller $g, round $round: $root")
          } catch {
            case e: IllegalArgumentException =>
              assert(e.getMessage.contains("relative"), e.getMessage)
              refused.incrementAndGet()
          }
        }
      }
    } finally {
      stop.set(true)
      mutator.join(TimeUnit.SECONDS.toMillis(30))
    }
    assert(flips.get() > 0)
    info(s"${refused.get()} calls with the shared array were refused, ${flips.get()} flips")
    // At most the 4 single-dir lists and the shared array's 2 valid ones, each kept once.
    assert(own.size() <= 6)
    assert(TestFiles.spillDirsUnder(roots).isEmpty)
  }
}
