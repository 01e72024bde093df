package spillway

import org.apache.spark.rdd.RDD


/**
 * Sorts (key, value) byte records inside Spark tasks with Spillway's native external sort: unsigned
 * byte-wise key order (as `java.util.Arrays.compareUnsigned`), stable for equal keys. The sort's
 * memory is native, granted by the task's Spark execution memory as it grows (up to
 * `spark.spillway.sort.memoryBudget` if set; no cap by default); beyond Spark's grant it spills
 * sorted runs into the task's spill plan ([[TaskSpill]]), under `spark.spillway.maxTempDirectorySize`.
 * Spark can make it spill when another consumer of the task needs memory.
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
   * exhausted or the task completes, whichever comes first. The iterator is a
   * [[NativeSortIterator]], whose `stats` are the sort's counters.
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

  /**
   * A native sort's counters ([[NativeSortIterator.stats]]).
   *
   * @param records records added
   * @param runs sorted runs spilled to disk
   * @param spilledBytes bytes the run files take on disk: compressed, encrypted, framed (Spark's
   *     diskBytesSpilled)
   * @param spilledMemory bytes of memory freed by spills (Spark's memoryBytesSpilled)
   * @param memoryUsed bytes of memory held now
   * @param spilledLogicalBytes the records' bytes written to run files, before compression
   * @param mergePasses passes of the merge over spilled data: 0 with nothing spilled, 1 for one
   *     merge, more when the runs were too many for one
   * @param remoteRuns runs, intermediate ones included, that went to the remote tier
   *     (`spark.spillway.remote.uri`) because no local dir could take them
   * @param remoteBytes their bytes in the object store
   */
  final case class Stats(records: Long, runs: Long, spilledBytes: Long, spilledMemory: Long, memoryUsed: Long,
      spilledLogicalBytes: Long, mergePasses: Long, remoteRuns: Long, remoteBytes: Long)

  object Stats {
    // Positions in NativeSpill.sortStats' array, found by name: the library owns the layout.
    private lazy val fields = Seq("records", "runs", "spilledBytes", "spilledMemory", "memoryUsed",
      "spilledLogicalBytes", "mergePasses", "remoteRuns", "remoteBytes").map(NativeSpill.sortStatsIndex)

    /** The counters of the live native sort `handle`. */
    private[spillway] def read(handle: Long): Stats = {
      val out = new Array[Long](NativeSpill.SORT_STATS_LENGTH)
      NativeSpill.sortStats(handle, out)
      of(out)
    }

    /** The counters in `out`, an array as `NativeSpill.sortStats` (or `sortAdd`) fills it. */
    private[spillway] def of(out: Array[Long]): Stats = {
      val v = fields.map(out(_))
      Stats(v(0), v(1), v(2), v(3), v(4), v(5), v(6), v(7), v(8))
    }
  }
}
