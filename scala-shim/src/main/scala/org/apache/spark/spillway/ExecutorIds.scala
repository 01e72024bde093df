package org.apache.spark.spillway

import org.apache.spark.SparkContext

/** The executors a driver has now; under org.apache.spark because SparkContext's is private[spark]. */
object ExecutorIds {
  /** Ids of the executors registered with `sc` (the driver excluded). */
  def apply(sc: SparkContext): Seq[String] = sc.getExecutorIds()
}
