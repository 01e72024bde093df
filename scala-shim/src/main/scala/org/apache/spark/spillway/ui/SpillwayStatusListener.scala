package org.apache.spark.spillway.ui

import org.apache.spark.scheduler.{SparkListener, SparkListenerEvent}
import org.apache.spark.status.ElementTrackingStore

import spillway.{SpillwayExecutorUpdate, SpillwaySqlSorts, SpillwayStageSpills}

/**
 * Builds the Spillway tab's rows ([[SpillwayStageRow]], [[SpillwayExecutorRow]],
 * [[SpillwayExecutorTimelineRow]], [[SpillwaySqlRow]]) in `store` from Spillway's events, live (on the driver's status queue) or
 * replayed from the event log (in the History Server). The page only reads them.
 *
 * Bounded: at most [[SpillwayStatusListener.MaxStageRows]] stage rows, [[SpillwayStatusListener.MaxSqlRows]]
 * queries and [[SpillwayStatusListener.MaxExecutorRows]] executors (each with a timeline of at most
 * [[SpillwayExecutorTimelineRow.MaxPoints]] points); past that the oldest stages and queries (and
 * the first executors by id) are dropped, as Spark's own UI drops old stages and queries.
 */
final class SpillwayStatusListener(store: ElementTrackingStore) extends SparkListener {
  import SpillwayStatusListener._

  store.addTrigger(classOf[SpillwayStageRow], MaxStageRows)(count =>
    dropFirst(classOf[SpillwayStageRow], count - MaxStageRows)(_.key))
  store.addTrigger(classOf[SpillwaySqlRow], MaxSqlRows)(count =>
    dropFirst(classOf[SpillwaySqlRow], count - MaxSqlRows)(_.executionId))
  store.addTrigger(classOf[SpillwayExecutorRow], MaxExecutorRows)(count =>
    dropFirst(classOf[SpillwayExecutorRow], count - MaxExecutorRows)(_.executorId))
  store.addTrigger(classOf[SpillwayExecutorTimelineRow], MaxExecutorRows)(count =>
    dropFirst(classOf[SpillwayExecutorTimelineRow], count - MaxExecutorRows)(_.executorId))

  override def onOtherEvent(event: SparkListenerEvent): Unit = event match {
    case s: SpillwayStageSpills =>
      val key = SpillwayStageRow.keyOf(s)
      val merged = read(classOf[SpillwayStageRow], key).fold(s)(_.spills + s)
      store.write(SpillwayStageRow(key, merged), checkTriggers = true)
    case u: SpillwayExecutorUpdate =>
      val peak = read(classOf[SpillwayExecutorRow], u.executorId).fold(0L)(_.peakBytesInUse)
      store.write(SpillwayExecutorRow(u.executorId, u.copy(peakBytesInUse = math.max(peak, u.peakBytesInUse))),
        checkTriggers = true)
      val timeline = read(classOf[SpillwayExecutorTimelineRow], u.executorId)
        .getOrElse(SpillwayExecutorTimelineRow(u.executorId, Nil))
      store.write(timeline + SpillwayTimelinePoint(u.time, u.bytesSpilled), checkTriggers = true)
    case q: SpillwaySqlSorts =>
      store.write(SpillwaySqlRow(q.executionId, q), checkTriggers = true)
    case _ =>
  }

  private def read[T](klass: Class[T], key: Any): Option[T] =
    try Some(store.read(klass, key))
    catch { case _: java.util.NoSuchElementException => None }

  /** Deletes the first `n` rows of `klass` in natural-key order: the oldest stages and queries. */
  private def dropFirst[T](klass: Class[T], n: Long)(key: T => Any): Unit = {
    val it = store.view(klass).closeableIterator()
    val keys =
      try Iterator.continually(it).takeWhile(_.hasNext).map(_.next()).take(n.toInt).map(key).toList
      finally it.close()
    keys.foreach(k => store.delete(klass, k))
  }
}

object SpillwayStatusListener {
  val MaxStageRows: Long = 10000
  val MaxSqlRows: Long = 1000
  val MaxExecutorRows: Long = 1000
}
