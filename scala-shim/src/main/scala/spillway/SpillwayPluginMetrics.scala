package spillway

import scala.jdk.CollectionConverters._

import org.apache.spark.spillway.SparkInternals

/**
 * Spillway's plugin metrics as this JVM's Spark metrics system holds them (what its sinks report),
 * read back for checks (through [[SparkInternals.metricRegistry]]: Spark's MetricsSystem is private[spark]).
 */
object SpillwayPluginMetrics {
  /** The source Spark registers for a plugin's metric registry: `plugin.<plugin class name>`. */
  def sourceName(pluginClass: Class[_]): String = s"plugin.${pluginClass.getName}"

  /** The source of `spillway.SpillwayPlugin`. */
  val SourceName: String = "plugin.spillway.SpillwayPlugin"

  /** Metric name → value (gauges and counters), or None if this JVM has no SparkEnv or the plugin registered no metrics. */
  def values(source: String = SourceName): Option[Map[String, Long]] = registry(source).map { registry =>
    registry.getGauges.asScala.iterator.map { case (name, gauge) =>
      name -> (gauge.getValue match {
        case n: java.lang.Number => n.longValue
        case other => throw new IllegalStateException(s"gauge $name is not a number: $other")
      })
    }.toMap ++ registry.getCounters.asScala.iterator.map { case (name, counter) => name -> counter.getCount }
  }

  /** Names of the counters (the rest are gauges), or None as for [[values]]. */
  def counterNames(source: String = SourceName): Option[Set[String]] = registry(source).map(_.getCounters.asScala.keySet.toSet)

  private def registry(source: String) = SparkInternals.metricRegistry(source)
}
