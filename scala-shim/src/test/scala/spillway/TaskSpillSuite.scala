package spillway

import java.nio.ByteBuffer

import scala.concurrent.duration._
import scala.util.Using

import org.apache.spark.{BarrierTaskContext, SparkEnv, SparkException, TaskContext}
import org.scalatest.concurrent.Eventually._
import org.scalatest.funsuite.AnyFunSuite

/** What a task saw of its plan and the local dirs. */
final case class TaskObservation(
    localDirs: Seq[String],
    spillDirs: Seq[String],
    filePath: String,
    fileSize: Long,
    fileBytesOnDisk: Long,
    usedDiskSpace: Long,
    dirPermissions: String,
    filePermissions: String)

final case class ConcurrentObservation(
    partition: Int,
    planDir: String,
    spillDirsSeen: Seq[String],
    overLimitError: Option[String],
    usedDiskSpace: Long,
    fileBytesOnDisk: Long)

/**
 * The temp-dir lifecycle on real Spark (local mode, two local dirs, the real library): (a) no dir
 * for a plan that never spills, (b) one dir for one that spills and (c) none after the job, (d)
 * nothing left by a failed or cancelled task, (e) the limit, (f) separate dirs and limits for
 * concurrent tasks; and the limit's settings. Every check runs before spark.stop(), which deletes
 * the blockmgr dirs.
 *
 * Files are in the spill format with codec none (set here): nothing shrinks, so the limit
 * arithmetic below holds for any bytes (zeros included); sizes are compared with what each file
 * reports on disk (its bytes plus framing). Chunks reach the disk as they fill.
 */
class TaskSpillSuite extends AnyFunSuite with LocalSpark {
  private val Key = SpillwayConf.MaxTempDirectorySizeKey
  private val MiB = 1024 * 1024

  override protected def localDirNames: Seq[String] = Seq("local-a", "local-b")
  // The Spark conf value; tests override it per job or session.
  override protected def sparkConf: Map[String, String] = Map(Key -> "256m", "spark.spillway.compression.codec" -> "none")

  private def assertNothingLeft(): Unit = {
    assert(TestFiles.spillDirsUnder(roots).isEmpty)
    assert(TaskSpill.activePlans == 0)
  }

  test("the executor's local dirs are registered once per SparkEnv, and plans are created from the registration") {
    val env = SparkEnv.get
    val dirs = TaskSpill.localDirs(env)
    assert(dirs.paths.toSeq == localDirs && localDirs.size == 2, "both local dirs Spark was given")
    assert(TaskSpill.localDirs(env) eq dirs)
    val handles = sc.parallelize(1 to 4, 4).map { _ =>
      TaskSpill.plan()
      TaskSpill.localDirs(SparkEnv.get).handle
    }.collect().toSet
    assert(handles == Set(dirs.handle))
    // The registration is live: a plan made from it spills into these dirs.
    val plan = NativeSpill.createPlanIn(dirs.handle, MiB, Long.MaxValue)
    try {
      val path = NativeSpill.path(NativeSpill.createTmpFile(plan))
      assert(localDirs.exists(d => path.startsWith(d + "/")), path)
    } finally NativeSpill.releasePlan(plan)
    assertNothingLeft()
  }

  test("a registration replaced by a newer one is released, and a plan creation that raced with that retries") {
    val env = SparkEnv.get
    val first = TaskSpill.localDirs(env)
    // Another owner's registration takes over (in production: a new SparkEnv in this JVM).
    val other = TaskSpill.register(new Object, () => localDirs.toArray)
    assert(first.retired && !other.retired)
    intercept[IllegalStateException](NativeSpill.createPlanIn(first.handle, MiB, Long.MaxValue))
    // A caller still holding `first` gets a plan from the current SparkEnv's new registration.
    val plan = TaskSpill.createIn(first, MiB, Long.MaxValue)
    try {
      val path = plan.createSpillFile().path
      assert(localDirs.exists(d => path.startsWith(d + "/")), path)
    } finally plan.close()
    val again = TaskSpill.localDirs(env)
    assert(again ne first)
    assert(other.retired && !again.retired)
    intercept[IllegalStateException](NativeSpill.releaseLocalDirs(other.handle))
    assertNothingLeft()
  }

