package spillway.sql

import java.nio.{ByteBuffer, ByteOrder}
import java.util.concurrent.atomic.AtomicLong

import scala.util.control.NonFatal

import org.apache.spark.{TaskContext, TaskKilledException}
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, BindReferences, BoundReference, Expression, SortOrder, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.plans.physical.{Distribution, OrderedDistribution, Partitioning, UnspecifiedDistribution}
import org.apache.spark.sql.execution.{SparkPlan, UnaryExecNode}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}
import org.apache.spark.unsafe.Platform

import spillway.{DirectBufferPool, DirectBuffers, NativeSortConsumer, SortBatch}

/**
 * Spark's `SortExec` run by Spillway's native external sort: the same ordering, distribution and
 * output, with the keys encoded by [[SortKeyEncoder]] as order-preserving bytes and each row
 * carried as its `UnsafeRow` bytes. The sort takes its memory from the task's execution memory and
 * spills through the task's spill plan when Spark asks (see `NativeSortConsumer`).
 *
 * Put in place of `SortExec` by [[SpillwaySortRule]] when every key type is supported.
 */
case class SpillwaySortExec(sortOrder: Seq[SortOrder], global: Boolean, child: SparkPlan) extends UnaryExecNode {

  override def output: Seq[Attribute] = child.output

  override def outputOrdering: Seq[SortOrder] = sortOrder

  // A sort changes no partitioning; a global one needs its input range-partitioned, like SortExec.
  override def outputPartitioning: Partitioning = child.outputPartitioning

  override def requiredChildDistribution: Seq[Distribution] =
    if (global) OrderedDistribution(sortOrder) :: Nil else UnspecifiedDistribution :: Nil

  // SortExec's metrics under the same names, plus the runs the native sort wrote and its merge passes.
  override lazy val metrics: Map[String, SQLMetric] = Map(
    "sortTime" -> SQLMetrics.createTimingMetric(sparkContext, "sort time"),
    "peakMemory" -> SQLMetrics.createSizeMetric(sparkContext, "peak memory"),
    "spillSize" -> SQLMetrics.createSizeMetric(sparkContext, "spill size"),
    "runsSpilled" -> SQLMetrics.createMetric(sparkContext, "runs spilled"),
    "mergePasses" -> SQLMetrics.createMetric(sparkContext, "merge passes"))

  protected override def doExecute(): RDD[InternalRow] = {
    val keyExpressions: Seq[Expression] = sortOrder.map(o => BindReferences.bindReference(o.child, child.output))
    val keys = sortOrder.map(SortKeyEncoder.Key(_))
    // Keys that are plain columns are read from the input row; others are projected first.
    val columns = keyExpressions.collect { case b: BoundReference => b.ordinal }
    val (encoder, projectKeys) =
      if (columns.size == keyExpressions.size) (new SortKeyEncoder(keys, columns.toArray), false)
      else (new SortKeyEncoder(keys), true)
    val schema = child.output.map(_.dataType)
    val sortMetrics = SpillwaySortMetrics(metrics("sortTime"), metrics("peakMemory"), metrics("spillSize"), metrics("runsSpilled"),
      metrics("mergePasses"))
    child.execute().mapPartitions { rows =>
      val keyRow: InternalRow => InternalRow = if (projectKeys) UnsafeProjection.create(keyExpressions) else identity
      new SpillwaySortIterator(rows, keyRow, encoder, () => UnsafeProjection.create(schema.toArray), schema.size, sortMetrics)
    }
  }

  override protected def withNewChildInternal(newChild: SparkPlan): SpillwaySortExec = copy(child = newChild)
}

private[sql] final case class SpillwaySortMetrics(sortTime: SQLMetric, peakMemory: SQLMetric, spillSize: SQLMetric, runsSpilled: SQLMetric,
    mergePasses: SQLMetric)

/**
 * The rows of `input` sorted by their encoded keys. Lazy: the input is consumed on the first
 * `hasNext`, sent to the native sort in batches of `u32 keyLength | u32 valueLength | key | value`
 * (little-endian), each row's key encoded and its `UnsafeRow` bytes copied straight into a direct
 * buffer that the native side reads in place. The sorted batches come back into two direct
 * buffers used in turn, and the returned `UnsafeRow` (one object, reused, as Spark's own sort
 * does) points into them, with no copy.
 *
 * The lifetime of a returned row: it stays valid until `next()` is called again, and longer: its
 * buffer is refilled only after every row of the following batch has been returned. That is what
 * Spark's own sort promises once it has spilled (its spill readers reuse one buffer), so every
 * operator that keeps a row copies it. The last row is returned as an on-heap copy, as Spark's
 * own sort returns its last row: the `next()` that returns a batch's last row fetches the next
 * batch, and when there is none, points the row object (the one every `next()` returns) at a
 * copy, so the row and the values read from it without a copy (a `UTF8String`) stay valid for
 * good; the output buffers, which nothing can read any more, go back to [[DirectBufferPool]]
 * for the next sort before that row is returned, as the input batch does once every batch was
 * added.
 * A sort whose output is not read to the end keeps its buffers until the task ends (the task's
 * completion listener holds this iterator), so their memory is not freed under a row, and they
 * are then left to the garbage collector, never pooled. The sort is released when the output is
 * exhausted or the task ends, whichever comes first.
 */
