package spillway

import org.apache.spark.rdd.RDD


/**
 * Sorts (key, value) byte records inside Spark tasks with Spillway's native external sort: unsigned
 * byte-wise key order (as `java.util.Arrays.compareUnsigned`), stable for equal keys. The sort's
 * memory comes from the task's Spark execution memory and from at most
 * `spark.spillway.sort.memoryBudget` bytes (default 64m); beyond that it spills sorted runs into the
 * task's spill plan ([[TaskSpill]]), under `spark.spillway.maxTempDirectorySize`. Spark can make it
 * spill when another consumer of the task needs memory.
 *
 * {{{
 *   import spillway.NativeSort._
 *   val sorted = pairs.nativeSortWithinPartitions()
 * }}}
 */
object NativeSort {

  /**
   * The records of a partition, sorted. Call on a Spark task's thread (e.g. inside
   * `mapPartitions`); lazy until the first `hasNext`. The sort is released when the result is
   * exhausted or the task completes, whichever comes first.
   */
  def sort(records: Iterator[(Array[Byte], Array[Byte])]): Iterator[(Array[Byte], Array[Byte])] =
    new NativeSortIterator(records)

  /** Each partition of `rdd` sorted by key; the partitioning is kept. */
  def sortWithinPartitions(rdd: RDD[(Array[Byte], Array[Byte])]): RDD[(Array[Byte], Array[Byte])] =
    rdd.mapPartitions(sort, preservesPartitioning = true)

  /** `rdd.nativeSortWithinPartitions()` after `import spillway.NativeSort._`. */
  implicit final class NativeSortRDDFunctions(private val rdd: RDD[(Array[Byte], Array[Byte])]) extends AnyVal {
    def nativeSortWithinPartitions(): RDD[(Array[Byte], Array[Byte])] = sortWithinPartitions(rdd)
  }
}
