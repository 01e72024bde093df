package spillway

import java.io.IOException
import java.nio.ByteBuffer
import java.util.concurrent.atomic.AtomicBoolean

import scala.util.control.NonFatal

import org.apache.spark.{SparkEnv, TaskContext}
import org.apache.spark.memory.{MemoryConsumer, TaskMemoryManager}
import org.apache.spark.spillway.SparkInternals
import org.apache.spark.sql.execution.metric.SQLMetric

/**
 * One native sort in a Spark task, as both of Spillway's sorts run it (the RDD sort,
 * [[NativeSortIterator]], and the SQL sort, `spillway.sql.SpillwaySortExec`): each writes its own
 * records into the session's input batch and reads them back from its output, and the session
 * does the rest.
 *
 *  - '''Memory.''' The native sort's bytes, and the session's direct buffers, are taken from the
 *    task's [[TaskMemoryManager]] (a buffer's before it is used; the sort's as it adds records: it
 *    takes no record past what Spark granted it, and says what the next one needs, which the
 *    session then acquires; given back as soon as the sort holds less), and when Spark needs memory
 *    back, [[spill]] really writes a run and frees it. If Spark grants less than a record needs,
 *    the sort spills first; only when Spark grants not even that, or the session's buffers (three
 *    batches at most), does the session hold them ungranted. So it grows as long as Spark grants memory, as Spark's
 *    UnsafeExternalSorter does; [[memoryBudget]] (the cap, else the most Spark could grant)
 *    bounds it too, and the sort spills at whichever is reached first.
 *  - '''Buffers.''' Records cross JNI in direct buffers from [[DirectBufferPool]], in the batch
 *    format of [[SortBatch]]: batches start at 64 KiB and double up to a quarter of the budget,
 *    within 16 KiB and 1 MiB (the sort may hold one batch beyond what Spark granted, and the
 *    arena chunk it opens, a sixteenth of the budget and at most 4 MiB); a record
 *    larger than that gets a batch of its own size. The input batch goes
 *    back to the pool once every batch was added (the native side copies what it is given);
 *    sorted batches come back into two output buffers used in turn, so that the records of the
 *    batch just returned stay where they are until every record of the next one was returned.
 *    The output buffers go back to the pool only when the output was read to the end, after
 *    `beforeOutputIsReused` (the SQL sort copies its last row there). A sort whose output is not
 *    read to the end (a LIMIT, a failure, a cancellation) keeps them until the task ends (its
 *    completion listener holds the session), so no memory is freed under a record still pointed
 *    at, and they are then left to the garbage collector, never pooled.
 *  - '''Cancellation.''' A cancelled task stops between batches, as Spark's InterruptibleIterator
 *    stops it (`TaskContext.killTaskIfInterrupted`).
 *  - '''Metrics.''' Spills count in the task's metrics (memory and disk bytes spilled, as Spark's
 *    own sorts'); the SQL sort's metrics, if given, get the sort time (adding and the first
 *    fetch, which sorts or starts the merge), the peak memory, the spill size, the runs and the
 *    merge passes, once, when the session closes.
 *  - '''Lifetime.''' The native sort is released, and Spark's grant given back, by [[close]]:
 *    when the output is exhausted, on a failure while the input goes in, and in any case by the
 *    task's completion listener (success, failure, cancellation, or an output abandoned by a
 *    LIMIT); releasing the task's plan releases it too.
 *
 * Used from the task's thread, except [[spill]], which Spark may call from another thread of the
 * task. Locking: one lock, the task memory manager's monitor, which Spark already holds when it
 * calls [[spill]] (possibly reentrantly from our own `acquireMemory`). Every change of the grant
 * and of the spills reported to the task's metrics takes it too, so a spill and the task thread
 * never both act on the same reading; the native sort serialises its own calls and its release
 * (see docs/design/concurrency.md).
 */
