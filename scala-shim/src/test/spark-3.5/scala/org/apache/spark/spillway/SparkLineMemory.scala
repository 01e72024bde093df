package org.apache.spark.spillway

import org.apache.spark.memory.TaskMemoryManager

/** What Spark 3.5's task memory manager tells of a task's memory. */
object SparkLineMemory {
  /** Spark 3.5 keeps no peak per task: the suites that need it (NativeSortSuite) run on 4.x. */
  def peakExecutionMemory(tmm: TaskMemoryManager): Long =
    throw new UnsupportedOperationException("Spark 3.5's TaskMemoryManager keeps no peak execution memory (Spark 4.0 does)")
}
