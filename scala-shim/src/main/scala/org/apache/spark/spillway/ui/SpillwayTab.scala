package org.apache.spark.spillway.ui

import org.apache.spark.SparkContext
import org.apache.spark.status.ElementTrackingStore
import org.apache.spark.ui.{SparkUI, SparkUITab}

/** The "Spillway" tab of an application's UI, at `/spillway/` (and its JSON at `/spillway/json`). */
final class SpillwayTab(val ui: SparkUI) extends SparkUITab(ui, "spillway") {
  def view: SpillwayView = new SpillwayView(ui.store.store)
  attachPage(new SpillwayPage(this))
}

object SpillwayTab {
  /**
   * In the live application: the listener that builds the tab's rows in the application's status
   * store (on Spark's status queue, as Spark SQL's), and the tab, when the UI is on.
   */
  def attachLive(sc: SparkContext): Unit = sc.ui.foreach { ui =>
    sc.statusStore.store match {
      case tracking: ElementTrackingStore =>
        sc.listenerBus.addToStatusQueue(new SpillwayStatusListener(tracking))
        ui.attachTab(new SpillwayTab(ui))
      case _ =>
    }
  }
}
