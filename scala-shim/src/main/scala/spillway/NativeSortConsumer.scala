package spillway

import java.io.IOException
import java.nio.ByteBuffer
import java.util.concurrent.atomic.AtomicBoolean

import org.apache.spark.{SparkEnv, TaskContext}
import org.apache.spark.memory.{MemoryConsumer, MemoryMode, TaskMemoryManager}
import org.apache.spark.spillway.SparkInternals

/**
 * A native sort's memory as Spark sees it: the bytes the native sort holds are taken from the
 * task's [[TaskMemoryManager]] (acquired before a batch goes in, given back as soon as the sort
 * holds less), and when Spark needs memory back, [[spill]] really writes a run and frees it.
 *
 * What the native side holds never exceeds what Spark granted by more than one batch: before a
 * batch is added its memory is acquired, and if Spark grants less, the sort spills first. So the
 * sort grows as long as Spark grants memory, as Spark's UnsafeExternalSorter does. The native
 * budget ([[ExternalSort.memoryBudget]]: the cap, else the most Spark could grant) bounds
 * it too; the sort spills at whichever is reached first.
 *
 * Locking: one lock, the task memory manager's monitor, which Spark already holds when it calls
 * [[spill]] (possibly from another thread of the task, or reentrantly from our own
 * `acquireMemory`). Every change of the grant and of the spills reported to the task's metrics
 * takes it too, so a spill and the task thread never both act on the same reading; the native
 * sort needs no lock of ours (see docs/concurrency.md).
 */
final class NativeSortConsumer private (
    task: TaskContext,
    taskMemory: TaskMemoryManager,
    val sort: ExternalSort)
    // The tungsten mode: off-heap when Spark has off-heap execution memory (the native sort's
    // memory really is off-heap), on-heap otherwise (then Spark only accounts for it).
    extends MemoryConsumer(taskMemory, taskMemory.pageSizeBytes(), taskMemory.getTungstenMemoryMode) {

  private val closed = new AtomicBoolean(false)
  // Spill counters already added to the task's metrics (under taskMemory's monitor).
  private var reportedMemorySpilled = 0L
  private var reportedDiskSpilled = 0L

  /**
   * Adds `batch[0, length)` holding `records` records: first takes from Spark the memory the sort
   * will hold after it (spilling if Spark grants less), then adds, then gives back what it does not
   * hold.
   */
  def add(batch: ByteBuffer, length: Int, records: Int): Unit = {
    reserve(sort.addGrowthBound(length, records))
    sort.add(batch, 0, length)
    settle()
  }

  /** Reads the next sorted batch into `out[0, length)`; see [[ExternalSort.next]]. */
  def next(out: ByteBuffer, length: Int): Int = {
    val n = sort.next(out, 0, length)
    settle() // merging takes read buffers, and records returned free memory
    n
  }

  /**
   * Spark asks for memory back (for another consumer, or for ourselves when Spark is short): write
   * what the sort holds as a run and give the memory freed back to Spark.
   *
   * @return bytes given back to Spark
   */
  override def spill(size: Long, trigger: MemoryConsumer): Long = spillAndRelease()

  /**
   * Releases the native sort (its run files and memory) and gives all its memory back to Spark.
   * Idempotent; called when the output is exhausted and by the task's completion listener.
   */
  def close(): Unit = {
    if (closed.compareAndSet(false, true)) {
      try {
        reportSpills()
        sort.close()
      } catch {
        // Like a plan's release: the task's result is good and a retry would not help.
        case e: IOException =>
          NativeSortConsumer.log.warn(s"Spillway could not remove every run file of a sort in task ${task.taskAttemptId()}", e)
      } finally {
        taskMemory.synchronized(if (getUsed > 0) freeMemory(getUsed))
      }
    }
  }

  def isClosed: Boolean = closed.get

  override def toString: String = s"NativeSortConsumer(task ${task.taskAttemptId()}, granted $getUsed bytes, $sort)"

  /** Makes sure Spark granted what the sort will hold after growing by `growth` bytes. */
  private def reserve(growth: Long): Unit = {
    if (!grantAtLeast(target(growth))) {
      // Spark is short: hand back what the sort holds, then take what the batch needs. That may
      // still fall short; the sort then holds at most this batch more than granted, and settle()
      // tries again.
      spillAndRelease()
      grantAtLeast(target(growth))
    }
  }

  // The sort spills itself at its budget, so it will hold at most the budget, or the batch alone.
  private def target(growth: Long): Long =
    math.min(sort.memoryUsed + growth, math.max(sort.memoryBudget, growth))

  /** Acquires what is missing for a grant of `bytes`; whether Spark granted it all. */
  private def grantAtLeast(bytes: Long): Boolean = taskMemory.synchronized {
    val missing = bytes - getUsed
    if (missing > 0) acquireMemory(missing) // may call spill() on us, reentrantly
    getUsed >= bytes
  }

  /** Brings the grant to what the sort holds: gives back the excess, or acquires and else spills. */
  private def settle(): Unit = {
    reportSpills()
    val short = taskMemory.synchronized {
      val held = sort.memoryUsed
      val granted = getUsed
      if (held < granted) freeMemory(granted - held)
      else if (held > granted) acquireMemory(held - granted)
      sort.memoryUsed > getUsed
    }
    if (short) spillAndRelease()
  }

  private def spillAndRelease(): Long = {
    sort.spill()
    reportSpills()
    taskMemory.synchronized {
      val excess = getUsed - sort.memoryUsed
      if (excess > 0) {
        freeMemory(excess)
        excess
      } else 0L
    }
  }

  /** Adds what the sort spilled since the last report to the task's metrics. */
  private def reportSpills(): Unit =
    taskMemory.synchronized {
      val stats = sort.stats
      if (stats.spilledMemory > reportedMemorySpilled) {
        SparkInternals.incMemoryBytesSpilled(task, stats.spilledMemory - reportedMemorySpilled)
        reportedMemorySpilled = stats.spilledMemory
      }
      if (stats.spilledBytes > reportedDiskSpilled) {
        SparkInternals.incDiskBytesSpilled(task, stats.spilledBytes - reportedDiskSpilled)
        reportedDiskSpilled = stats.spilledBytes
      }
    }
}

