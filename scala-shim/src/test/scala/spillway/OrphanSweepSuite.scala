package spillway

import java.nio.ByteBuffer
import java.nio.file.{Files, Path, Paths}

import scala.jdk.CollectionConverters._
import scala.util.Using

import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

/**
 * The orphans of killed executors (docs/reliability.md), with real second JVMs: an executor-like child
 * killed with SIGKILL while it spills leaves its plan dir and owner lock; NativeSpill.sweepOrphans
 * removes exactly those, found through the free flock, while a live child's dir (and this JVM's own
 * live plan's dir) stays; no planted symlink is followed and nothing outside the given dir is
 * touched.
 */
class OrphanSweepSuite extends AnyFunSuite with BeforeAndAfterEach {
  private var base: Path = _
  private var local: Path = _ // the local dir both children and this JVM spill into
  private var outside: Path = _ // what planted symlinks point at: must never change
  private var children: Seq[ChildJvm] = Nil

  override def beforeEach(): Unit = {
    NativeLoader.load()
    base = Files.createTempDirectory("spillway-orphans-")
    local = Files.createDirectory(base.resolve("local"))
    outside = Files.createDirectory(base.resolve("outside"))
    Files.write(outside.resolve("precious"), "keep me".getBytes("UTF-8"))
  }

  override def afterEach(): Unit =
    try children.foreach(_.destroy())
    finally {
      children = Nil
      TestFiles.deleteRecursively(base)
    }

  private def startChild(args: String*): ChildJvm = {
    val child = ChildJvm.start(SpillChild.getClass.getName.stripSuffix("$"), Seq("-Xmx128m", "-XX:+UseSerialGC"), args)
    children :+= child
    child
  }

  /** `ready <plan dir> <file>` from a `hold` child. */
  private def awaitReady(child: ChildJvm): (Path, Path) = {
    val ready = child.awaitLine("ready ").split(" ")
    (Paths.get(ready(1)), Paths.get(ready(2)))
  }

  private def lockOf(planDir: Path): Path = planDir.resolveSibling(s".${planDir.getFileName}.owner")

  private def names(dir: Path): Set[String] =
    Using.resource(Files.list(dir))(_.iterator().asScala.map(_.getFileName.toString).toSet)

  private def outsideContent: Seq[(String, Seq[Byte])] =
    TestFiles.entriesUnder(outside).map(e => e -> Files.readAllBytes(outside.resolve(e)).toSeq)

  test("a JVM killed with SIGKILL mid-spill leaves its plan dir; the sweep removes it and only it") {
    val killed = startChild("hold", local.toString)
    val alive = startChild("hold", local.toString)
    val (deadDir, _) = awaitReady(killed)
    val (liveDir, _) = awaitReady(alive)
    // This JVM's own live plan in the same dir: the sweeper's process holds its lock on another
    // open file description, which a sweep's flock must respect too.
    val own = NativeSpill.createPlan(Array(local.toString), 1L << 30)
    val ownFile = NativeSpill.createTmpFile(own)
    NativeSpill.write(ownFile, ByteBuffer.allocate(100), 0, 100)
    val ownDir = Paths.get(TestFiles.parentOf(NativeSpill.path(ownFile)))

    // Traps: only the dead child's dir may go.
    //  - a symlink under a plan-dir name, with a free lock file beside it: not a dir, not followed;
    //  - a real plan-like dir whose "lock" is a symlink: the lock cannot be trusted, so the dir stays;
    //  - a plan-like dir with a free lock one level down, and another outside the given dir: the
    //    sweep looks only directly inside the dirs it is given.
    Files.createSymbolicLink(local.resolve("spillway-link"), outside)
    Files.createFile(local.resolve(".spillway-link.owner"))
    Files.createDirectory(local.resolve("spillway-lockislink"))
    Files.write(local.resolve("spillway-lockislink").resolve("data"), Array[Byte](1))
    Files.createSymbolicLink(local.resolve(".spillway-lockislink.owner"), outside.resolve("precious"))
    val nested = Files.createDirectories(local.resolve("nested").resolve("spillway-deep"))
    Files.createFile(local.resolve("nested").resolve(".spillway-deep.owner"))
    val beside = Files.createDirectories(base.resolve("beside").resolve("spillway-beside"))
    Files.createFile(base.resolve("beside").resolve(".spillway-beside.owner"))

    val exit = killed.kill9()
    assert(exit == ChildJvm.KilledBySigkill, s"the child was not killed by SIGKILL (exit $exit)")
    // What kill -9 leaves: the plan dir, its lock and the file being written. Nothing ran to remove them.
    assert(Files.isDirectory(deadDir) && Files.exists(lockOf(deadDir)))
    assert(names(deadDir).exists(_.startsWith("spill-")), s"no spill file in $deadDir")
    // A symlink planted inside the orphan, pointing out: removing the orphan must unlink it, not follow it.
    Files.createSymbolicLink(deadDir.resolve("escape"), outside)
    val outsideBefore = outsideContent

    assert(NativeSpill.sweepOrphans(Array(local.toString)) == 1)

    assert(!Files.exists(deadDir) && !Files.exists(lockOf(deadDir)), "the killed JVM's plan dir or lock is left")
    assert(Files.isDirectory(liveDir) && Files.exists(lockOf(liveDir)), "the live JVM's plan dir was touched")
    assert(Files.isDirectory(ownDir) && Files.exists(lockOf(ownDir)), "this JVM's live plan dir was touched")
    assert(NativeSpill.usedDiskSpace(own) == 100 && TestFiles.size(NativeSpill.path(ownFile)) == 100)
    assert(outsideContent == outsideBefore, "something outside the local dir changed")
    assert(Files.isSymbolicLink(local.resolve("spillway-link")) && Files.exists(local.resolve(".spillway-link.owner")))
    assert(Files.exists(local.resolve("spillway-lockislink").resolve("data")))
    assert(Files.isSymbolicLink(local.resolve(".spillway-lockislink.owner")))
    assert(Files.isDirectory(nested) && Files.isDirectory(beside))

    // The live child goes on spilling, then cleans up after itself.
    alive.send("spill")
    assert(Files.exists(Paths.get(alive.awaitLine("spilled ").stripPrefix("spilled "))))
    alive.send("release")
    alive.awaitLine("released")
    assert(alive.waitFor(60) == 0)
    assert(!Files.exists(liveDir) && !Files.exists(lockOf(liveDir)))
    NativeSpill.releasePlan(own)
    // A second sweep finds nothing more: only the traps are left.
    assert(NativeSpill.sweepOrphans(Array(local.toString)) == 0)
    assert(names(local) == Set("spillway-link", ".spillway-link.owner", "spillway-lockislink",
      ".spillway-lockislink.owner", "nested"))
  }

