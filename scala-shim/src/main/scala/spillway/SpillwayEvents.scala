package spillway

import org.apache.spark.scheduler.SparkListenerEvent

/**
 * The facts Spillway writes to the event log, posted on the driver by the plugin (Spark's event
 * log writes every listener event, and the History Server replays them into the Spillway tab).
 * Each is bounded, so the log grows with stages, executors and queries, never with plans:
 *
 *  - [[SpillwayStageSpills]]: the plans of one stage attempt on one executor that spilled, summed;
 *    one event per stage attempt and executor, when the stage ends (plus one for a report that
 *    arrives after that). A plan that never spills sends nothing.
 *  - [[SpillwayExecutorUpdate]]: one executor's state, every `spark.spillway.ui.updateInterval`
 *    while it changes, and when the executor stops.
 *  - [[SpillwaySqlSorts]]: one SQL query's native sorts and the sorts it left to Spark, with why;
 *    one event per query that has either, when it ends.
 *
 * Fields are plain values (no `Option[Long]`, no collections of numbers) so that the event log's
 * JSON reads back into the same values on every Spark line. `-1` means "none" where a field says so.
 */
sealed trait SpillwayEvent extends SparkListenerEvent

/**
 * What the plans of stage `stageId` (attempt `stageAttemptId`) on executor `executorId` spilled,
 * summed over those plans: `plans` that spilled, their spill `files`, the native sorts' `sortRuns`,
 * bytes before compression (`logicalBytes`) and on disk (`diskBytes`), and the local dirs their
 * spill files landed in (a sort's runs name none: the library does not report where they land).
 * `sqlExecutionId` is the SQL query the stage ran for, or -1.
 */
final case class SpillwayStageSpills(
    stageId: Int,
    stageAttemptId: Int,
    executorId: String,
    sqlExecutionId: Long,
    plans: Long,
    files: Long,
    sortRuns: Long,
    logicalBytes: Long,
    diskBytes: Long,
    localDirs: Seq[String])
    extends SpillwayEvent {

  /** The sums of this and `other`, for the same stage attempt and executor. */
  def +(other: SpillwayStageSpills): SpillwayStageSpills = copy(
    plans = plans + other.plans,
    files = files + other.files,
    sortRuns = sortRuns + other.sortRuns,
    logicalBytes = logicalBytes + other.logicalBytes,
    diskBytes = diskBytes + other.diskBytes,
    localDirs = (localDirs ++ other.localDirs).distinct.sorted,
    sqlExecutionId = if (sqlExecutionId >= 0) sqlExecutionId else other.sqlExecutionId)
}

/**
 * One local dir of an executor (a block manager dir, where plans make their dirs): the bytes of
 * its filesystem and those free for the executor's user, read when the update was made, and
 * whether it was `givenUp`: gone or not a writable directory, which every plan gives up at its
 * first file there (the library's rule for a missing, unusable or read-only root) and spills to
 * the executor's other dirs instead; and `spillwayBytes`, what the files in the plan dirs under it
 * took on disk then (0 in an event log written before it was kept).
 */
final case class SpillwayLocalDir(path: String, totalBytes: Long, freeBytes: Long, givenUp: Boolean,
    spillwayBytes: Long = 0) {
  /** No byte left: every spill file goes to the executor's other dirs. */
  def full: Boolean = freeBytes <= 0
}

/**
 * One executor's state at `time` (ms since the epoch), `atStop` when it stops: its local dirs, the
 * limits of the Spark conf (`planLimit`, `executorLimit`: `spark.spillway.maxTempDirectorySize`
 * and `spark.spillway.maxExecutorTempDirectorySize`, Long.MaxValue for unlimited), the bytes in
 * live spill files now (`bytesInUse`, what the executor limit bounds) and the most seen
 * (`peakBytesInUse`: the highest of the reads at each update, as each native sort that spilled
 * ends and as each plan that spilled is released: a sampled peak), the orphaned plan dirs swept at start, and the library's counters for the executor's
 * JVM since it started, those of the remote tier (`spark.spillway.remote.uri`) last (0 without
 * one, and in an event log written before they were kept).
 */
final case class SpillwayExecutorUpdate(
    executorId: String,
    host: String,
    time: Long,
    atStop: Boolean,
    localDirs: Seq[SpillwayLocalDir],
    planLimit: Long,
    executorLimit: Long,
    bytesInUse: Long,
    peakBytesInUse: Long,
    orphansSwept: Long,
    plansCreated: Long,
    plansSpilled: Long,
    spillFiles: Long,
    bytesSpilled: Long,
    logicalBytesSpilled: Long,
    limitFailures: Long,
    filesystemErrors: Long,
    remoteSpillFiles: Long = 0,
    remoteBytesSpilled: Long = 0,
    remoteBytesRead: Long = 0,
    remoteRetries: Long = 0)
    extends SpillwayEvent {

  /** Whether `other` says something this does not, beyond the time and the free bytes. */
  def differsFrom(other: SpillwayExecutorUpdate): Boolean =
    copy(time = 0, localDirs = localDirs.map(d => d.copy(freeBytes = if (d.full) 0 else 1))) !=
      other.copy(time = 0, localDirs = other.localDirs.map(d => d.copy(freeBytes = if (d.full) 0 else 1)))
}

/** A SQL sort left to Spark's sort: its keys in SQL and why the native sort could not run it. */
final case class SpillwaySortFallback(keys: String, reason: String)

/** The SQL query `executionId`'s sorts as it ran: how many ran natively, and those left to Spark. */
final case class SpillwaySqlSorts(executionId: Long, nativeSorts: Int, fallbacks: Seq[SpillwaySortFallback])
    extends SpillwayEvent