private[spillway] final class NativeSortSession private (
    task: TaskContext,
    taskMemory: TaskMemoryManager,
    plan: SpillPlan,
    handle: Long,
    val memoryBudget: Long,
    sqlMetrics: Option[NativeSortSession.SqlMetrics],
    beforeOutputIsReused: () => Unit)
    // The tungsten mode: off-heap when Spark has off-heap execution memory (the native sort's
    // memory really is off-heap), on-heap otherwise (then Spark only accounts for it).
    extends MemoryConsumer(taskMemory, taskMemory.pageSizeBytes(), taskMemory.getTungstenMemoryMode) {
  import NativeSortSession._

  private val closed = new AtomicBoolean(false)
  // The stats read last, so that they survive the sort's release.
  @volatile private var lastStats = NativeSort.Stats(0, 0, 0, 0, 0, 0, 0, 0, 0)
  // Spill counters already added to the task's metrics (under taskMemory's monitor).
  private var reportedMemorySpilled = 0L
  private var reportedDiskSpilled = 0L

  private val batchBytes = NativeSortSession.batchBytes(memoryBudget)
  // The sort's state after each add (NativeSpill.sortAdd fills it), used by the task thread only.
  private val state = new Array[Long](NativeSpill.SORT_STATS_LENGTH)
  // Whether the task thread is acquiring what the sort said its records need. Spark, short, spills
  // the requester again as long as each spill frees something, and a sort spilled of its records
  // then frees the arena they would have gone into: while growing, the sort spills for itself once
  // per request, and the records go into the arena it kept. Under taskMemory's monitor.
  private var growing = false
  private var spilledWhileGrowing = false
  private var sortNanos = 0L
  private var peakMemory = 0L

  // The input batch: records in [batchAddress, batchAddress + batchUsed), `records` of them, in the
  // first `batchLength` bytes (a pooled buffer may be larger).
  private var batch: ByteBuffer = _
  private var batchAddress = 0L
  private var batchLength = 0
  private var batchUsed = 0
  private var records = 0
  private var inputBytes = 0L // of every batch added: the output needs no larger buffer
  // Bytes of the direct buffers the session holds (input and output), counted in Spark's grant.
  @volatile private var buffersHeld = 0L // written by the task thread; read by spill() too

  // The two output buffers, used in turn; `current` holds the batch being returned, its records
  // in [address + pos, address + filled).
  private val outs = new Array[ByteBuffer](2)
  private val outAddresses = new Array[Long](2)
  private val outLengths = new Array[Int](2)
  private var current = 1
  private var fetched = false // the first batch has been asked for: the sort has ended its input
  private var ended = false // the output is exhausted, or the session closed
  private var address = 0L
  private var pos = 0
  private var filled = 0

  /**
   * Where to write the next record, of `bytes` bytes in the format of [[SortBatch]] (header
   * included): an address in the input batch, valid until the next call. Sends the batch first
   * if the record does not fit, and grows it for a record larger than it. Before the output is
   * read.
   *
   * @throws org.apache.spark.TaskKilledException if the task was cancelled
   * @throws SpillLimitExceededException if a spill would pass the plan's limit
   */
  def recordAt(bytes: Int): Long = {
    if (bytes > batchLength - batchUsed) makeRoom(bytes)
    val at = batchAddress + batchUsed
    batchUsed += bytes
    records += 1
    at
  }

  /** Sends the last batch and gives the input batch back to the pool. */
  def endInput(): Unit = {
    send()
    if (batch != null) {
      buffersHeld -= batch.capacity()
      DirectBufferPool.give(batch) // the native side copied every record: nothing reads it any more
      batch = null
      batchAddress = 0L
      batchLength = 0
    }
  }

  /**
   * Whether a sorted record is at [[record]]. The first call ends the input and sorts (or starts
   * merging the runs); at the end the session is closed.
   */
  def hasRecord: Boolean = pos < filled || (!ended && fetch())

  /**
   * The address of the next sorted record, if [[hasRecord]]. Its bytes stay there until every
   * record of the following batch has been passed, so at least until the next [[advance]].
   */
  def record: Long = address + pos

  /**
   * Passes the record at [[record]], of `bytes` bytes. Past a batch's last record, fetches the
   * next batch (into the other output buffer), so that the end of the output, and with it the
   * last record, is known when the last record is passed.
   */
  def advance(bytes: Int): Unit = {
    pos += bytes
    if (pos == filled && !ended) fetch()
  }

  /** The native sort's counters now, or the last ones read before it was released. */
  def stats: NativeSort.Stats = {
    ifOpen(()) { () => lastStats = NativeSort.Stats.read(handle) }
    lastStats
  }

  /**
   * Spark asks for memory back (for another consumer, or for ourselves when Spark is short): write
   * what the sort holds as a run and give the memory freed back to Spark. When the memory is for
   * ourselves (the next batch, a buffer), the sort keeps its record arena, emptied, for the
   * records that come next (mapping it again would have the kernel clear every page), and its
   * first two such spills write only the older half of the records (see sortSpill). If that
   * still leaves the session short, it spills again and gives everything back.
   *
   * @return bytes given back to Spark
   */
  override def spill(size: Long, trigger: MemoryConsumer): Long =
    if (trigger ne this) spillAndRelease(refill = false)
    else if (!growing) spillAndRelease(refill = true)
    else if (spilledWhileGrowing) 0L // Spark asks again while a spill frees anything: see growing
    else {
      spilledWhileGrowing = true
      spillAndRelease(refill = true)
    }

  /**
   * Releases the native sort (its run files and memory), gives all its memory back to Spark and
   * reports the metrics. Idempotent; the output, if not exhausted, is abandoned.
   */
  def close(): Unit =
    // Marked first, so that a failed release is not retried against a released handle.
    if (closed.compareAndSet(false, true)) {
      ended = true
      pos = 0
      filled = 0
      try {
        plan.ifOpen { () =>
          lastStats = NativeSort.Stats.read(handle) // the final counters
          if (lastStats.runs > 0) ExecutorReports.observeBytesInUse() // its runs are still on disk
          NativeSpill.releaseSort(handle)
        }
      } catch {
        // Like a plan's release: the task's result is good and a retry would not help.
        case e: IOException =>
          log.warn(s"Spillway could not remove every run file of a sort in task ${task.taskAttemptId()}", e)
      } finally {
        plan.spills.sortSpilled(lastStats.runs, lastStats.spilledLogicalBytes, lastStats.spilledBytes)
        reportSpills(lastStats)
        taskMemory.synchronized(if (getUsed > 0) freeMemory(getUsed))
        reportSqlMetrics()
      }
    }

  def isClosed: Boolean = closed.get

  override def toString: String =
    s"NativeSortSession(task ${task.taskAttemptId()}, granted $getUsed bytes, budget $memoryBudget bytes${if (isClosed) ", closed" else ""})"

  private def makeRoom(bytes: Int): Unit = {
    // The first batches are small and double up to batchBytes: the many small sorts of a query
    // (under its joins) each allocate little.
    if (batch == null) takeBatch(math.min(batchBytes, FirstBatchBytes))
    if (bytes <= batchLength - batchUsed) return
    send()
    // Grown for a record larger than the batch (for this sort), or doubled up to batchBytes.
    val grown = math.max(bytes.toLong, math.min(batchBytes.toLong, 2L * batchLength)).toInt
    if (grown > batchLength) {
      if (grown > batch.capacity()) {
        buffersHeld -= batch.capacity()
        DirectBufferPool.give(batch) // sent: the native side copied its records
        batch = null // if the next take fails, nothing writes into the buffer given back
        batchAddress = 0L
        batchLength = 0
        takeBatch(grown)
      }
      batchLength = grown
    }
  }

  private def takeBatch(bytes: Int): Unit = {
    batch = DirectBufferPool.take(bytes)
    batchAddress = DirectBufferPool.address(batch)
    batchLength = bytes
    holdBuffer(batch)
  }

  /** Counts a buffer just taken in the grant: acquired from Spark, spilling first if Spark is short. */
  private def holdBuffer(buffer: ByteBuffer): Unit = {
    buffersHeld += buffer.capacity()
    reconcileGrant()
  }

  /** Adds the input batch to the native sort, within Spark's grant, then stops if the task was cancelled. */
  private def send(): Unit = if (records > 0) {
    val t0 = System.nanoTime()
    try {
      addWithinGrant()
      lastStats = NativeSort.Stats.of(state)
      reconcileGrant(lastStats)
    } finally sortNanos += System.nanoTime() - t0
    inputBytes += batchUsed
    peakMemory = math.max(peakMemory, getUsed)
    batchUsed = 0
    records = 0
    SparkInternals.killTaskIfInterrupted(task)
  }

  private def fetch(): Boolean = {
    if (!fetched) endInput()
    // Into the other buffer: records of the batch just returned stay valid. The batch being
    // returned changes only once the new one is in, so a failure leaves it as it was.
    val other = 1 - current
    if (outs(other) == null) setOut(other, math.min(batchBytes.toLong, math.max(inputBytes, FirstBatchBytes.toLong)).toInt)
    val t0 = System.nanoTime()
    var n = sortNext(other)
    if (!fetched) sortNanos += System.nanoTime() - t0 // ending the input sorts: sort time
    fetched = true
    while (n < 0) { // the next record alone needs -n bytes
      // A buffer replaced by a larger one is left to the garbage collector: simpler, and rare.
      setOut(other, -n)
      n = sortNext(other)
    }
    peakMemory = math.max(peakMemory, getUsed)
    current = other
    address = outAddresses(current)
    pos = 0
    filled = n
    if (n == 0) {
      close()
      beforeOutputIsReused()
      giveBackOutput()
    }
    n > 0
  }

  private def sortNext(out: Int): Int = {
    val n = call(() => NativeSpill.sortNext(handle, outs(out), 0, outLengths(out)))
    reconcileGrant() // merging takes read buffers, and records returned free memory
    n
  }

  private def setOut(i: Int, bytes: Int): Unit = {
    val taken = DirectBufferPool.take(bytes)
    if (outs(i) != null) buffersHeld -= outs(i).capacity() // replaced: left to the garbage collector
    outs(i) = taken
    outAddresses(i) = DirectBufferPool.address(outs(i))
    outLengths(i) = bytes
    holdBuffer(outs(i))
  }

  /** Only once every record was returned and `beforeOutputIsReused` ran: nothing points into them. */
  private def giveBackOutput(): Unit =
    for (i <- outs.indices if outs(i) != null) {
      buffersHeld -= outs(i).capacity()
      DirectBufferPool.give(outs(i))
      outs(i) = null
      outAddresses(i) = 0L
    }

  /**
   * Adds the input batch, the native sort held to what Spark granted it: where it stops short, the
   * session acquires what the sort says the next record needs ([[state]]'s memoryNeeded) and goes
   * on. Spark, short, may spill the sort to grant it (keeping the arena for these records), and
   * the sort then needs less: it is asked again. Refused twice in a row, the session hands back
   * everything the sort holds and asks once more; refused still, the sort takes the rest of the
   * batch ungranted (at most this batch more than granted), and reconcileGrant() tries again.
   */
  private def addWithinGrant(): Unit = {
    var off = 0
    var refusals = 0
    while (off < batchUsed) {
      val limit = if (refusals > 2) Long.MaxValue else math.max(0L, taskMemory.synchronized(getUsed) - buffersHeld)
      val from = off
      off += call(() => NativeSpill.sortAdd(handle, batch, from, batchUsed - from, limit, state))
      if (off < batchUsed) {
        if (off > from) refusals = 0
        if (!grantForRecords(state(MemoryNeeded) + buffersHeld)) {
          refusals += 1
          if (refusals == 2) spillAndRelease(refill = false)
        }
      }
    }
  }

  /** grantAtLeast, for the sort's records: see growing. */
  private def grantForRecords(bytes: Long): Boolean = taskMemory.synchronized {
    growing = true
    spilledWhileGrowing = false
    try grantAtLeast(bytes)
    finally growing = false
  }

  /** Acquires what is missing for a grant of `bytes`; whether Spark granted it all. */
  private def grantAtLeast(bytes: Long): Boolean = taskMemory.synchronized {
    val missing = bytes - getUsed
    if (missing > 0) acquireMemory(missing) // may call spill() on us, reentrantly
    getUsed >= bytes
  }

  /**
   * Brings the grant to what the sort holds: gives back the excess, or acquires and else spills.
   * `now` is the sort's counters, read afresh unless the caller just had them.
   */
  private def reconcileGrant(now: NativeSort.Stats = stats): Unit = {
    reportSpills(now)
    val short = taskMemory.synchronized {
      val held = memoryHeld
      val granted = getUsed
      if (held < granted) {
        freeMemory(granted - held)
        false
      } else if (held > granted) {
        acquireMemory(held - granted)
        memoryHeld > getUsed // Spark, short, may have spilled the sort
      } else false
    }
    if (short) spillAndRelease(refill = false)
  }

  private def spillAndRelease(refill: Boolean): Long = {
    ifOpen(0L)(() => NativeSpill.sortSpill(handle, refill))
    reportSpills(stats)
    taskMemory.synchronized {
      val excess = getUsed - memoryHeld
      if (excess > 0) {
        freeMemory(excess)
        excess
      } else 0L
    }
  }

  /** Bytes of memory the native sort holds now; 0 once released. */
  private def memoryUsed: Long = ifOpen(0L)(() => NativeSpill.sortMemoryUsed(handle))

  /** What the grant must cover: the native sort's memory and the session's buffers. */
  private def memoryHeld: Long = memoryUsed + buffersHeld

  /** Adds what the sort spilled since the last report to the task's metrics. */
  private def reportSpills(stats: NativeSort.Stats): Unit =
    taskMemory.synchronized {
      if (stats.spilledMemory > reportedMemorySpilled) {
        SparkInternals.incMemoryBytesSpilled(task, stats.spilledMemory - reportedMemorySpilled)
        reportedMemorySpilled = stats.spilledMemory
      }
      if (stats.spilledBytes > reportedDiskSpilled) {
        SparkInternals.incDiskBytesSpilled(task, stats.spilledBytes - reportedDiskSpilled)
        reportedDiskSpilled = stats.spilledBytes
      }
    }

  private def reportSqlMetrics(): Unit = sqlMetrics.foreach { m =>
    val stats = lastStats // the last counters survive the sort's release
    m.sortTime += sortNanos / 1000000L
    m.peakMemory += math.max(peakMemory, stats.memoryUsed)
    m.spillSize += stats.spilledMemory
    m.runsSpilled += stats.runs
    m.mergePasses += stats.mergePasses
    m.remoteRuns += stats.remoteRuns
    m.remoteSpillSize += stats.remoteBytes
  }

  // The library owns the handle's validity: a call that lost a race with the release (or the
  // plan's) says "closed" rather than the library's "unknown handle".
  private def call[T](op: () => T): T = plan.withOpenPlan { () =>
    if (isClosed) throw new IllegalStateException("native sort is closed")
    try op()
    catch {
      case e: IllegalStateException if isClosed => throw new IllegalStateException("native sort is closed", e)
    }
  }

  private def ifOpen[T](whenClosed: T)(op: () => T): T = {
    var result = whenClosed
    plan.ifOpen { () =>
      if (!isClosed) {
        try result = op()
        catch { case _: IllegalStateException if isClosed => }
      }
    }
    result
  }
}

