package org.apache.spark.spillway

import scala.jdk.CollectionConverters._

import com.codahale.metrics.MetricRegistry
import org.apache.spark.SparkEnv

/**
 * For checks (the suites, and the cluster demo, which compiles this file too): a plugin's metrics
 * as this JVM's Spark metrics system holds them, which is what its sinks report. In this package
 * because Spark's MetricsSystem is private to Spark.
 */
object PluginMetricsProbe {
  /** The source Spark registers for a plugin's metric registry: `plugin.<plugin class name>`. */
  def sourceName(pluginClass: Class[_]): String = s"plugin.${pluginClass.getName}"

  /** Metric name → value (gauges and counters), or None if this JVM has no SparkEnv or no such source. */
  def values(source: String): Option[Map[String, Long]] = registry(source).map { registry =>
    registry.getGauges.asScala.iterator.map { case (name, gauge) =>
      name -> (gauge.getValue match {
        case n: java.lang.Number => n.longValue
        case other => throw new IllegalStateException(s"gauge $name is not a number: $other")
      })
    }.toMap ++ registry.getCounters.asScala.iterator.map { case (name, counter) => name -> counter.getCount }
  }

  /** Names of the counters (the rest are gauges), or None as for [[values]]. */
  def counterNames(source: String): Option[Set[String]] = registry(source).map(_.getCounters.asScala.keySet.toSet)

  private def registry(source: String): Option[MetricRegistry] =
    Option(SparkEnv.get).flatMap(_.metricsSystem.getSourcesByName(source).headOption).map(_.metricRegistry)
}
