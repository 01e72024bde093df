package org.apache.spark.spillway.ui

import org.json4s.JsonAST._
import org.json4s.JsonDSL._

import org.apache.spark.util.kvstore.KVStore

import spillway.{SpillwayExecutorUpdate, SpillwaySortFallback, SpillwayStageSpills}

/** One SQL query as the tab shows it: its sorts, and the spills of the stages it ran. */
final case class SpillwayQuery(
    executionId: Long,
    nativeSorts: Int,
    fallbacks: Seq[SpillwaySortFallback],
    plans: Long,
    files: Long,
    sortRuns: Long,
    logicalBytes: Long,
    diskBytes: Long,
    localDirs: Seq[String])

/**
 * What the Spillway tab shows, read from the rows in `store` at each request: per SQL query (its
 * [[SpillwaySqlRow]] and the [[SpillwayStageRow]]s of its stages), per stage attempt and executor,
 * and per executor, with each executor's timeline. Also its JSON form, served at the tab's `json` path.
 */
final class SpillwayView(store: KVStore) {
  def stages: Seq[SpillwayStageSpills] = rows(classOf[SpillwayStageRow]).map(_.spills)

  def executors: Seq[SpillwayExecutorUpdate] = rows(classOf[SpillwayExecutorRow]).map(_.update)

  /** Each executor's bytes spilled over time, by executor id. */
  def timelines: Seq[SpillwayExecutorTimelineRow] = rows(classOf[SpillwayExecutorTimelineRow])

  /** The queries with native sorts, fallbacks or spills, newest first. */
  def queries: Seq[SpillwayQuery] = {
    val sorts = rows(classOf[SpillwaySqlRow]).map(r => r.executionId -> r.sorts).toMap
    val spills = stages.filter(_.sqlExecutionId >= 0).groupBy(_.sqlExecutionId)
    (sorts.keySet ++ spills.keySet).toSeq.sorted.reverse.map { id =>
      val s = spills.getOrElse(id, Nil)
      val q = sorts.get(id)
      SpillwayQuery(id, q.fold(0)(_.nativeSorts), q.fold(Seq.empty[SpillwaySortFallback])(_.fallbacks),
        s.map(_.plans).sum, s.map(_.files).sum, s.map(_.sortRuns).sum, s.map(_.logicalBytes).sum,
        s.map(_.diskBytes).sum, s.flatMap(_.localDirs).distinct.sorted)
    }
  }

  /**
   * Everything, as `{"queries": [...], "stages": [...], "executors": [...], "timeline": [...]}`;
   * sizes in bytes, times in ms since the epoch.
   */
  def json: JValue =
    ("queries" -> queries.map { q =>
      ("executionId" -> q.executionId) ~ ("nativeSorts" -> q.nativeSorts) ~
        ("fallbacks" -> q.fallbacks.map(f => ("keys" -> f.keys) ~ ("reason" -> f.reason))) ~
        ("plansSpilled" -> q.plans) ~ ("files" -> q.files) ~ ("sortRuns" -> q.sortRuns) ~
        ("logicalBytes" -> q.logicalBytes) ~ ("diskBytes" -> q.diskBytes) ~ ("localDirs" -> q.localDirs)
    }) ~
      ("stages" -> stages.map { s =>
        ("stageId" -> s.stageId) ~ ("stageAttemptId" -> s.stageAttemptId) ~ ("executorId" -> s.executorId) ~
          ("sqlExecutionId" -> s.sqlExecutionId) ~ ("plansSpilled" -> s.plans) ~ ("files" -> s.files) ~
          ("sortRuns" -> s.sortRuns) ~ ("logicalBytes" -> s.logicalBytes) ~ ("diskBytes" -> s.diskBytes) ~
          ("localDirs" -> s.localDirs)
      }) ~
      ("executors" -> executors.map { e =>
        ("executorId" -> e.executorId) ~ ("host" -> e.host) ~ ("time" -> e.time) ~ ("stopped" -> e.atStop) ~
          ("localDirs" -> e.localDirs.map(d =>
            ("path" -> d.path) ~ ("totalBytes" -> d.totalBytes) ~ ("freeBytes" -> d.freeBytes) ~ ("full" -> d.full) ~
              ("givenUp" -> d.givenUp) ~ ("spillwayBytes" -> d.spillwayBytes))) ~
          ("planLimit" -> limit(e.planLimit)) ~ ("executorLimit" -> limit(e.executorLimit)) ~
          ("bytesInUse" -> e.bytesInUse) ~ ("peakBytesInUse" -> e.peakBytesInUse) ~ ("orphansSwept" -> e.orphansSwept) ~
          ("plansCreated" -> e.plansCreated) ~ ("plansSpilled" -> e.plansSpilled) ~ ("spillFiles" -> e.spillFiles) ~
          ("bytesSpilled" -> e.bytesSpilled) ~ ("logicalBytesSpilled" -> e.logicalBytesSpilled) ~
          ("limitFailures" -> e.limitFailures) ~ ("filesystemErrors" -> e.filesystemErrors) ~
          ("remote" -> (("spillFiles" -> e.remoteSpillFiles) ~ ("bytesSpilled" -> e.remoteBytesSpilled) ~
            ("bytesRead" -> e.remoteBytesRead) ~ ("retries" -> e.remoteRetries)))
      }) ~
      ("timeline" -> timelines.map { t =>
        ("executorId" -> t.executorId) ~
          ("points" -> t.points.map(p => ("time" -> p.time) ~ ("bytesSpilled" -> p.bytesSpilled)))
      })

  /** Whether there is anything to show: the History Server adds the tab only then. */
  def nonEmpty: Boolean = Seq(classOf[SpillwayStageRow], classOf[SpillwayExecutorRow], classOf[SpillwaySqlRow])
    .exists(store.count(_) > 0)

  // Unlimited is null in the JSON: no number stands for it.
  private def limit(bytes: Long): JValue = if (bytes == Long.MaxValue) JNull else JLong(bytes)

  private def rows[T](klass: Class[T]): Seq[T] = {
    val it = store.view(klass).closeableIterator()
    try Iterator.continually(it).takeWhile(_.hasNext).map(_.next()).toList
    finally it.close()
  }
}
