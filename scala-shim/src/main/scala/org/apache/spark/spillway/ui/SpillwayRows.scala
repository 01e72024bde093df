package org.apache.spark.spillway.ui

import scala.annotation.meta.getter

import com.fasterxml.jackson.annotation.JsonIgnore

import org.apache.spark.util.kvstore.KVIndex

import spillway.{SpillwayExecutorUpdate, SpillwaySqlSorts, SpillwayStageSpills}

/*
 * What the Spillway tab's store holds, in the application's status store (the live UI's, or the
 * one the History Server replays an event log into): one row per stage attempt and executor that
 * spilled, per executor (its latest update, and its timeline), and per SQL query with native or
 * fallen-back sorts, each an event's content under its natural key. SpillwayStatusListener writes
 * them and bounds their number and size.
 */

/** The spills of one stage attempt on one executor, summed over its events. */
final case class SpillwayStageRow(@(KVIndex @getter) key: String, spills: SpillwayStageSpills)

object SpillwayStageRow {
  /** In stage order, so that the oldest stages are the first the store drops. */
  def keyOf(s: SpillwayStageSpills): String = f"${s.stageId}%010d.${s.stageAttemptId}%05d.${s.executorId}"
}

/** An executor's latest update, and the most bytes in use any of its updates saw. */
final case class SpillwayExecutorRow(@(KVIndex @getter) executorId: String, update: SpillwayExecutorUpdate) {
  @JsonIgnore def peakBytesInUse: Long = update.peakBytesInUse
}

/** A SQL query's sorts. */
final case class SpillwaySqlRow(@(KVIndex @getter) executionId: Long, sorts: SpillwaySqlSorts)

/** One point of an executor's timeline: at `time` (ms since the epoch), its bytes spilled so far. */
final case class SpillwayTimelinePoint(time: Long, bytesSpilled: Long)

/**
 * An executor's bytes spilled (on disk, since its JVM started) at each of its updates, oldest
 * first: at most [[SpillwayExecutorTimelineRow.MaxPoints]], the resolution halved (every other
 * point of the past dropped, the first and the latest kept) each time it would pass that, so a
 * long application keeps its whole span at a coarser grain. Points are case classes, not two
 * `Seq[Long]`s: the History Server's disk store reads a collection of numbers back as Integers.
 */
final case class SpillwayExecutorTimelineRow(@(KVIndex @getter) executorId: String, points: Seq[SpillwayTimelinePoint]) {
  /**
   * With `p` added, unless the bytes are those of the latest point: the line is a step line, flat
   * until the next change, so such a point would say nothing new.
   */
  def +(p: SpillwayTimelinePoint): SpillwayExecutorTimelineRow =
    if (points.lastOption.exists(_.bytesSpilled == p.bytesSpilled)) this
    else {
      val next = points :+ p
      if (next.size <= SpillwayExecutorTimelineRow.MaxPoints) copy(points = next)
      else copy(points = next.init.zipWithIndex.collect { case (q, i) if i % 2 == 0 => q } :+ next.last)
    }
}

object SpillwayExecutorTimelineRow {
  val MaxPoints: Int = 512
}
