package spillway

import org.apache.spark.api.plugin.ExecutorPlugin
import org.apache.spark.spillway.PluginMetricsProbe

/**
 * [[SpillwayPlugin]] as tests run it (`spark.plugins=spillway.ObservedSpillwayPlugin`): its
 * executor component is the product's, kept where this JVM's tests can read what it did at start.
 */
class ObservedSpillwayPlugin extends SpillwayPlugin {
  override def executorPlugin(): ExecutorPlugin = {
    val plugin = new SpillwayExecutorPlugin
    ObservedSpillwayPlugin.executor = Some(plugin)
    plugin
  }
}

object ObservedSpillwayPlugin {
  @volatile private var executor: Option[SpillwayExecutorPlugin] = None

  /** What the executor component last created in this JVM did at its start. */
  def startup: Option[SpillwayStartup] = executor.flatMap(_.startup)

  /** Where Spark's metrics system holds this plugin's metrics. */
  val MetricsSource: String = PluginMetricsProbe.sourceName(classOf[ObservedSpillwayPlugin])
}
