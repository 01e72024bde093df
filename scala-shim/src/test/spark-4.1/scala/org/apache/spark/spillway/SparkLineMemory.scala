package org.apache.spark.spillway

import org.apache.spark.memory.TaskMemoryManager

/** What the task memory manager of Spark 4.x tells of a task's memory. */
object SparkLineMemory {
  /** The most execution memory (of the tungsten mode) the task has held. */
  def peakExecutionMemory(tmm: TaskMemoryManager): Long =
    math.max(tmm.getPeakOnHeapExecutionMemory, tmm.getPeakOffHeapExecutionMemory)
}
