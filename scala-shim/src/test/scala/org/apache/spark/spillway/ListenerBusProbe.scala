package org.apache.spark.spillway

import org.apache.spark.SparkContext

/**
 * For tests: waits until Spark's listener bus has delivered every event posted so far (task ends
 * with their metrics, SQL execution ends), which listeners otherwise see asynchronously. In this
 * package because the bus is private to Spark.
 */
object ListenerBusProbe {
  def drain(sc: SparkContext): Unit = sc.listenerBus.waitUntilEmpty()
}
