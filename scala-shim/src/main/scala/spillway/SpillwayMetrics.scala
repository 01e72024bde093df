package spillway

import com.codahale.metrics.{Counter, Gauge, MetricRegistry}

/**
 * The library's counters as Spark metrics (the plugin's source, `plugin.<plugin class name>`): one
 * metric per counter of [[NativeStats]], named as the library names it, so the metrics are exactly
 * what the library counts, for every caller (tasks, sorts and direct users of [[NativeSpill]]).
 */
object SpillwayMetrics {
  /**
   * Registers in `registry` a Dropwizard counter for each counter that only grows
   * ([[NativeStats.countNames]]: sinks report counters as counts, a dashboard their rate) and a
   * gauge for each level. Each reads the library when polled (one JNI call: a sink's poll of every
   * metric costs microseconds). Loads the library.
   */
  def register(registry: MetricRegistry): Unit =
    NativeStats.names.foreach { name =>
      if (NativeStats.countNames.contains(name)) {
        // Read-only: the value is the library's; inc/dec would only move the unused local count.
        registry.register(name, new Counter { override def getCount: Long = NativeStats.read()(name) })
      } else {
        registry.register(name, new Gauge[Long] { override def getValue: Long = NativeStats.read()(name) })
      }
    }
}
