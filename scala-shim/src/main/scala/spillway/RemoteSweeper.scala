package spillway

import java.util.concurrent.{Executors, TimeUnit}

import scala.util.control.NonFatal

/**
 * The driver's part of the remote tier: at the application's start it removes what killed
 * applications left under the tier's URI (NativeSpill.sweepRemote, every other application prefix
 * older than `orphanAgeMs`), then it marks its own prefix alive every `orphanAgeMs /`
 * [[RemoteSweeper.MarksPerAge]], so that no other application's sweep takes it, and at the end
 * ([[stop]], after the executors stopped) it removes its own prefix. Every call runs on one daemon
 * thread, never on the driver's: a slow store delays no job. A failed call is logged and does not
 * fail the application: what it left, the next sweep or the bucket's lifecycle rule takes.
 */
final class RemoteSweeper(tier: SpillwayConf.RemoteTier, orphanAgeMs: Long) {
  import RemoteSweeper._

  private lazy val log = org.slf4j.LoggerFactory.getLogger(classOf[SpillwayPlugin])
  private val thread = Executors.newSingleThreadScheduledExecutor { r =>
    val t = new Thread(r, "spillway-remote-sweep")
    t.setDaemon(true)
    t
  }

  def start(): Unit = {
    thread.execute(() => call("sweep", "swept what killed applications left")(out =>
      NativeSpill.sweepRemote(tier.settings, tier.pathStyle, tier.ssl, orphanAgeMs, out)))
    val every = math.max(orphanAgeMs / MarksPerAge, 1L)
    thread.scheduleWithFixedDelay(() => call("mark this application alive in", "")(_ =>
      NativeSpill.markRemoteApplication(tier.settings, tier.pathStyle, tier.ssl)), every, every, TimeUnit.MILLISECONDS)
  }

  /** Removes this application's prefix, once a sweep running ended (waiting at most [[StopTimeoutMinutes]]). */
  def stop(): Unit = {
    thread.shutdown() // no more marks
    thread.awaitTermination(StopTimeoutMinutes, TimeUnit.MINUTES)
    call("remove this application's files from", "removed this application's files")(out =>
      NativeSpill.removeRemoteApplication(tier.settings, tier.pathStyle, tier.ssl, out))
  }

  /**
   * Runs `body` with a sweep result to fill; logs what it removed (as `done`) at INFO, or why it
   * failed (could not `doing`) at WARN.
   */
  private def call(doing: String, done: String)(body: Array[Long] => Unit): Unit = {
    val out = new Array[Long](NativeSpill.SWEEP_RESULT_LEN)
    def removed = s"${out(1)} object(s) and ${out(2)} upload(s) under ${out(0)} prefix(es) of ${tier.uri}"
    try {
      body(out)
      if (out(1) + out(2) > 0) log.info(s"Spillway: $done: $removed")
    } catch {
      case NonFatal(e) =>
        log.warn(s"Spillway: could not $doing the remote tier ${tier.uri}: ${e.getMessage}" +
          (if (out(1) + out(2) > 0) s" (removed $removed first)" else ""))
    }
    if (out(3) != 0) warnUploadsOnce()
  }

  @volatile private var warnedUploads = false

  private def warnUploadsOnce(): Unit = if (!warnedUploads) {
    warnedUploads = true
    log.info(s"Spillway: the store of ${tier.uri} cannot list uploads in progress; abandoned uploads are left to " +
      "the bucket's lifecycle rule (docs/user-guide/remote-spill.md)")
  }
}

object RemoteSweeper {
  /** How many times the driver marks its prefix alive within one orphan age. */
  val MarksPerAge: Long = 4

  /** How long [[RemoteSweeper.stop]] waits for a sweep that is running before it removes the prefix. */
  val StopTimeoutMinutes: Long = 1
}
