package org.apache.spark.spillway

import org.apache.spark.TaskContext
import org.apache.spark.memory.{MemoryConsumer, TaskMemoryManager}

/**
 * Another memory consumer of the task, for tests: asking for more execution memory than Spark has
 * makes Spark spill the task's other consumers (a native sort among them) before it gives up.
 * Holds nothing it could spill itself.
 */
final class MemoryHog private (taskMemory: TaskMemoryManager)
    extends MemoryConsumer(taskMemory, taskMemory.pageSizeBytes(), taskMemory.getTungstenMemoryMode) {
  override def spill(size: Long, trigger: MemoryConsumer): Long = 0L
}

object MemoryHog {
  /** Asks for more memory than the executor has, then gives back what it got. */
  def grabAndRelease(task: TaskContext): Unit = {
    val hog = new MemoryHog(task.taskMemoryManager())
    hog.acquireMemory(1L << 40)
    hog.freeMemory(hog.getUsed)
  }

  /** Takes all but `leave` bytes of the execution memory Spark would grant the task, and keeps it until released. */
  def holdAllBut(task: TaskContext, leave: Long): MemoryHog = {
    val hog = new MemoryHog(task.taskMemoryManager())
    val all = hog.acquireMemory(1L << 40)
    hog.freeMemory(math.min(leave, all))
    hog
  }

  /** Gives back what `hog` holds. */
  def release(hog: MemoryHog): Unit = hog.freeMemory(hog.getUsed)

  /** Execution memory the task holds now, over all its consumers. */
  def taskExecutionMemory(task: TaskContext): Long = task.taskMemoryManager().getMemoryConsumptionForThisTask

  /** The most execution memory (of the tungsten mode) the task has held. */
  def peakExecutionMemory(task: TaskContext): Long = SparkLineMemory.peakExecutionMemory(task.taskMemoryManager())
}
