package spillway

import java.nio.ByteBuffer
import java.util.concurrent.atomic.AtomicBoolean

/**
 * A native external sort of (key, value) byte records, owned by a [[SpillPlan]] (see the sort
 * natives of [[NativeSpill]] for the batch format and the exact semantics). Created by
 * [[SpillPlan.createSort]].
 *
 * Thread-safe, so that Spark can ask it to [[spill]] from another thread while the task adds or
 * reads, without a lock of its own: the native sort serialises its calls and its release on its
 * own mutex, and refuses its handle forever once released (by [[close]] or by the plan's release).
 * This class keeps only whether it was closed (see docs/concurrency.md).
 */
final class ExternalSort private[spillway] (plan: SpillPlan, handle: Long, val memoryBudget: Long)
    extends AutoCloseable {
  private val closed = new AtomicBoolean(false)
  // The stats read last, so that they survive the sort's release.
  @volatile private var lastStats = ExternalSort.Stats(0, 0, 0, 0, 0, 0, 0)

  /**
   * Copies the records of `batch[offset, offset + length)` into the sort; the buffer may be reused
   * afterwards. May spill a run first if the records would pass the memory budget.
   *
   * @throws IllegalArgumentException for a malformed batch (nothing is added; the sort stays usable)
   * @throws SpillLimitExceededException if a spill would pass the plan's limit (the sort is broken)
   */
  def add(batch: ByteBuffer, offset: Int, length: Int): Unit =
    call(() => NativeSpill.sortAdd(handle, batch, offset, length))

  /**
   * Spills what the sort holds in memory as one sorted run, also while it is being read.
   *
   * @return bytes of memory freed; 0 if there was nothing worth spilling or the sort is closed
   */
  def spill(): Long = ifOpen(0L)(() => NativeSpill.sortSpill(handle))

  /** Bytes of memory the sort holds now; 0 once closed. */
  def memoryUsed: Long = ifOpen(0L)(() => NativeSpill.sortMemoryUsed(handle))

  /** At most what adding a batch of `length` bytes holding `records` records adds to [[memoryUsed]]; 0 once closed. */
  def addGrowthBound(length: Int, records: Int): Long =
    ifOpen(0L)(() => NativeSpill.sortAddGrowthBound(handle, length, records))

  /**
   * Ends the input on the first call, then fills the direct buffer `out[offset, offset + length)`
   * with whole records in sorted order.
   *
   * @return bytes filled, 0 at the end, or `-n` if the next record alone needs `n` bytes
   */
  def next(out: ByteBuffer, offset: Int, length: Int): Int =
    call(() => NativeSpill.sortNext(handle, out, offset, length))

  /** The sort's counters now, or the last ones read before it was closed. */
  def stats: ExternalSort.Stats = {
    ifOpen(()) { () =>
      lastStats = ExternalSort.Stats.read(handle)
    }
    lastStats
  }

  def isClosed: Boolean = closed.get

  /**
   * Deletes the sort's run files and drops its memory. Idempotent; once the plan is closed there
   * is nothing left to release (the plan's release closed the sort).
   */
  override def close(): Unit =
    // Marked first, so that a failed release is not retried against a released handle.
    if (closed.compareAndSet(false, true)) {
      plan.ifOpen { () =>
        lastStats = ExternalSort.Stats.read(handle) // the final counters
        NativeSpill.releaseSort(handle)
      }
    }

  override def toString: String =
    s"ExternalSort(budget=$memoryBudget bytes${if (isClosed) ", closed" else ""})"

  private def call[T](op: () => T): T = plan.withOpenPlan { () =>
    if (isClosed) throw new IllegalStateException("external sort is closed")
    try op()
    catch {
      case e: IllegalStateException if isClosed => throw new IllegalStateException("external sort is closed", e)
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

object ExternalSort {

  /**
   * @param records records added
   * @param runs sorted runs spilled to disk
   * @param spilledBytes bytes the run files take on disk: compressed, encrypted, framed (Spark's
   *     diskBytesSpilled)
   * @param spilledMemory bytes of memory freed by spills (Spark's memoryBytesSpilled)
   * @param memoryUsed bytes of memory held now
   * @param spilledLogicalBytes the records' bytes written to run files, before compression
   * @param mergePasses passes of the merge over spilled data: 0 with nothing spilled, 1 for one
   *     merge, more when the runs were too many for one
   */
  final case class Stats(records: Long, runs: Long, spilledBytes: Long, spilledMemory: Long, memoryUsed: Long,
      spilledLogicalBytes: Long, mergePasses: Long)

  object Stats {
    // Positions in NativeSpill.sortStats' array, found by name: the library owns the layout.
    private lazy val fields = Seq("records", "runs", "spilledBytes", "spilledMemory", "memoryUsed",
      "spilledLogicalBytes", "mergePasses").map(NativeSpill.sortStatsIndex)

    /** The counters of the live native sort `handle`. */
    private[spillway] def read(handle: Long): Stats = {
      val out = new Array[Long](NativeSpill.SORT_STATS_LENGTH)
      NativeSpill.sortStats(handle, out)
      val v = fields.map(out(_))
      Stats(v(0), v(1), v(2), v(3), v(4), v(5), v(6))
    }
  }
}