  test("outside a task, plan() is an IllegalStateException") {
    val e = intercept[IllegalStateException](TaskSpill.plan())
    assert(e.getMessage.contains("Spark task"))
  }

  test("a task that never asks gets no plan") {
    val before = NativeStats.read()
    assert(sc.parallelize(1 to 4, 2).map(_ * 2).sum() == 20)
    assert((NativeStats.read() - before)("plansCreated") == 0)
    assertNothingLeft()
  }

  test("(a) a task whose plan never spills creates no spillway-* dir, seen inside the task and after") {
    val roots = this.roots
    val before = NativeStats.read()
    val (samePlan, used, seenInTask) = sc.parallelize(Seq(1), 1).map { _ =>
      val plan = TaskSpill.plan()
      (TaskSpill.plan() eq plan, plan.usedDiskSpace, TestFiles.spillDirsUnder(roots))
    }.collect().head
    assert(samePlan)
    assert(used == 0)
    assert(seenInTask.isEmpty)
    assertNothingLeft()
    val d = NativeStats.read() - before
    assert(d("plansCreated") == 1 && d("livePlans") == 0 && d("plansSpilled") == 0 && d("dirsCreated") == 0)
  }

  test("(b) a task that spills has exactly one spillway-* dir, inside a local dir, holding its file; (c) none after the job") {
    val roots = this.roots
    val size = MiB
    val seen = sc.parallelize(Seq(1), 1).map { _ =>
      val plan = TaskSpill.plan()
      val file = plan.createSpillFile()
      Using.resource(file.outputStream())(_.write(TestFiles.pattern(size)))
      TaskObservation(
        localDirs = SparkEnv.get.blockManager.getLocalDiskDirs.toSeq,
        spillDirs = TestFiles.spillDirsUnder(roots),
        filePath = file.path,
        fileSize = TestFiles.size(file.path),
        fileBytesOnDisk = file.bytesOnDisk,
        usedDiskSpace = plan.usedDiskSpace,
        dirPermissions = TestFiles.permissions(TestFiles.parentOf(file.path)),
        filePermissions = TestFiles.permissions(file.path))
    }.collect().head
    assert(seen.spillDirs.size == 1, seen)
    val dir = seen.spillDirs.head
    assert(new java.io.File(dir).getName.startsWith("spillway-"))
    assert(seen.localDirs.contains(TestFiles.parentOf(dir)), seen)
    assert(TestFiles.parentOf(seen.filePath) == dir)
    assert(seen.fileSize == seen.fileBytesOnDisk && seen.usedDiskSpace == seen.fileBytesOnDisk, seen)
    assert(seen.fileSize > size, s"codec none: the $size bytes and their framing: $seen")
    assert(seen.dirPermissions == "rwx------" && seen.filePermissions == "rw-------")
    // (c)
    assert(!TestFiles.exists(seen.filePath) && !TestFiles.exists(dir))
    assertNothingLeft()
  }

  test("(d) a failing task leaves nothing behind") {
    val roots = this.roots
    val e = intercept[SparkException] {
      sc.parallelize(Seq(1), 1).foreach { _ =>
        val file = TaskSpill.plan().createSpillFile()
        file.write(ByteBuffer.wrap(TestFiles.pattern(1000)), 0, 1000)
        val dirs = TestFiles.spillDirsUnder(roots)
        throw new RuntimeException(s"task failed on purpose; file=${file.path} dirs=${dirs.mkString(",")};")
      }
    }
    val Witness = """task failed on purpose; file=(\S+) dirs=([^;]*);""".r.unanchored
    e.getMessage match {
      case Witness(file, dirs) =>
        assert(dirs.split(",").toSeq == Seq(TestFiles.parentOf(file)), "the task had spilled")
        assert(!TestFiles.exists(file) && !TestFiles.exists(TestFiles.parentOf(file)))
      case other => fail(s"not the task's failure: $other")
    }
    assertNothingLeft()
  }

  test("(d) a cancelled task leaves nothing behind") {
    cancelOnceSpilled("spillway-cancel") {
      sc.parallelize(Seq(1), 1).foreach { _ =>
        val file = TaskSpill.plan().createSpillFile()
        file.write(ByteBuffer.allocate(1000), 0, 1000)
        LocalSpark.awaitCancellation()
      }
    }
    // The job fails on the driver before the cancelled task has run its completion listeners.
    eventually(timeout(2.minutes), interval(20.millis))(assert(TaskSpill.activePlans == 0, "the cancelled task to release its plan"))
    assertNothingLeft()
  }

