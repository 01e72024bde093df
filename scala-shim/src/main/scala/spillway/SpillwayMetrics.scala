package spillway

import java.util.concurrent.atomic.LongAdder

/**
 * Per-JVM counters of the spill lifecycle, kept by the Scala layer (plans and files created through
 * [[SpillPlan]]; direct users of [[NativeSpill]] are not counted). LongAdders, so that plans of
 * concurrent tasks never contend on one counter's cache line.
 */
object SpillwayMetrics {
  private[spillway] val plansCreated = new LongAdder
  private[spillway] val plansSpilled = new LongAdder
  private[spillway] val plansReleased = new LongAdder
  private[spillway] val dirsCreated = new LongAdder
  private[spillway] val filesCreated = new LongAdder
  private[spillway] val bytesWritten = new LongAdder
  private[spillway] val releaseFailures = new LongAdder

  /** The counters now: each a sum taken now, the set not one atomic snapshot. */
  def snapshot(): Snapshot = Snapshot(
    plansCreated = plansCreated.sum,
    plansSpilled = plansSpilled.sum,
    plansReleased = plansReleased.sum,
    dirsCreated = dirsCreated.sum,
    filesCreated = filesCreated.sum,
    bytesWritten = bytesWritten.sum,
    releaseFailures = releaseFailures.sum)

  /**
   * @param plansCreated plans created
   * @param plansSpilled plans that created at least one spill file
   * @param plansReleased plans released (closed)
   * @param dirsCreated plan directories created (a plan creates one per local dir it spills into)
   * @param filesCreated spill files created
   * @param bytesWritten bytes written to spill files (logical: before compression and framing)
   * @param releaseFailures plan releases that left something behind (logged with the cause)
   */
  final case class Snapshot(
      plansCreated: Long,
      plansSpilled: Long,
      plansReleased: Long,
      dirsCreated: Long,
      filesCreated: Long,
      bytesWritten: Long,
      releaseFailures: Long) {
    def -(earlier: Snapshot): Snapshot = Snapshot(
      plansCreated - earlier.plansCreated,
      plansSpilled - earlier.plansSpilled,
      plansReleased - earlier.plansReleased,
      dirsCreated - earlier.dirsCreated,
      filesCreated - earlier.filesCreated,
      bytesWritten - earlier.bytesWritten,
      releaseFailures - earlier.releaseFailures)
  }
}
