package spillway.sql

import java.nio.ByteBuffer

import scala.util.control.NonFatal

import org.apache.spark.{TaskContext, TaskKilledException}
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, BindReferences, Expression, SortOrder, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.plans.physical.{Distribution, OrderedDistribution, Partitioning, UnspecifiedDistribution}
import org.apache.spark.sql.execution.{SparkPlan, UnaryExecNode}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}
import org.apache.spark.unsafe.Platform

import spillway.{NativeSortConsumer, SortBatch}

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
    val encoder = new SortKeyEncoder(sortOrder.map(SortKeyEncoder.Key(_)))
    val schema = child.output.map(_.dataType)
    val sortMetrics = SpillwaySortMetrics(metrics("sortTime"), metrics("peakMemory"), metrics("spillSize"), metrics("runsSpilled"),
      metrics("mergePasses"))
    child.execute().mapPartitions { rows =>
      new SpillwaySortIterator(rows, UnsafeProjection.create(keyExpressions), encoder,
        () => UnsafeProjection.create(schema.toArray), schema.size, sortMetrics)
    }
  }

  override protected def withNewChildInternal(newChild: SparkPlan): SpillwaySortExec = copy(child = newChild)
}

private[sql] final case class SpillwaySortMetrics(sortTime: SQLMetric, peakMemory: SQLMetric, spillSize: SQLMetric, runsSpilled: SQLMetric,
    mergePasses: SQLMetric)

/**
 * The rows of `input` sorted by their encoded keys. Lazy: the input is consumed on the first
 * `hasNext`, sent to the native sort in batches of `u32 keyLength | u32 valueLength | key | value`
 * (little-endian) built in a heap array and copied into one direct buffer per batch. The sorted
 * batches come back the same way; each is copied into a fresh array and the returned `UnsafeRow`
 * (one object, reused, as Spark's own sort does) points into it. The sort is released when the
 * output is exhausted or the task ends, whichever comes first.
 */
private[sql] final class SpillwaySortIterator(
    input: Iterator[InternalRow],
    keyProjection: UnsafeProjection,
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

  private var out: ByteBuffer = _
  private var batch: Array[Byte] = _ // the current sorted batch: records in batch[pos, filled)
  private var pos = 0
  private var filled = 0
  private val row = new UnsafeRow(numFields)

  override def hasNext: Boolean = {
    if (!started) start()
    pos < filled || (!finished && fetch())
  }

  override def next(): InternalRow = {
    if (!hasNext) throw new NoSuchElementException("the sorted rows are exhausted")
    val keyLength = getIntLE(batch, pos)
    val valueLength = getIntLE(batch, pos + 4)
    row.pointTo(batch, Platform.BYTE_ARRAY_OFFSET + pos + HeaderBytes + keyLength, valueLength)
    pos += HeaderBytes + keyLength + valueLength
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
    // the metrics of a sort whose output is not read to the end are reported too.
    task.addTaskCompletionListener[Unit](_ => report())
    try addAll(task)
    catch {
      case NonFatal(e) =>
        finish()
        throw e
    }
    out = ByteBuffer.allocateDirect(batchBytes)
  }

  private def addAll(task: TaskContext): Unit = {
    var staging = new Array[Byte](batchBytes)
    var direct = ByteBuffer.allocateDirect(batchBytes)
    var used = 0
    var records = 0
    val key = new KeyBuffer(64)
    var toUnsafe: UnsafeProjection = null

    def flush(): Unit = if (records > 0) {
      direct.clear()
      direct.put(staging, 0, used)
      timed(consumer.add(direct, used, records))
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
      encoder.encode(keyProjection(inputRow), key)
      val valueLength = value.getSizeInBytes
      val size = HeaderBytes.toLong + key.length + valueLength
      if (size > Int.MaxValue - 16) {
        throw new IllegalArgumentException(s"a row of $valueLength bytes with a ${key.length}-byte sort key is too large for a sort batch (2 GiB)")
      }
      if (size > staging.length - used) {
        flush()
        if (size > staging.length) { // a row larger than a batch: grow the buffers for this sort
          staging = new Array[Byte](size.toInt)
          direct = ByteBuffer.allocateDirect(size.toInt)
        }
      }
      putIntLE(staging, used, key.length)
      putIntLE(staging, used + 4, valueLength)
      System.arraycopy(key.bytes, 0, staging, used + HeaderBytes, key.length)
      Platform.copyMemory(value.getBaseObject, value.getBaseOffset, staging,
        Platform.BYTE_ARRAY_OFFSET + used + HeaderBytes + key.length, valueLength.toLong)
      used += size.toInt
      records += 1
    }
    flush()
  }

  private def fetch(): Boolean = {
    // The first call ends the input and sorts (or starts merging the runs): counted as sort time.
    var n = if (batch == null) timed(consumer.next(out, out.capacity())) else consumer.next(out, out.capacity())
    while (n < 0) { // the next record alone needs -n bytes
      out = ByteBuffer.allocateDirect(-n)
      n = consumer.next(out, out.capacity())
    }
    peakMemory = math.max(peakMemory, consumer.getUsed)
    // A fresh array per batch: a row handed out before stays valid while its consumer holds it.
    batch = new Array[Byte](n)
    out.get(0, batch, 0, n)
    pos = 0
    filled = n
    if (n == 0) finish()
    n > 0
  }

  private def timed[T](body: => T): T = {
    val t0 = System.nanoTime()
    try body
    finally sortNanos += System.nanoTime() - t0
  }

  private def finish(): Unit = {
    finished = true
    out = null
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

  private val HeaderBytes = SortBatch.HeaderBytes

  private def putIntLE(a: Array[Byte], at: Int, v: Int): Unit = {
    a(at) = v.toByte
    a(at + 1) = (v >>> 8).toByte
    a(at + 2) = (v >>> 16).toByte
    a(at + 3) = (v >>> 24).toByte
  }

  private def getIntLE(a: Array[Byte], at: Int): Int =
    (a(at) & 0xff) | (a(at + 1) & 0xff) << 8 | (a(at + 2) & 0xff) << 16 | (a(at + 3) & 0xff) << 24
}