  test("(e) over the limit (session conf): the job fails with SpillLimitExceededException naming the key; nothing left") {
    val session = spark
    import session.implicits._
    val size = 2 * MiB
    spark.conf.set(Key, "1m")
    val e =
      try {
        intercept[SparkException] {
          spark.range(0, 1, 1, 1).mapPartitions { _ =>
            val file = TaskSpill.plan().createSpillFile()
            Using.resource(file.outputStream())(_.write(TestFiles.pattern(size)))
            Iterator(file.bytesWritten)
          }.collect()
        }
      } finally spark.conf.unset(Key)
    val limitErrors = TestFiles.causeChain(e).collect { case s: SpillLimitExceededException => s }
    assert(limitErrors.nonEmpty, s"no SpillLimitExceededException in the cause chain of $e")
    assert(limitErrors.head.getMessage.contains(Key))
    assert(limitErrors.head.getMessage.contains((1 * MiB).toString), limitErrors.head.getMessage)
    assertNothingLeft()
  }

  test("(f) concurrent tasks get separate dirs and separate limits") {
    val roots = this.roots
    val written = 2 * MiB
    // 3 MiB each: both tasks together hold 4 MiB, more than one limit.
    val seen = withLocalProperty(Key, "3m") {
      sc.parallelize(0 until 2, 2).barrier().mapPartitions { _ =>
        val ctx = BarrierTaskContext.get()
        val plan = TaskSpill.plan()
        val file = plan.createSpillFile()
        val channel = file.channel()
        channel.write(ByteBuffer.allocateDirect(written))
        ctx.barrier() // both tasks have spilled and hold their plans
        val dirs = TestFiles.spillDirsUnder(roots)
        val overLimit =
          try {
            file.write(ByteBuffer.allocateDirect(written), 0, written)
            None
          } catch { case e: SpillLimitExceededException => Some(e.getMessage) }
        val used = plan.usedDiskSpace
        val kept = file.bytesOnDisk
        ctx.barrier() // neither releases its plan before the other has looked
        Iterator(ConcurrentObservation(ctx.partitionId(), TestFiles.parentOf(file.path), dirs, overLimit, used, kept))
      }.collect().toSeq
    }
    assert(seen.size == 2)
    val planDirs = seen.map(_.planDir)
    assert(planDirs.distinct.size == 2, seen)
    assert(seen.forall(_.spillDirsSeen == planDirs.sorted), seen)
    assert(seen.forall(_.overLimitError.exists(_.contains(Key))), seen)
    // Each plan holds its first 2 MiB (and the whole chunks of the refused write) under its own
    // 3m: together more than one limit.
    assert(seen.forall(o => o.usedDiskSpace == o.fileBytesOnDisk && o.usedDiskSpace >= written && o.usedDiskSpace <= 3 * MiB), seen)
    assertNothingLeft()
  }

  test("the limit: the session/job value first, then the Spark conf, then the default; bad values are errors") {
    val limits = (localValue: Option[String]) => {
      val read = () => sc.parallelize(Seq(1), 1).map { _ =>
        val task = TaskContext.get()
        val fromPlan = TaskSpill.plan().maxTempDirectorySize
        val default = SpillwayConf.maxTempDirectorySize(task, new org.apache.spark.SparkConf(false))
        (fromPlan, default)
      }.collect().head
      localValue.fold(read())(v => withLocalProperty(Key, v)(read()))
    }
    assert(limits(None) == (256L * MiB, 100L * 1024 * MiB))
    assert(limits(Some("10g")) == (10L * 1024 * MiB, 10L * 1024 * MiB))
    assert(limits(Some("0")) == (0L, 0L))

    for (bad <- Seq("lots", "-1g", "10 gigabytes")) {
      val e = intercept[SparkException](limits(Some(bad)))
      val cause = TestFiles.causeChain(e).collectFirst { case i: IllegalArgumentException => i }
      assert(cause.exists(c => c.getMessage.contains(Key) && c.getMessage.contains(bad)), s"$bad: $e")
    }
    assertNothingLeft()
  }
}
