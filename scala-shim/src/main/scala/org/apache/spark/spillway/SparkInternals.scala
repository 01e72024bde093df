package org.apache.spark.spillway

import org.apache.spark.{SparkContext, SparkEnv, TaskContext}
import org.apache.spark.internal.config
import org.apache.spark.memory.{MemoryMode, TaskMemoryManager, UnifiedMemoryManager}
import org.apache.spark.scheduler.SparkListenerEvent
import org.apache.spark.sql.internal.SQLConf

/**
 * The Spark calls Spillway needs that Spark keeps `private[spark]`, each with why: the only
 * Spillway code in Spark's namespace. It imports nothing of Spillway (package `spillway` imports
 * it, never the other way round). Not an API: it follows Spark's internals from version to version.
 */
object SparkInternals {
  /** The native sort takes its memory from the task's memory manager, as Spark's own sorters do. */
  def taskMemoryManager(task: TaskContext): TaskMemoryManager = task.taskMemoryManager()

  /**
   * The most execution memory of `mode` one task of this executor could ever be granted: the
   * executor's whole unified region (execution may evict storage), on-heap, or the off-heap size.
   * A native sort that follows Spark's grant needs no larger budget.
   */
  def maxExecutionMemory(mode: MemoryMode): Long = mode match {
    case MemoryMode.OFF_HEAP => SparkEnv.get.conf.get(config.MEMORY_OFFHEAP_SIZE)
    case _ =>
      SparkEnv.get.memoryManager match {
        case unified: UnifiedMemoryManager => unified.maxHeapMemory
        case _ => Runtime.getRuntime.maxMemory
      }
  }

  /** The native sort's spills count in the task's metrics ("Spill (Memory)" in the UI), as Spark's own do. */
  def incMemoryBytesSpilled(task: TaskContext, bytes: Long): Unit = task.taskMetrics().incMemoryBytesSpilled(bytes)

  /** The native sort's spills count in the task's metrics ("Spill (Disk)" in the UI), as Spark's own do. */
  def incDiskBytesSpilled(task: TaskContext, bytes: Long): Unit = task.taskMetrics().incDiskBytesSpilled(bytes)

  /** A cancelled task stops between native sort batches, as Spark's InterruptibleIterator does. */
  def killTaskIfInterrupted(task: TaskContext): Unit = task.killTaskIfInterrupted()

  /**
   * Registers a string setting with SQLConf (its ConfigBuilder is private[spark]), so that
   * `spark.conf.set`/`SET` accept it per session (Spark rejects session changes of keys it does
   * not know as SQL confs) and run `check` on every value set, which throws to reject it.
   */
  def registerSessionConf(key: String, doc: String, version: String, default: String)(check: String => Unit): Unit = {
    SQLConf
      .buildConf(key)
      .doc(doc)
      .version(version)
      .stringConf
      .transform { v => check(v); v }
      .createWithDefault(default)
    ()
  }

  /**
   * Posts `event` to the application's listener bus, as Spark's own components post theirs: it
   * reaches the event log (and so the History Server) and every listener, the live UI's included.
   */
  def postEvent(sc: SparkContext, event: SparkListenerEvent): Unit = sc.listenerBus.post(event)
}
