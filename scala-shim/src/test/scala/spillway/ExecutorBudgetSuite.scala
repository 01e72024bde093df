package spillway

import java.util.concurrent.{CountDownLatch, Executors, TimeUnit}

import scala.concurrent.{Await, ExecutionContext, Future}
import scala.concurrent.duration._
import scala.util.Using

import org.apache.spark.{BarrierTaskContext, SparkException}

import org.scalatest.funsuite.AnyFunSuite

/** What a task's write did. */
final case class WriteOutcome(
    partition: Int,
    executorLimit: Long,
    error: Option[String], // "<exception class>: <message>" of the refused write
    usedDiskSpace: Long, // after the write
    fileBytesOnDisk: Long, // what the written file reports on disk
    smallerWriteFits: Option[Boolean]) // after a refusal: a write within the remaining budget

/**
 * `spark.spillway.maxExecutorTempDirectorySize` on real Spark (local[2]: two concurrent tasks in
 * one executor) with the real library. Each plan's per-plan limit is large (1g), so any refusal
 * here comes from the executor-wide budget.
 *
 * Files are in the spill format, with codec none (set here) and incompressible bytes: nothing
 * shrinks, so a file of N bytes takes N bytes plus its framing on disk, and the budget arithmetic
 * below (4 MiB + 4 MiB > 6 MiB) holds. Sizes are compared with what each file reports on disk.
 * Chunks reach the disk as they fill, each all or nothing against the limits: a refused write keeps
 * the file's earlier whole chunks, and the file then takes no more writes.
 */
class ExecutorBudgetSuite extends AnyFunSuite with LocalSpark {
  import ExecutorBudgetSuite._

  private val Key = SpillwayConf.MaxExecutorTempDirectorySizeKey
  override protected def sparkConf: Map[String, String] =
    Map(SpillwayConf.MaxTempDirectorySizeKey -> "1g", "spark.spillway.compression.codec" -> "none")

  test("two concurrent tasks: the second writer passing the executor budget is refused, naming its key") {
    val outcomes = withLocalProperty(Key, "6m") {
      sc.parallelize(0 until 2, 2).barrier().mapPartitions { it =>
        val p = it.next()
        val barrier = BarrierTaskContext.get()
        val plan = TaskSpill.plan()
        val file = plan.createSpillFile()
        // Task 0 writes first; task 1 writes once task 0's 4 MiB are on disk; task 0's plan (and its
        // bytes) stays alive until task 1 has written.
        val outcome =
          if (p == 0) {
            write(file, 4 * MiB)
            barrier.barrier()
            WriteOutcome(p, plan.maxExecutorTempDirectorySize, None, plan.usedDiskSpace, file.bytesOnDisk, None)
          } else {
            barrier.barrier()
            val error = try { write(file, 4 * MiB); None } catch { case e: SpillLimitExceededException => Some(describe(e)) }
            val used = plan.usedDiskSpace
            val kept = file.bytesOnDisk
            // The refused file takes no more writes: release it (its whole chunks go back to the
            // budget), then a write within what is left must fit.
            val fits = error.map { _ =>
              file.release()
              try { write(plan.createSpillFile(), 1 * MiB); true } catch { case _: SpillLimitExceededException => false }
            }
            WriteOutcome(p, plan.maxExecutorTempDirectorySize, error, used, kept, fits)
          }
        barrier.barrier()
        Iterator(outcome)
      }.collect().sortBy(_.partition)
    }
    assert(outcomes.length == 2)
    val (first, second) = (outcomes(0), outcomes(1))
    assert(first.error.isEmpty && first.usedDiskSpace == first.fileBytesOnDisk && first.usedDiskSpace >= 4 * MiB, first)
    assert(first.executorLimit == 6 * MiB && second.executorLimit == 6 * MiB)
    val error = second.error.getOrElse(fail(s"the second writer was not refused: $second"))
    assert(error.startsWith(classOf[SpillLimitExceededException].getName + ": "), error)
    assert(error.contains(Key) && !error.contains(SpillwayConf.MaxTempDirectorySizeKey), error)
    assert(error.contains("all plans"), error)
    assert(second.usedDiskSpace == second.fileBytesOnDisk, s"the refused write kept its whole chunks only: $second")
    assert(first.usedDiskSpace + second.usedDiskSpace <= 6 * MiB, s"the budget was never passed: $first $second")
    assert(second.smallerWriteFits.contains(true), "4 MiB + 1 MiB fits in 6 MiB: the refusal reserved nothing it kept")
    assert(TaskSpill.activePlans == 0)
  }

