package spillway

import java.nio.{ByteBuffer, ByteOrder}

import scala.util.control.NonFatal

import org.apache.spark.TaskContext
import org.apache.spark.spillway.SparkInternals

/**
 * The records of `input` sorted by the native sort of the current task's spill plan: unsigned
 * byte-wise key order, stable for equal keys.
 *
 * Lazy: nothing happens until the first `hasNext`/`next`. Then the whole input is consumed and sent
 * across JNI in batches (never one call per record) through a reusable direct buffer, encoded as
 * the sort natives of [[spillway.NativeSpill]] document; sorted records come back the same way.
 * An empty input creates neither plan nor sort. The sort is released as soon as the output is
 * exhausted, and in any case when the task completes (success, failure or cancellation).
 *
 * Must be used on the thread of a Spark task.
 */
final class NativeSortIterator(input: Iterator[(Array[Byte], Array[Byte])], batchBytes: Int = NativeSortIterator.DefaultBatchBytes)
    extends Iterator[(Array[Byte], Array[Byte])] {
  require(batchBytes >= SortBatch.HeaderBytes, s"batchBytes too small: $batchBytes")

  private var consumer: NativeSortConsumer = _
  private var started = false
  private var finished = false
  // The output batch: records in out[pos, filled).
  private var out: ByteBuffer = _
  private var pos = 0
  private var filled = 0

  override def hasNext: Boolean = {
    if (!started) start()
    pos < filled || (!finished && fetch())
  }

  override def next(): (Array[Byte], Array[Byte]) = {
    if (!hasNext) throw new NoSuchElementException("the sorted records are exhausted")
    val keyLength = out.getInt(pos)
    val valueLength = out.getInt(pos + 4)
    val key = new Array[Byte](keyLength)
    val value = new Array[Byte](valueLength)
    out.get(pos + SortBatch.HeaderBytes, key)
    out.get(pos + SortBatch.HeaderBytes + keyLength, value)
    pos += SortBatch.HeaderBytes + keyLength + valueLength
    (key, value)
  }

  /** The native sort's counters (records, runs, bytes spilled); None before it started or if the input was empty. */
  def stats: Option[spillway.ExternalSort.Stats] = Option(consumer).map(_.sort.stats)

  private def start(): Unit = {
    started = true
    if (!input.hasNext) {
      finished = true
      return
    }
    val (task, newConsumer) = NativeSortConsumer.forCurrentTask()
    consumer = newConsumer
    try addAll(task)
    catch {
      case NonFatal(e) =>
        finish() // the sort may be broken (a failed spill); the task's listener would release it later
        throw e
    }
    out = ByteBuffer.allocateDirect(batchBytes).order(ByteOrder.LITTLE_ENDIAN)
  }

  private def addAll(task: TaskContext): Unit = {
    var batch = ByteBuffer.allocateDirect(batchBytes).order(ByteOrder.LITTLE_ENDIAN)
    var records = 0
    def flush(): Unit = if (records > 0) {
      consumer.add(batch, batch.position(), records)
      batch.clear()
      records = 0
      SparkInternals.killTaskIfInterrupted(task) // a cancelled task stops between batches
    }
    while (input.hasNext) {
      val (key, value) = input.next()
      if (key == null || value == null) throw new NullPointerException("a native sort takes no null key or value")
      val size = NativeSortIterator.recordBytes(key, value)
      if (size > batch.remaining()) {
        flush()
        // A record larger than the whole buffer: grow it (and keep it grown for this sort).
        if (size > batch.capacity()) batch = ByteBuffer.allocateDirect(size.toInt).order(ByteOrder.LITTLE_ENDIAN)
      }
      SortBatch.put(batch, key, value)
      records += 1
    }
    flush()
  }

  private def fetch(): Boolean = {
    var n = consumer.next(out, out.capacity())
    while (n < 0) { // the next record alone needs -n bytes
      out = ByteBuffer.allocateDirect(-n).order(ByteOrder.LITTLE_ENDIAN)
      n = consumer.next(out, out.capacity())
    }
    pos = 0
    filled = n
    if (n == 0) finish()
    n > 0
  }

  private def finish(): Unit = {
    finished = true
    out = null
    filled = 0
    pos = 0
    if (consumer != null) consumer.close()
  }
}

object NativeSortIterator {
  /** Bytes of the reusable input and output buffers: large enough to make the JNI calls rare. */
  val DefaultBatchBytes: Int = 1 << 20

  private def recordBytes(key: Array[Byte], value: Array[Byte]): Long = {
    val size = SortBatch.recordBytes(key, value)
    if (size > Int.MaxValue - 16) {
      throw new IllegalArgumentException(
        s"a record of a ${key.length}-byte key and a ${value.length}-byte value is too large for a sort batch (2 GiB)")
    }
    size
  }
}
