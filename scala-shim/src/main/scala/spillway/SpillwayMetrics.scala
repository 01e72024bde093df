package spillway

import java.util.concurrent.atomic.AtomicLong

/**
 * Per-JVM counters of the spill lifecycle, kept by the Scala layer (plans and files created
 * through [[SpillPlan]]; direct users of [[NativeSpill]] are not counted).
 */
object SpillwayMetrics {
  private[spillway] val plansCreated = new AtomicLong
  private[spillway] val plansSpilled = new AtomicLong
  private[spillway] val plansReleased = new AtomicLong
  private[spillway] val dirsCreated = new AtomicLong
  private[spillway] val filesCreated = new AtomicLong
  private[spillway] val bytesWritten = new AtomicLong
  private[spillway] val releaseFailures = new AtomicLong

  /** The counters now. Each is read atomically; the set is not one atomic snapshot. */
  def snapshot(): Snapshot = Snapshot(
    plansCreated = plansCreated.get,
    plansSpilled = plansSpilled.get,
    plansReleased = plansReleased.get,
    dirsCreated = dirsCreated.get,
    filesCreated = filesCreated.get,
    bytesWritten = bytesWritten.get,
    releaseFailures = releaseFailures.get)

  /**
   * @param plansCreated plans created
   * @param plansSpilled plans that created at least one spill file
   * @param plansReleased plans released (closed)
   * @param dirsCreated plan directories created (a plan creates one per local dir it spills into)
   * @param filesCreated spill files created
   * @param bytesWritten bytes written to spill files
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