  test("read at creation: a plan with a small executor limit and a concurrent, later one with a large limit keep their own") {
    // Two jobs, one task each, running at once in the two slots; their tasks take turns through
    // latches (local mode: one JVM). The order of events:
    //   small: creates its plan (limit 6m)          large: waits
    //   small: waits                                 large: creates its plan (limit 1g), writes 8 MiB
    //   small: writes 1 KiB                          large: waits (its 8 MiB stay live)
    // If the last plan's value won, small's write would pass (1g); if the first's, large's would fail.
    Turns.reset()
    val threads = Executors.newFixedThreadPool(2) // one driver thread per job: both jobs run at once
    implicit val ec: ExecutionContext = ExecutionContext.fromExecutorService(threads)
    def job(limit: String, body: () => WriteOutcome): Future[WriteOutcome] = Future {
      withLocalProperty(Key, limit) {
        sc.parallelize(Seq(0), 1).map(_ => body()).collect().head
      }
    }
    val (s, l) =
      try {
        val small = job("6m", () => {
          val turns = Turns.get
          val plan = TaskSpill.plan()
          val file = plan.createSpillFile()
          turns.smallCreated.countDown()
          await(turns.largeWrote)
          val error = try { write(file, 1024); None } catch { case e: SpillLimitExceededException => Some(describe(e)) }
          turns.smallTried.countDown()
          WriteOutcome(0, plan.maxExecutorTempDirectorySize, error, plan.usedDiskSpace, file.bytesOnDisk, None)
        })
        val large = job("1g", () => {
          val turns = Turns.get
          await(turns.smallCreated) // created after the small plan, and alive while it writes
          val plan = TaskSpill.plan()
          val file = plan.createSpillFile()
          val error = try { write(file, 8 * MiB); None } catch { case e: SpillLimitExceededException => Some(describe(e)) }
          turns.largeWrote.countDown()
          await(turns.smallTried)
          WriteOutcome(1, plan.maxExecutorTempDirectorySize, error, plan.usedDiskSpace, file.bytesOnDisk, None)
        })
        Await.result(small.zip(large), 5.minutes)
      } finally threads.shutdown()

    assert(s.executorLimit == 6 * MiB && l.executorLimit == 1024L * MiB, (s, l))
    assert(l.error.isEmpty && l.usedDiskSpace == l.fileBytesOnDisk && l.usedDiskSpace >= 8 * MiB,
      s"the later plan's own 1g applies to it, not the earlier 6m: $l")
    val error = s.error.getOrElse(fail(s"the earlier plan's 6m was replaced by the later plan's 1g: $s"))
    assert(error.contains(Key) && error.startsWith(classOf[SpillLimitExceededException].getName), error)
    assert(s.usedDiskSpace == 0 && s.fileBytesOnDisk == 0, s"the refused first chunk kept nothing: $s")
    assert(TaskSpill.activePlans == 0)
  }

  test("the key: unlimited by default, settable per session, a bad value fails the plan naming the key") {
    val session = spark
    import session.implicits._
    def limitInTask(): Long =
      spark.range(0, 1, 1, 1).mapPartitions(_ => Iterator(TaskSpill.plan().maxExecutorTempDirectorySize)).collect().head
    assert(limitInTask() == Long.MaxValue)
    spark.conf.set(Key, "5m")
    try {
      assert(limitInTask() == 5 * MiB)
      // Spark itself refuses a bad session value, naming the key...
      val refused = intercept[IllegalArgumentException](spark.conf.set(Key, "lots"))
      assert(refused.getMessage.contains(Key), refused)
    } finally spark.conf.unset(Key)
    // ...and a bad value that reaches a task by another way fails the plan, never defaults silently.
    val e = intercept[SparkException] {
      withLocalProperty(Key, "lots")(sc.parallelize(Seq(1), 1).map(_ => TaskSpill.plan().maxExecutorTempDirectorySize).collect())
    }
    val message = TestFiles.causeChain(e).collectFirst { case i: IllegalArgumentException => i.getMessage }
    assert(message.exists(_.contains(s"Invalid value 'lots' for $Key")), TestFiles.causeChain(e))
    assert(TaskSpill.activePlans == 0)
  }
}

object ExecutorBudgetSuite {
  private val MiB = 1024L * 1024

  /** Latches by which the tasks of the read-at-creation test take turns (same JVM in local mode). */
  final class Turns {
    val smallCreated = new CountDownLatch(1)
    val largeWrote = new CountDownLatch(1)
    val smallTried = new CountDownLatch(1)
  }
  object Turns {
    @volatile private var current: Turns = _
    def reset(): Turns = { current = new Turns; current }
    def get: Turns = current
  }

  /** Waits for a turn; the bound only turns a lost turn into a failure instead of a hang. */
  def await(latch: CountDownLatch): Unit =
    if (!latch.await(2, TimeUnit.MINUTES)) throw new IllegalStateException("a task's turn never came")

  /**
   * Appends `bytes` incompressible bytes in one native write and finishes the file (the channel's
   * close writes the last chunk); each chunk is all or nothing against the limits.
   */
  def write(file: SpillFile, bytes: Long): Unit = {
    val data = new Array[Byte](bytes.toInt)
    new java.util.Random(bytes).nextBytes(data)
    Using.resource(file.channel())(_.write(java.nio.ByteBuffer.wrap(data)))
  }

  def describe(e: Throwable): String = s"${e.getClass.getName}: ${e.getMessage}"
}
