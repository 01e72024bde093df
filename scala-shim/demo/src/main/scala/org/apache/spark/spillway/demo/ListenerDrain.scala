package org.apache.spark.spillway.demo

import org.apache.spark.SparkContext

/**
 * Waits for the driver's listeners to hear every event posted so far (the tasks' ends of a job
 * that returned), for [[spillway.demo.ClusterDemo]]; under org.apache.spark because the listener
 * bus is private[spark].
 */
object ListenerDrain {
  /** Waits at most `millis`; false if events were still queued then. */
  def apply(sc: SparkContext, millis: Long = 30000): Boolean =
    try { sc.listenerBus.waitUntilEmpty(millis); true }
    catch { case _: java.util.concurrent.TimeoutException => false }
}
