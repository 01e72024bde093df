package org.apache.spark.spillway.ui

import org.apache.spark.SparkConf
import org.apache.spark.scheduler.SparkListener
import org.apache.spark.status.{AppHistoryServerPlugin, ElementTrackingStore}
import org.apache.spark.ui.SparkUI

/**
 * The Spillway tab in the History Server, from the event log: registered for Spark's
 * `ServiceLoader` in META-INF/services, so the jar on the History Server's classpath is all it
 * takes. The listener replays Spillway's events into the application's store; the tab shows for
 * applications that have any.
 */
final class SpillwayHistoryServerPlugin extends AppHistoryServerPlugin {
  override def createListeners(conf: SparkConf, store: ElementTrackingStore): Seq[SparkListener] =
    Seq(new SpillwayStatusListener(store))

  override def setupUI(ui: SparkUI): Unit =
    if (new SpillwayView(ui.store.store).nonEmpty) ui.attachTab(new SpillwayTab(ui))
}
