package org.apache.spark.spillway

import scala.jdk.CollectionConverters._

import org.apache.spark.SparkEnv

/**
 * Spillway's plugin metrics as this JVM's Spark metrics system holds them (what its sinks report),
 * read back for checks. Lives under org.apache.spark because Spark's MetricsSystem is private[spark].
 */
object SpillwayPluginMetrics {
  /** The source Spark registers for the plugin's metric registry: `plugin.<plugin class name>`. */
  val SourceName: String = "plugin.spillway.SpillwayPlugin"

  /** Metric name → value (gauges and counters), or None if this JVM has no SparkEnv or the plugin registered no metrics. */
  def values(): Option[Map[String, Long]] = registry().map { registry =>
    registry.getGauges.asScala.iterator.map { case (name, gauge) =>
      name -> (gauge.getValue match {
        case n: java.lang.Number => n.longValue
        case other => throw new IllegalStateException(s"gauge $name is not a number: $other")
      })
    }.toMap ++ registry.getCounters.asScala.iterator.map { case (name, counter) => name -> counter.getCount }
  }

  /** Names of the counters (the rest are gauges), or None as for [[values]]. */
  def counterNames(): Option[Set[String]] = registry().map(_.getCounters.asScala.keySet.toSet)

  private def registry() =
    Option(SparkEnv.get).flatMap(_.metricsSystem.getSourcesByName(SourceName).headOption).map(_.metricRegistry)
}