  test("several JVMs killed mid-spill at different moments: every orphan is swept, the survivor's dir is not") {
    val survivor = startChild("hold", local.toString)
    val (survivorDir, _) = awaitReady(survivor)
    val victims = (1 to 3).map(_ => startChild("hold", local.toString))
    val deadDirs = victims.zipWithIndex.map { case (v, i) =>
      val (dir, _) = awaitReady(v)
      Thread.sleep(50L * i) // not a timing assertion: only varies how far each victim got
      assert(v.kill9() == ChildJvm.KilledBySigkill)
      dir
    }
    assert(deadDirs.forall(Files.isDirectory(_)))
    assert(NativeSpill.sweepOrphans(Array(local.toString)) == deadDirs.size)
    assert(deadDirs.forall(d => !Files.exists(d) && !Files.exists(lockOf(d))))
    assert(Files.isDirectory(survivorDir) && Files.exists(lockOf(survivorDir)))
    survivor.send("release")
    survivor.awaitLine("released")
    assert(survivor.waitFor(60) == 0)
    assert(names(local).isEmpty, s"left in the local dir: ${names(local)}")
  }

  test("sweeps running while another JVM creates plan dirs never break its spills") {
    // A lock file appears already locked (made unnamed with O_TMPFILE, flocked, then linked into
    // place), so a sweep can never take the lock of a plan dir being created. Before that, a sweep
    // between the owner's open and flock took the lock: about 1 in 300 plans here failed to spill
    // or lived with no lock file on disk.
    val plans = 5000
    val churner = startChild("churn", local.toString, plans.toString)
    var sweeps = 0
    var removed = 0
    while (churner.process.isAlive && sweeps < 10000000) {
      removed += NativeSpill.sweepOrphans(Array(local.toString))
      sweeps += 1
    }
    val report = churner.awaitLine("churned ").split(" ", 8)
    assert(churner.waitFor(60) == 0)
    val (n, failures, unowned) = (report(1).toInt, report(3).toInt, report(5).toInt)
    info(s"$n plan lifecycles in the other JVM during $sweeps sweeps: $failures failed spills, $unowned unowned dirs")
    assert(n == plans)
    assert(removed == 0, "a sweep removed a plan dir of a live JVM")
    assert(names(local).isEmpty, s"left in the local dir: ${names(local)}")
    assert(failures == 0, s"spills of a live JVM failed during sweeps: ${report.drop(6).mkString(" ")}")
    assert(unowned == 0, "plan dirs of a live JVM had no owner lock file on disk")
  }
}
