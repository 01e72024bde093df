package spillway

import java.util.Arrays

import scala.concurrent.duration._
import scala.util.Random

import org.apache.spark.{SparkException, TaskContext}
import org.scalatest.concurrent.Eventually._
import org.scalatest.funsuite.AnyFunSuite

/** What a task saw of its DataFusion sort. */
final case class DataFusionSortObservation(
    keys: Array[Long],
    sorted: Array[Long],
    spillDirsBeforeFirstBatch: Seq[String],
    spillDirsWhileMerging: Seq[String],
    planBytesWhileMerging: Long,
    spills: Long,
    nullAgainAfterTheEnd: Boolean)

/**
 * The Comet scenario in miniature (a native engine spilling through its task's plan, as
 * docs/design/c-abi.md describes), on real Spark (local mode, one local dir): a task hands its TaskSpill
 * plan to a Rust JNI library (spillway-datafusion's example datafusion_task_sort_jni) that runs
 * DataFusion's own SortExec under a small memory pool, so that it spills through
 * SpillwayTempFileFactory over the adopted plan. The temp-dir lifecycle is the one the JVM's plans
 * have (TaskSpillSuite, NativeSortSuite): no dir before the first spill, one plan dir in Spark's
 * local dir while sorting, nothing once the task has ended, however it ended; the plan's limit is
 * DataFusion's resources-exhausted error naming the key; a panic in the native code is a Java
 * exception, and the executor goes on. Every check runs before spark.stop().
 */
class DataFusionTaskSortSuite extends AnyFunSuite with LocalSpark {
  import DataFusionTaskSortSuite._

  private val LimitKey = SpillwayConf.MaxTempDirectorySizeKey

  // One local dir: all of a plan's spill files land in it, so "exactly one plan dir" is checkable.
  override protected def localDirNames: Seq[String] = Seq("local")

  /** The RuntimeExceptions the native library threw (not Spark's wrappers) whose message has `text`. */
  private def thrownByTheLibrary(e: Throwable, text: String): Seq[Throwable] =
    TestFiles.causeChain(e).filter(c => c.getClass == classOf[RuntimeException] && c.getMessage.contains(text))

  private def assertNothingLeft(): Unit = {
    assert(TestFiles.spillDirsUnder(roots).isEmpty)
    assert(TaskSpill.activePlans == 0)
    assert(DataFusionTaskSort.openSorts() == 0)
  }

  /** A job of one task that sorts `Keys` keys of `seed` with DataFusion and reads them all. */
  private def sortInATask(seed: Int): DataFusionSortObservation = {
    val roots = this.roots
    sc.parallelize(Seq(seed), 1).map { seed =>
      val keys = randomKeys(seed)
      val plan = TaskSpill.plan()
      val sort = openInTask(keys)
      val before = TestFiles.spillDirsUnder(roots)
      // The first batch comes out of merging the spill files, which are open now.
      val first = DataFusionTaskSort.next(sort)
      val whileMerging = TestFiles.spillDirsUnder(roots)
      val bytes = plan.usedDiskSpace
      val sorted = (Iterator(first) ++ Iterator.continually(DataFusionTaskSort.next(sort)).takeWhile(_ != null)).flatten.toArray
      DataFusionSortObservation(keys, sorted, before, whileMerging, bytes, DataFusionTaskSort.spillCount(sort), DataFusionTaskSort.next(sort) == null)
    }.collect().head
  }

  test("a task's DataFusion sort spills through its plan: no dir before, one in a local dir while merging, sorted as Scala sorts, nothing after") {
    val before = NativeStats.read()
    val seen = sortInATask(seed = 1)
    val d = NativeStats.read() - before

    assert(Arrays.equals(seen.sorted, seen.keys.sorted), "DataFusion's sort differs from Scala's")
    assert(seen.nullAgainAfterTheEnd, "next after the end is the end again")
    assert(seen.spills >= 2, s"the sort spilled ${seen.spills} times; the test wants several")
    assert(seen.spillDirsBeforeFirstBatch.isEmpty, seen.spillDirsBeforeFirstBatch)
    assert(seen.spillDirsWhileMerging.size == 1, seen.spillDirsWhileMerging)
    val dir = seen.spillDirsWhileMerging.head
    assert(new java.io.File(dir).getName.startsWith(TestFiles.SpillDirPrefix), dir)
    assert(localDirs.contains(TestFiles.parentOf(dir)), s"$dir is not in a local dir of Spark's ($localDirs)")
    assert(seen.planBytesWhileMerging > 0, "the task's plan counts DataFusion's files")
    // Every spill file DataFusion made was a file of the task's plan, made by the library.
    assert(d("plansCreated") == 1 && d("plansSpilled") == 1 && d("dirsCreated") == 1, d)
    assert(d("spillFiles") == seen.spills, d)
    assertNothingLeft()
  }

