package spillway

import java.util.concurrent.atomic.AtomicBoolean

import scala.util.control.NonFatal

/**
 * A native spill plan: its own spill space inside the given local dirs, created by the first
 * [[createSpillFile]] and bounded by `maxTempDirectorySize` bytes over its live files. [[close]]
 * deletes everything the plan created.
 *
 * Thread-safe, without a lock of its own: the library refuses a released handle forever and
 * serialises a release against the calls it races, so this class keeps only whether it was closed,
 * to make [[close]] idempotent and to say "closed" when a call lost that race (see
 * docs/design/concurrency.md).
 */
final class SpillPlan private (
    handle: Long,
    val maxTempDirectorySize: Long,
    val maxExecutorTempDirectorySize: Long)
    extends AutoCloseable {
  private val closed = new AtomicBoolean(false)

  /** What this plan spilled so far, for the task's spill report. */
  private[spillway] val spills: PlanSpills = new PlanSpills

  /**
   * Creates a spill file in the executor's spill format: what is written to it is compressed
   * (`spark.spillway.compression.codec`) and, when `spark.io.encryption.enabled`, encrypted by the
   * library, and [[SpillFile.inputStream]] decodes it. The plan's limit and [[usedDiskSpace]]
   * count its bytes on disk. The plan's directory in the chosen local dir is created on first use.
   *
   * The shim gives no raw file: every operator's spill is compressed, checked and (with
   * encryption on) sealed. Native callers that manage their own bytes have the raw natives
   * (`NativeSpill.createTmpFile`).
   *
   * @throws java.io.IOException if no local dir is usable (the message names them)
   * @throws IllegalStateException if the plan is closed
   */
  def createSpillFile(): SpillFile = withOpenPlan { () =>
    val file = NativeSpill.createSpillFile(handle)
    val path =
      try NativeSpill.path(file)
      catch {
        case t: Throwable =>
          // Fails too if a close released the file meanwhile: the first failure is the one to tell.
          try NativeSpill.releaseSpillFile(file)
          catch { case NonFatal(e) => t.addSuppressed(e) }
          throw t
      }
    spills.fileMade(PlanSpills.localDirOf(path))
    new SpillFile(this, file, path)
  }

  /**
   * Starts a native external sort that spills its runs through this plan, under its limit: the
   * sort's handle, for a [[NativeSortSession]], which releases it. The plan's close releases the
   * sort too.
   *
   * @param memoryBudget most bytes of records the sort holds in memory (positive)
   * @throws IllegalStateException if the plan is closed
   */
  private[spillway] def createSort(memoryBudget: Long): Long =
    withOpenPlan(() => NativeSpill.createSort(handle, memoryBudget))

  /** Bytes on disk in the plan's live files (compressed and framed): what its limit counts. */
  def usedDiskSpace: Long = withOpenPlan(() => NativeSpill.usedDiskSpace(handle))

  /**
   * The plan's handle in the library, for native code running the task's work in this process (a
   * DataFusion or Velox plan): the C ABI's `int64_t` plan handle (include/spillway.h,
   * docs/design/c-abi.md). Native code creates and releases files in the plan and never releases the plan
   * itself: [[close]] does (TaskSpill when the task ends), removing whatever native code left.
   *
   * @throws IllegalStateException if the plan is closed
   */
  def nativeHandle: Long = withOpenPlan(() => handle)

  def isClosed: Boolean = closed.get

  /**
   * Deletes every file and directory the plan created. Idempotent: the plan is closed even when
   * something could not be deleted.
   *
   * @throws java.io.IOException naming what could not be deleted
   */
  override def close(): Unit =
    // Marked first, so that a failed release is not retried against a released handle.
    if (closed.compareAndSet(false, true)) NativeSpill.releasePlan(handle)

  override def toString: String =
    s"SpillPlan(limit=$maxTempDirectorySize bytes, executor limit=$maxExecutorTempDirectorySize bytes${if (isClosed) ", closed" else ""})"

  /**
   * Runs `op`, a native call on this plan or something it owns. Once the plan is closed it throws
   * "spill plan is closed" instead, also when the close overtook `op` inside the library (which
   * then refused the released handle).
   */
  private[spillway] def withOpenPlan[T](op: () => T): T = {
    if (isClosed) throw new IllegalStateException("spill plan is closed")
    try op()
    catch {
      case e: IllegalStateException if isClosed => throw new IllegalStateException("spill plan is closed", e)
    }
  }

  /** Runs `op` if the plan is open; does nothing once it is closed (its release released all it owned). */
  private[spillway] def ifOpen(op: () => Unit): Unit =
    if (!isClosed) {
      try op()
      catch { case _: IllegalStateException if isClosed => }
    }
}

object SpillPlan {
  /**
   * Creates a plan over `localDirs` (absolute paths) with a limit of `maxTempDirectorySize` bytes.
   * Touches no filesystem.
   *
   * @throws IllegalArgumentException for invalid dirs or a negative limit
   * @throws UnsatisfiedLinkError if the native library cannot be loaded (with its cause)
   */
  def create(localDirs: Array[String], maxTempDirectorySize: Long): SpillPlan =
    create(localDirs, maxTempDirectorySize, Long.MaxValue)

  /**
   * Creates a plan as above whose writes are also refused when they would take the bytes in the
   * live files of all plans of this JVM past `maxExecutorTempDirectorySize` (`Long.MaxValue`: no
   * executor limit). Both limits are fixed now: plans created later with other values never
   * change this one's.
   *
   * @throws IllegalArgumentException for invalid dirs or a negative limit
   * @throws UnsatisfiedLinkError if the native library cannot be loaded (with its cause)
   */
  def create(localDirs: Array[String], maxTempDirectorySize: Long, maxExecutorTempDirectorySize: Long): SpillPlan = {
    NativeLoader.load() // the descriptive load error, rather than NativeSpill's class init failure
    val handle = NativeSpill.createPlanWithExecutorLimit(localDirs, maxTempDirectorySize, maxExecutorTempDirectorySize)
    new SpillPlan(handle, maxTempDirectorySize, maxExecutorTempDirectorySize)
  }

  /**
   * Creates a plan as above in local dirs registered with `NativeSpill.registerLocalDirs`: the
   * executor's path (TaskSpill), which converts no path per plan.
   *
   * @throws IllegalStateException if `localDirs` is not a live registration
   * @throws IllegalArgumentException for a negative limit
   */
  def createIn(localDirs: Long, maxTempDirectorySize: Long, maxExecutorTempDirectorySize: Long): SpillPlan = {
    val handle = NativeSpill.createPlanIn(localDirs, maxTempDirectorySize, maxExecutorTempDirectorySize)
    new SpillPlan(handle, maxTempDirectorySize, maxExecutorTempDirectorySize)
  }
}