private[spillway] object NativeSortSession {
  private lazy val log = org.slf4j.LoggerFactory.getLogger(classOf[NativeSortSession])

  private val FirstBatchBytes = 64 << 10

  // Where sortAdd's state says what the next record needs granted.
  private lazy val MemoryNeeded = NativeSpill.sortStatsIndex("memoryNeeded")

  /**
   * Bytes of the input and output batches of a sort of `budget` bytes: large enough to make the
   * JNI calls rare (at most 1 MiB), and a quarter of the budget at most (at least 16 KiB), since
   * the sort may hold one batch beyond what Spark granted.
   */
  private[spillway] def batchBytes(budget: Long): Int = math.min(1L << 20, math.max(16L << 10, budget / 4)).toInt

  /**
   * The SQL sort's metrics (SortExec's, plus the runs spilled, the merge passes, and the runs and
   * bytes that went to the remote tier), which a session adds to when it closes.
   */
  final case class SqlMetrics(sortTime: SQLMetric, peakMemory: SQLMetric, spillSize: SQLMetric, runsSpilled: SQLMetric,
      mergePasses: SQLMetric, remoteRuns: SQLMetric, remoteSpillSize: SQLMetric)

  /**
   * Starts a native sort for the Spark task running on this thread, in the task's plan. Its budget
   * is the most execution memory the task could be granted, or the cap
   * [[SpillwayConf.sortMemoryBudget]] if one is set lower (none by default): the sort
   * grows with Spark's grant and spills when Spark refuses more or asks for memory back, like
   * Spark's own sorts.
   *
   * @param sqlMetrics the SQL sort's metrics, added to when the session closes
   * @param beforeOutputIsReused runs once the output was read to the end, before its buffers go
   *     back to the pool
   * @throws IllegalStateException outside a Spark task
   * @throws IllegalArgumentException if a Spillway setting the sort or the plan reads is invalid
   */
  def forCurrentTask(sqlMetrics: Option[SqlMetrics] = None, beforeOutputIsReused: () => Unit = () => ()): NativeSortSession = {
    val task = TaskContext.get()
    if (task == null) {
      throw new IllegalStateException("a native sort must run on a Spark task's thread (TaskContext.get() is null)")
    }
    start(task, TaskSpill.plan(), budget(task), sqlMetrics, beforeOutputIsReused)
  }

  private def budget(task: TaskContext): Long = {
    val mode = SparkInternals.taskMemoryManager(task).getTungstenMemoryMode
    val cap = SpillwayConf.sortMemoryBudget(task, SparkEnv.get.conf)
    // At least 1 MiB, for a Spark with (almost) no execution memory: it then spills at its grant.
    math.min(cap, math.max(1L << 20, SparkInternals.maxExecutionMemory(mode)))
  }

  /** A session of `memoryBudget` bytes in `plan` (the task's), closed by the task's completion listener at the latest. */
  private def start(task: TaskContext, plan: SpillPlan, memoryBudget: Long, sqlMetrics: Option[SqlMetrics],
      beforeOutputIsReused: () => Unit): NativeSortSession = {
    val handle = plan.createSort(memoryBudget)
    val session =
      try new NativeSortSession(task, SparkInternals.taskMemoryManager(task), plan, handle, memoryBudget, sqlMetrics,
        beforeOutputIsReused)
      catch {
        case t: Throwable =>
          try plan.ifOpen(() => NativeSpill.releaseSort(handle))
          catch { case NonFatal(e) => t.addSuppressed(e) }
          throw t
      }
    // The listener holds the session, and so the output buffers records point into, until the
    // task ends.
    try task.addTaskCompletionListener[Unit](_ => session.close())
    catch {
      case t: Throwable =>
        session.close()
        throw t
    }
    // If the task had completed, Spark ran the listener at once.
    if (session.isClosed) throw new IllegalStateException(s"task ${task.taskAttemptId()} has already completed")
    session
  }
}