object NativeSortConsumer {
  private lazy val log = org.slf4j.LoggerFactory.getLogger(getClass)

  /**
   * Starts a native sort for the Spark task running on this thread, in the task's plan; the sort's
   * iterators call this. Its budget is the most execution memory the task could be granted, or
   * the cap [[SpillwayConf.sortMemoryBudget]] if lower (by default one only in on-heap mode): the
   * sort grows with Spark's grant and spills when Spark refuses more or asks for memory back, like
   * Spark's own sorts.
   */
  def forCurrentTask(): (TaskContext, NativeSortConsumer) = {
    val task = TaskContext.get()
    if (task == null) {
      throw new IllegalStateException("a native sort must run on a Spark task's thread (TaskContext.get() is null)")
    }
    (task, create(task, TaskSpill.plan(), budget(task)))
  }

  private def budget(task: TaskContext): Long = {
    val mode = SparkInternals.taskMemoryManager(task).getTungstenMemoryMode
    val cap = SpillwayConf.sortMemoryBudget(task, SparkEnv.get.conf, offHeap = mode == MemoryMode.OFF_HEAP)
    // At least 1 MiB, for a Spark with (almost) no execution memory: it then spills at its grant.
    math.min(cap, math.max(1L << 20, SparkInternals.maxExecutionMemory(mode)))
  }

  /**
   * Starts a native sort of `memoryBudget` bytes in `plan` (the task's), with its memory taken from
   * the task's memory manager, released by the task's completion listener at the latest.
   */
  def create(task: TaskContext, plan: SpillPlan, memoryBudget: Long): NativeSortConsumer = {
    val sort = plan.createSort(memoryBudget)
    val consumer =
      try new NativeSortConsumer(task, SparkInternals.taskMemoryManager(task), sort)
      catch {
        case t: Throwable =>
          sort.close()
          throw t
      }
    try task.addTaskCompletionListener[Unit](_ => consumer.close())
    catch {
      case t: Throwable =>
        consumer.close()
        throw t
    }
    // If the task had completed, Spark ran the listener at once.
    if (consumer.isClosed) throw new IllegalStateException(s"task ${task.taskAttemptId()} has already completed")
    consumer
  }
}
