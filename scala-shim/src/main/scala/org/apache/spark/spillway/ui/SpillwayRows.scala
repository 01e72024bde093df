package org.apache.spark.spillway.ui

import scala.annotation.meta.getter

import com.fasterxml.jackson.annotation.JsonIgnore

import org.apache.spark.util.kvstore.KVIndex

import spillway.{SpillwayExecutorUpdate, SpillwaySqlSorts, SpillwayStageSpills}

/*
 * What the Spillway tab's store holds, in the application's status store (the live UI's, or the
 * one the History Server replays an event log into): one row per stage attempt and executor that
 * spilled, per executor, and per SQL query with native or fallen-back sorts, each an event's
 * content under its natural key. SpillwayStatusListener writes them and bounds their number.
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
