package org.apache.spark.spillway.demo

import org.apache.spark.SparkContext

/**
 * The executors a driver has now, for [[spillway.demo.ClusterDemo]]; under org.apache.spark
 * because SparkContext's list is private[spark].
 */
object ExecutorIds {
  /** Ids of the executors registered with `sc` (the driver excluded). */
  def apply(sc: SparkContext): Seq[String] = sc.getExecutorIds()
}
