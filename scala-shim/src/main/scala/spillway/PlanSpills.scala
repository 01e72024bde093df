package spillway

import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong

import scala.jdk.CollectionConverters._

/**
 * What one [[SpillPlan]] spilled, counted by the shim as it goes: the spill files made through
 * [[SpillFile]] (their logical bytes as written, their bytes on disk once finished or released,
 * and the local dir each landed in) and the native sorts' runs (their bytes before compression and
 * on disk, as the sort reports them when it closes). The library counts the same bytes per process
 * ([[NativeStats]]); these are the plan's share, for the task's spill report
 * ([[ExecutorReports]]). A plan that never spills leaves them all 0 and costs nothing here.
 *
 * The local dirs are those of the plan's spill files: the library does not say where a native
 * sort's runs land, so a plan that spilled only through a sort has none. At most one entry per
 * local dir of the executor.
 */
final class PlanSpills {
  private val filesMade = new AtomicLong
  private val runsMade = new AtomicLong
  private val logical = new AtomicLong
  private val onDisk = new AtomicLong
  private val dirs = ConcurrentHashMap.newKeySet[String]()

  def files: Long = filesMade.get
  def sortRuns: Long = runsMade.get
  def logicalBytes: Long = logical.get
  def diskBytes: Long = onDisk.get
  def localDirs: Seq[String] = dirs.asScala.toSeq.sorted

  /** Whether the plan wrote anything to disk: a file made, or a sort's run. */
  def spilled: Boolean = filesMade.get > 0 || runsMade.get > 0

  private[spillway] def fileMade(localDir: Option[String]): Unit = {
    filesMade.incrementAndGet()
    localDir.foreach(dirs.add)
  }

  private[spillway] def fileWritten(bytes: Long): Unit = { logical.addAndGet(bytes); () }

  /** A file's bytes on disk, counted once per file, when it is finished or released. */
  private[spillway] def fileOnDisk(bytes: Long): Unit = { onDisk.addAndGet(bytes); () }

  private[spillway] def sortSpilled(runs: Long, logicalBytes: Long, diskBytes: Long): Unit =
    if (runs > 0) {
      runsMade.addAndGet(runs)
      logical.addAndGet(logicalBytes)
      onDisk.addAndGet(diskBytes)
    }
}

object PlanSpills {
  /** The local dir of a spill file at `path`: files live in `<local dir>/<plan dir>/`. */
  def localDirOf(path: String): Option[String] =
    Option(java.nio.file.Paths.get(path).getParent).flatMap(p => Option(p.getParent)).map(_.toString)
}
