package spillway.sql

import scala.util.control.NonFatal

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, BindReferences, BoundReference, Expression, SortOrder, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.plans.physical.{Distribution, OrderedDistribution, Partitioning, UnspecifiedDistribution}
import org.apache.spark.sql.execution.{SparkPlan, UnaryExecNode}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}
import org.apache.spark.unsafe.Platform

import spillway.{NativeSortSession, SortBatch}

/**
 * Spark's `SortExec` run by Spillway's native external sort: the same ordering, distribution and
 * output, with the keys encoded by [[SortKeyEncoder]] as order-preserving bytes and each row
 * carried as its `UnsafeRow` bytes. The sort takes its memory from the task's execution memory and
 * spills through the task's spill plan when Spark asks (see `NativeSortSession`).
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
    val sortMetrics = NativeSortSession.SqlMetrics(metrics("sortTime"), metrics("peakMemory"), metrics("spillSize"),
      metrics("runsSpilled"), metrics("mergePasses"))
    child.execute().mapPartitions { rows =>
      val keyRow: InternalRow => InternalRow = if (projectKeys) UnsafeProjection.create(keyExpressions) else identity
      new SpillwaySortIterator(rows, keyRow, encoder, () => UnsafeProjection.create(schema.toArray), schema.size, sortMetrics)
    }
  }

  override protected def withNewChildInternal(newChild: SparkPlan): SpillwaySortExec = copy(child = newChild)
}

/**
 * The rows of `input` sorted by their encoded keys, through a [[NativeSortSession]]. Lazy: the
 * input is consumed on the first `hasNext`, each row's key encoded and its `UnsafeRow` bytes
 * copied straight into the session's input batch, which the native side reads in place. The
 * returned `UnsafeRow` (one object, reused, as Spark's own sort does) points into the session's
 * output, with no copy.
 *
 * The lifetime of a returned row: it stays valid until `next()` is called again, and longer: its
 * buffer is refilled only after every row of the following batch has been returned. That is what
 * Spark's own sort promises once it has spilled (its spill readers reuse one buffer), so every
 * operator that keeps a row copies it. The last row is returned as an on-heap copy, as Spark's
 * own sort returns its last row: the `next()` that returns a batch's last row fetches the next
 * batch, and when there is none, points the row object (the one every `next()` returns) at a
 * copy before the session gives its output buffers back to the pool, so the row and the values
 * read from it without a copy (a `UTF8String`) stay valid for good. A sort whose output is not
 * read to the end keeps its buffers until the task ends (see [[NativeSortSession]]). The sort is
 * released when the output is exhausted or the task ends, whichever comes first.
 */
private[sql] final class SpillwaySortIterator(
    input: Iterator[InternalRow],
    keyRow: InternalRow => InternalRow,
    encoder: SortKeyEncoder,
    unsafeProjection: () => UnsafeProjection,
    numFields: Int,
    metrics: NativeSortSession.SqlMetrics)
    extends Iterator[InternalRow] {
  import SortBatch.HeaderBytes

  private var session: NativeSortSession = _
  private var started = false
  private val row = new UnsafeRow(numFields)
  private var returned = false // the row has been pointed into an output buffer

  override def hasNext: Boolean = {
    if (!started) start()
    session != null && session.hasRecord
  }

  override def next(): InternalRow = {
    if (!hasNext) throw new NoSuchElementException("the sorted rows are exhausted")
    val at = session.record
    val keyLength = SortBatch.keyLength(at)
    val valueLength = SortBatch.valueLength(at)
    row.pointTo(null, at + HeaderBytes + keyLength, valueLength)
    returned = true
    // Past the last row of its batch the session fetches the next batch now (into the other
    // buffer, whose rows are done), so that the very last row is known here and returned as an
    // on-heap copy (keepLastRow).
    session.advance(HeaderBytes + keyLength + valueLength)
    row
  }

  private def start(): Unit = {
    started = true
    if (!input.hasNext) return
    session = NativeSortSession.forCurrentTask(Some(metrics), () => keepLastRow())
    try {
      addAll()
      session.endInput()
    } catch {
      case NonFatal(e) =>
        session.close()
        throw e
    }
  }

  private def addAll(): Unit = {
    val key = new KeyBuffer(64)
    var toUnsafe: UnsafeProjection = null
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
      if (size > SortBatch.MaxRecordBytes) {
        throw new IllegalArgumentException(s"a row of $valueLength bytes with a ${key.length}-byte sort key is too large for a sort batch (2 GiB)")
      }
      val at = session.recordAt(size.toInt)
      SortBatch.putHeader(at, key.length, valueLength)
      Platform.copyMemory(key.bytes, Platform.BYTE_ARRAY_OFFSET, null, at + HeaderBytes, key.length.toLong)
      Platform.copyMemory(value.getBaseObject, value.getBaseOffset, null, at + HeaderBytes + key.length, valueLength.toLong)
    }
  }

  /**
   * Points the row, the object the caller holds, at an on-heap copy of the last row, as Spark's
   * own sort does with its last row: it stays valid once the output buffers are given back (an
   * operator such as GroupedIterator reads it after hasNext() is false). The session calls it
   * once the output is exhausted, before it gives its buffers back to the pool.
   */
  private def keepLastRow(): Unit =
    if (returned) row.pointTo(row.getBytes, Platform.BYTE_ARRAY_OFFSET, row.getSizeInBytes) // getBytes copies off-heap bytes
}