  test("a failing task leaves nothing behind") {
    val roots = this.roots
    val e = intercept[SparkException] {
      sc.parallelize(Seq(2), 1).foreach { seed =>
        val sort = openInTask(randomKeys(seed))
        DataFusionTaskSort.next(sort)
        throw new RuntimeException(s"task failed on purpose; dirs=${TestFiles.spillDirsUnder(roots).mkString(",")};")
      }
    }
    val Witness = """task failed on purpose; dirs=([^;]*);""".r.unanchored
    e.getMessage match {
      case Witness(dirs) =>
        assert(dirs.nonEmpty, "the task had spilled")
        dirs.split(",").foreach(d => assert(!TestFiles.exists(d), d))
      case other => fail(s"not the task's failure: $other")
    }
    assertNothingLeft()
  }

  test("a cancelled task leaves nothing behind") {
    cancelOnceSpilled("spillway-datafusion-cancel") {
      sc.parallelize(Seq(3), 1).foreach { seed =>
        val sort = openInTask(randomKeys(seed))
        DataFusionTaskSort.next(sort)
        LocalSpark.awaitCancellation() // mid-sort
      }
    }
    // The job fails on the driver before the cancelled task has run its completion listeners.
    eventually(timeout(2.minutes), interval(20.millis)) {
      assert(TaskSpill.activePlans == 0 && DataFusionTaskSort.openSorts() == 0, "the cancelled task to end its sort and plan")
    }
    assertNothingLeft()
  }

  test("over spark.spillway.maxTempDirectorySize: the task fails with DataFusion's resources-exhausted error naming the key; nothing left") {
    val before = NativeStats.read()
    val e = withLocalProperty(LimitKey, "256k")(intercept[SparkException](sortInATask(seed = 4)))
    val exhausted = thrownByTheLibrary(e, "Resources exhausted")
    assert(exhausted.nonEmpty, s"no resources-exhausted error from the library in the cause chain of $e")
    assert(exhausted.head.getMessage.contains(LimitKey), exhausted.head.getMessage)
    info(exhausted.head.getMessage)
    assert((NativeStats.read() - before)("limitFailures") >= 1, "the library refused the write")
    assertNothingLeft()
  }

  test("a panic in the native sort fails the task with a Java exception; the executor sorts on; nothing left") {
    val before = NativeStats.read()
    val e = intercept[SparkException] {
      sc.parallelize(Seq(5), 1).foreach { seed =>
        // At input batch 150 of 200 the sort has spilled: the panic leaves spill files open.
        val sort = openInTask(randomKeys(seed), panicAtInputBatch = 150)
        DataFusionTaskSort.next(sort)
      }
    }
    val panics = thrownByTheLibrary(e, "panic in the DataFusion sort")
    assert(panics.nonEmpty, s"no panic from the library in the cause chain of $e")
    assert(panics.head.getMessage.contains("injected by the test"), panics.head.getMessage)
    assert((NativeStats.read() - before)("plansSpilled") == 1, "the sort had spilled before it panicked")
    assertNothingLeft()

    val seen = sortInATask(seed = 6)
    assert(Arrays.equals(seen.sorted, seen.keys.sorted))
    assertNothingLeft()
  }

  test("bad arguments are Java exceptions: a released plan, null keys, no memory, an unknown sort") {
    val plan = SpillPlan.create(localDirs.toArray, 1L << 20)
    val live = plan.nativeHandle
    plan.close()
    val released = intercept[IllegalArgumentException](DataFusionTaskSort.open(live, Array(1L), 1L << 20, -1))
    assert(released.getMessage.nonEmpty)
    intercept[IllegalArgumentException](DataFusionTaskSort.open(live, null, 1L << 20, -1))
    intercept[IllegalArgumentException](DataFusionTaskSort.open(live, Array(1L), 0, -1))
    intercept[IllegalStateException](DataFusionTaskSort.next(Long.MaxValue))
    intercept[IllegalStateException](DataFusionTaskSort.spillCount(-1))
    intercept[IllegalStateException](DataFusionTaskSort.close(0))
    intercept[IllegalStateException](plan.nativeHandle)
    assertNothingLeft()
  }
}

object DataFusionTaskSortSuite {
  /** 200 batches of 1000 keys (with their strings, about 7 MB) sorted in 2 MiB: several spills. */
  val Keys = 200000
  val MemoryPoolBytes: Long = 2L << 20

  def randomKeys(seed: Int): Array[Long] = {
    val random = new Random(seed)
    Array.fill(Keys)(random.nextLong())
  }

  /**
   * Runs in a task: opens a DataFusion sort of `keys` spilling into the task's TaskSpill plan, and
   * closes it when the task ends (before TaskSpill releases the plan: Spark runs completion
   * listeners in reverse order of registration), as an engine ends its native plan.
   */
  def openInTask(keys: Array[Long], panicAtInputBatch: Int = -1): Long = {
    val task = TaskContext.get()
    val plan = TaskSpill.plan().nativeHandle
    val sort = DataFusionTaskSort.open(plan, keys, MemoryPoolBytes, panicAtInputBatch)
    task.addTaskCompletionListener[Unit](_ => DataFusionTaskSort.close(sort))
    sort
  }
}
