package spillway

import scala.util.control.NonFatal

import org.apache.spark.unsafe.Platform

/**
 * The records of `input` sorted by the native sort of the current task's spill plan: unsigned
 * byte-wise key order, stable for equal keys.
 *
 * Lazy: nothing happens until the first `hasNext`/`next`. Then the whole input is consumed, each
 * record written into the batches of a [[NativeSortSession]] in the format of [[SortBatch]]
 * (never one JNI call per record); sorted records are copied out of its output into fresh arrays.
 * An empty input creates neither plan nor sort. The sort is released as soon as the output is
 * exhausted, and in any case when the task completes (success, failure or cancellation).
 *
 * Must be used on the thread of a Spark task.
 */
final class NativeSortIterator private[spillway] (input: Iterator[(Array[Byte], Array[Byte])])
    extends Iterator[(Array[Byte], Array[Byte])] {

  private var session: NativeSortSession = _
  private var started = false

  override def hasNext: Boolean = {
    if (!started) start()
    session != null && session.hasRecord
  }

  override def next(): (Array[Byte], Array[Byte]) = {
    if (!hasNext) throw new NoSuchElementException("the sorted records are exhausted")
    val at = session.record
    val key = new Array[Byte](SortBatch.keyLength(at))
    val value = new Array[Byte](SortBatch.valueLength(at))
    Platform.copyMemory(null, at + SortBatch.HeaderBytes, key, Platform.BYTE_ARRAY_OFFSET, key.length.toLong)
    Platform.copyMemory(null, at + SortBatch.HeaderBytes + key.length, value, Platform.BYTE_ARRAY_OFFSET, value.length.toLong)
    session.advance(SortBatch.HeaderBytes + key.length + value.length) // the record is copied: its buffer may be refilled
    (key, value)
  }

  /** The native sort's counters (records, runs, bytes spilled); None before it started or if the input was empty. */
  def stats: Option[NativeSort.Stats] = Option(session).map(_.stats)

  private def start(): Unit = {
    started = true
    if (!input.hasNext) return
    session = NativeSortSession.forCurrentTask()
    try {
      while (input.hasNext) {
        val (key, value) = input.next()
        if (key == null || value == null) throw new NullPointerException("a native sort takes no null key or value")
        SortBatch.put(session.recordAt(NativeSortIterator.recordBytes(key, value)), key, value)
      }
      session.endInput()
    } catch {
      case NonFatal(e) =>
        session.close() // the sort may be broken (a failed spill); the task's listener would release it later
        throw e
    }
  }
}

object NativeSortIterator {
  private def recordBytes(key: Array[Byte], value: Array[Byte]): Int = {
    val size = SortBatch.recordBytes(key, value)
    if (size > SortBatch.MaxRecordBytes) {
      throw new IllegalArgumentException(
        s"a record of a ${key.length}-byte key and a ${value.length}-byte value is too large for a sort batch (2 GiB)")
    }
    size.toInt
  }
}