private[sql] final class SpillwaySortIterator(
    input: Iterator[InternalRow],
    keyRow: InternalRow => InternalRow,
    encoder: SortKeyEncoder,
    unsafeProjection: () => UnsafeProjection,
    numFields: Int,
    metrics: SpillwaySortMetrics)
    extends Iterator[InternalRow] {
  import SpillwaySortIterator._

  private var consumer: NativeSortConsumer = _
  private var batchBytes = 0
  private var started = false
  private var finished = false
  private var reported = false
  private var sortNanos = 0L
  private var peakMemory = 0L
  private var inputBytes = 0L // of every batch added: the output needs no larger buffer

  // The two output buffers, used in turn; `current` holds the batch being returned. Pooled
  // buffers may be larger than asked for: a batch fills only its length.
  private val outs = new Array[ByteBuffer](2)
  private val outAddresses = new Array[Long](2)
  private val outLengths = new Array[Int](2)
  private var current = 1
  private var fetched = false // the first batch has been asked for: the sort has ended its input
  private var address = 0L // of the current batch: records in [address + pos, address + filled)
  private var pos = 0
  private var filled = 0
  private val row = new UnsafeRow(numFields)
  private var returned = false // the row has been pointed into an output buffer

  override def hasNext: Boolean = {
    if (!started) start()
    pos < filled || (!finished && fetch())
  }

  override def next(): InternalRow = {
    if (!hasNext) throw new NoSuchElementException("the sorted rows are exhausted")
    val at = address + pos
    val keyLength = getIntLE(at)
    val valueLength = getIntLE(at + 4)
    row.pointTo(null, at + HeaderBytes + keyLength, valueLength)
    returned = true
    pos += HeaderBytes + keyLength + valueLength
    // The last row of its batch: fetch the next batch now (into the other buffer, whose rows are
    // done), so that the very last row is known here and returned as an on-heap copy.
    if (pos == filled && !finished) fetch()
    row
  }

  private def start(): Unit = {
    started = true
    if (!input.hasNext) {
      finished = true
      return
    }
    val (task, newConsumer) = NativeSortConsumer.forCurrentTask()
    consumer = newConsumer
    batchBytes = SpillwaySortIterator.batchBytes(consumer.sort.memoryBudget)
    // Registered after the consumer's own listener, so it runs first (Spark runs them in reverse):
    // the metrics of a sort whose output is not read to the end are reported too. It also keeps
    // this iterator, and so the output buffers rows point into, reachable until the task ends
    // (a sort read to the end lets go of them sooner: see the class doc).
    task.addTaskCompletionListener[Unit](_ => report())
    try addAll(task)
    catch {
      case NonFatal(e) =>
        finish()
        throw e
    }
  }

  private def addAll(task: TaskContext): Unit = {
    // The first batches are small and double up to batchBytes: the many small sorts of a query
    // (under its joins) each allocate little.
    var length = math.min(batchBytes, FirstBatchBytes) // of the batch: a pooled buffer may be larger
    var batch = DirectBufferPool.take(length)
    var base = DirectBuffers.address(batch)
    var used = 0
    var records = 0
    val key = new KeyBuffer(64)
    var toUnsafe: UnsafeProjection = null

    def flush(): Unit = if (records > 0) {
      timed(consumer.add(batch, used, records))
      inputBytes += used
      peakMemory = math.max(peakMemory, consumer.getUsed)
      used = 0
      records = 0
      if (task.isInterrupted()) throw new TaskKilledException("cancelled") // stops between batches
    }

    while (input.hasNext) {
      val inputRow = input.next()
      val value = inputRow match {
        case u: UnsafeRow => u
        case other =>
          if (toUnsafe == null) toUnsafe = unsafeProjection()
          toUnsafe(other)
      }
      key.reset()
      encoder.encode(keyRow(inputRow), key)
      val valueLength = value.getSizeInBytes
      val size = HeaderBytes.toLong + key.length + valueLength
      if (size > Int.MaxValue - 16) {
        throw new IllegalArgumentException(s"a row of $valueLength bytes with a ${key.length}-byte sort key is too large for a sort batch (2 GiB)")
      }
      if (size > length - used) {
        flush()
        // Grown for a row larger than the batch (for this sort), or doubled up to batchBytes.
        val grown = math.max(size, math.min(batchBytes.toLong, 2L * length)).toInt
        if (grown > length) {
          length = grown
          if (grown > batch.capacity()) {
            // The native side copied the records it was given: the old buffer is free.
            DirectBufferPool.give(batch)
            batch = DirectBufferPool.take(grown)
            base = DirectBuffers.address(batch)
          }
        }
      }
      val at = base + used
      putIntLE(at, key.length)
      putIntLE(at + 4, valueLength)
      Platform.copyMemory(key.bytes, Platform.BYTE_ARRAY_OFFSET, null, at + HeaderBytes, key.length.toLong)
      Platform.copyMemory(value.getBaseObject, value.getBaseOffset, null, at + HeaderBytes + key.length, valueLength.toLong)
      used += size.toInt
      records += 1
    }
    flush()
    // Every record was copied by the native side (ExternalSort.add): nothing reads the batch any
    // more. A failure above drops it instead, which is no less safe, only simpler.
    DirectBufferPool.give(batch)
  }

  private def fetch(): Boolean = {
    // Into the other buffer: rows of the batch just returned stay valid. The batch being returned
    // changes only once the new one is in, so a failure leaves it as it was.
    val other = 1 - current
    if (outs(other) == null) setOut(other, math.min(batchBytes.toLong, math.max(inputBytes, FirstBatchBytes.toLong)).toInt)
    // The first call ends the input and sorts (or starts merging the runs): counted as sort time.
    var n = if (!fetched) timed(consumer.next(outs(other), outLengths(other))) else consumer.next(outs(other), outLengths(other))
    fetched = true
    while (n < 0) { // the next record alone needs -n bytes
      setOut(other, -n)
      n = consumer.next(outs(other), outLengths(other))
    }
    peakMemory = math.max(peakMemory, consumer.getUsed)
    current = other
    address = outAddresses(current)
    pos = 0
    filled = n
    if (n == 0) {
      keepLastRow()
      finish()
      recycleOutputs()
    }
    n > 0
  }

  /**
   * Points the row, the object the caller holds, at an on-heap copy of the last row, as Spark's
   * own sort does with its last row: it stays valid once the output buffers are given back (an
   * operator such as GroupedIterator reads it after hasNext() is false).
   */
  private def keepLastRow(): Unit =
    if (returned) row.pointTo(row.getBytes, Platform.BYTE_ARRAY_OFFSET, row.getSizeInBytes) // getBytes copies off-heap bytes

  /**
   * Gives the output buffers back to the pool once every row was returned and the last one was
   * copied. Only here: a sort whose output is not read to the end (the task ended early, failed
   * or was cancelled) keeps them until the task ends, since a row may still point into them.
   */
  private def recycleOutputs(): Unit = {
    for (i <- outs.indices if outs(i) != null) {
      DirectBufferPool.give(outs(i))
      outs(i) = null
      outAddresses(i) = 0L
    }
    recycledOutputs.incrementAndGet()
  }

  // A buffer replaced by a larger one is left to the garbage collector: simpler, and rare.
  private def setOut(i: Int, bytes: Int): Unit = {
    outs(i) = DirectBufferPool.take(bytes)
    outAddresses(i) = DirectBuffers.address(outs(i))
    outLengths(i) = bytes
  }

  private def timed[T](body: => T): T = {
    val t0 = System.nanoTime()
    try body
    finally sortNanos += System.nanoTime() - t0
  }

  private def finish(): Unit = {
    finished = true
    filled = 0
    pos = 0
    report()
    if (consumer != null) consumer.close()
  }

  /** Adds this sort's figures to the SQL metrics, once. */
  private def report(): Unit = if (!reported && consumer != null) {
    reported = true
    val stats = consumer.sort.stats // the last counters survive the sort's release
    metrics.sortTime += sortNanos / 1000000L
    metrics.peakMemory += math.max(peakMemory, stats.memoryUsed)
    metrics.spillSize += stats.spilledMemory
    metrics.runsSpilled += stats.runs
    metrics.mergePasses += stats.mergePasses
  }
}

private[sql] object SpillwaySortIterator {
  /**
   * Bytes of the input and output batches for a sort of `budget` bytes: large enough to make the
   * JNI calls rare (at most 1 MiB), and a quarter of the budget at most (at least 16 KiB), since
   * the sort may hold one batch beyond what Spark granted.
   */
  def batchBytes(budget: Long): Int = math.min(1L << 20, math.max(16L << 10, budget / 4)).toInt

  /** Sorts that gave their output buffers back to the pool, since the JVM started (for tests). */
  private[sql] val recycledOutputs = new AtomicLong

  private val HeaderBytes = SortBatch.HeaderBytes
  private val FirstBatchBytes = 64 << 10

  // The batch format is little-endian; Platform reads and writes the machine's order.
  private val BigEndian = ByteOrder.nativeOrder() == ByteOrder.BIG_ENDIAN

  private def putIntLE(address: Long, v: Int): Unit =
    Platform.putInt(null, address, if (BigEndian) Integer.reverseBytes(v) else v)

  private def getIntLE(address: Long): Int = {
    val v = Platform.getInt(null, address)
    if (BigEndian) Integer.reverseBytes(v) else v
  }
}
