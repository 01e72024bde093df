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

  /** Gauge name → value, or None if this JVM has no SparkEnv or the plugin registered no metrics. */
  def values(): Option[Map[String, Long]] =
    Option(SparkEnv.get).flatMap(_.metricsSystem.getSourcesByName(SourceName).headOption).map { source =>
      source.metricRegistry.getGauges.asScala.iterator.map { case (name, gauge) =>
        name -> (gauge.getValue match {
          case n: java.lang.Number => n.longValue
          case other => throw new IllegalStateException(s"gauge $name is not a number: $other")
        })
      }.toMap
    }
}
