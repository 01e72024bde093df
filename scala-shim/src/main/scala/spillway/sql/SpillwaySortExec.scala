package spillway.sql

import scala.util.control.NonFatal

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BindReferences, BoundReference, Expression, SortOrder, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.execution.{SortExec, SparkPlan}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}
import org.apache.spark.unsafe.Platform

import spillway.{NativeSortSession, SortBatch}

/**
 * Spark's `SortExec` run by Spillway's native external sort: the same ordering, distribution and
 * output, with the keys encoded by [[SortKeyEncoder]] as order-preserving bytes and each row
 * carried as its `UnsafeRow` bytes. The sort takes its memory from the task's execution memory and
 * spills through the task's spill plan when Spark asks (see `NativeSortSession`).
 *
 * It is a `SortExec`, so that Spark's rules and tests, and other extensions, that find sorts with
 * `case s: SortExec` (removing redundant sorts, ordering checks, a native engine taking sorts over)
 * see it as the sort it is. What it inherits and what it changes: the ordering, distribution,
 * partitioning and output are SortExec's own; the execution is the native sort's (no whole-stage
 * code generation, which would run Spark's sorter); the metrics are SortExec's plus two. A rule
 * that copies it as a `SortExec` (`copy`, or the extractor and a new `SortExec`) gets Spark's sort
 * back, which is always correct; [[SpillwaySortRule]] then replaces it again where it runs.
 *
 * Put in place of `SortExec` by [[SpillwaySortRule]] when every key type is supported. The
 * constructor takes SortExec's four fields in SortExec's order, as `TreeNode.makeCopy` expects.
 */
class SpillwaySortExec(order: Seq[SortOrder], isGlobal: Boolean, input: SparkPlan, spillFrequency: Int = 0)
    extends SortExec(order, isGlobal, input, spillFrequency) {

  // Spark's generated code would run Spark's sorter: the native sort runs through doExecute.
  override def supportCodegen: Boolean = false

  // SortExec's metrics under the same names, plus the runs the native sort wrote, its merge passes,
  // and the runs and their bytes on disk that went to the remote tier (none without one).
  override lazy val metrics: Map[String, SQLMetric] = Map(
    "sortTime" -> SQLMetrics.createTimingMetric(sparkContext, "sort time"),
    "peakMemory" -> SQLMetrics.createSizeMetric(sparkContext, "peak memory"),
    "spillSize" -> SQLMetrics.createSizeMetric(sparkContext, "spill size"),
    "runsSpilled" -> SQLMetrics.createMetric(sparkContext, "runs spilled"),
    "mergePasses" -> SQLMetrics.createMetric(sparkContext, "merge passes"),
    "remoteRuns" -> SQLMetrics.createMetric(sparkContext, "remote runs"),
    "remoteSpillSize" -> SQLMetrics.createSizeMetric(sparkContext, "remote spill size"))

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
      metrics("runsSpilled"), metrics("mergePasses"), metrics("remoteRuns"), metrics("remoteSpillSize"))
    child.execute().mapPartitions { rows =>
      val keyRow: InternalRow => InternalRow = if (projectKeys) UnsafeProjection.create(keyExpressions) else identity
      new SpillwaySortIterator(rows, keyRow, encoder, () => UnsafeProjection.create(schema.toArray), schema.size, sortMetrics)
    }
  }

  override protected def withNewChildInternal(newChild: SparkPlan): SpillwaySortExec =
    new SpillwaySortExec(sortOrder, global, newChild, testSpillFrequency)

  // SortExec's case-class equality compares the fields alone: a SortExec with the same ones is
  // still another node (else a rule's transform that puts this one in place of it would be a no-op).
  override def canEqual(that: Any): Boolean = that.isInstanceOf[SpillwaySortExec]
  override def equals(that: Any): Boolean = that.isInstanceOf[SpillwaySortExec] && super.equals(that)
  override def hashCode(): Int = 31 * super.hashCode() + 1
}

object SpillwaySortExec {
  def apply(sortOrder: Seq[SortOrder], global: Boolean, child: SparkPlan): SpillwaySortExec =
    new SpillwaySortExec(sortOrder, global, child)
}

/**
 * The rows of `input` sorted by their encoded keys, through a [[NativeSortSession]]. Lazy: the
 * input is consumed on the first `hasNext`, each row's key encoded and its `UnsafeRow` bytes
 * copied straight into the session's input batch, which the native side reads in place (a key of
 * fixed-width types is encoded there too; others go through a reused buffer). The
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
    // Keys of fixed-width types all have one length: each is written in place, straight into the
    // batch, with no buffer between.
    val fixedKeyLength = encoder.fixedLength
    val key = if (fixedKeyLength < 0) new KeyBuffer(64) else null
    var toUnsafe: UnsafeProjection = null
    while (input.hasNext) {
      val inputRow = input.next()
      val value = inputRow match {
        case u: UnsafeRow => u
        case other =>
          if (toUnsafe == null) toUnsafe = unsafeProjection()
          toUnsafe(other)
      }
      val valueLength = value.getSizeInBytes
      if (fixedKeyLength >= 0) {
        val keys = keyRow(inputRow) // before the record is taken: a key expression that fails leaves none half-written
        val at = session.recordAt(recordBytes(fixedKeyLength, valueLength))
        SortBatch.putHeader(at, fixedKeyLength, valueLength)
        encoder.encodeAt(keys, at + HeaderBytes)
        SortBatch.copyTo(value.getBaseObject, value.getBaseOffset, at + HeaderBytes + fixedKeyLength, valueLength)
      } else {
        key.reset()
        encoder.encode(keyRow(inputRow), key)
        val at = session.recordAt(recordBytes(key.length, valueLength))
        SortBatch.putHeader(at, key.length, valueLength)
        SortBatch.copyTo(key.bytes, Platform.BYTE_ARRAY_OFFSET, at + HeaderBytes, key.length)
        SortBatch.copyTo(value.getBaseObject, value.getBaseOffset, at + HeaderBytes + key.length, valueLength)
      }
    }
  }

  private def recordBytes(keyLength: Int, valueLength: Int): Int = {
    val size = HeaderBytes.toLong + keyLength + valueLength
    if (size > SortBatch.MaxRecordBytes) {
      throw new IllegalArgumentException(s"a row of $valueLength bytes with a $keyLength-byte sort key is too large for a sort batch (2 GiB)")
    }
    size.toInt
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
