package spillway.demo

import org.apache.spark.api.plugin.ExecutorPlugin
import org.apache.spark.spillway.PluginMetricsProbe

import spillway.{SpillwayExecutorPlugin, SpillwayPlugin, SpillwayStartup}

/**
 * [[SpillwayPlugin]] as [[ClusterDemo]] runs it (`spark.plugins=spillway.demo.ClusterDemoPlugin`):
 * the product's executor component, kept where the demo's tasks in that executor's JVM can read
 * what it did at start.
 */
class ClusterDemoPlugin extends SpillwayPlugin {
  override def executorPlugin(): ExecutorPlugin = {
    val plugin = new SpillwayExecutorPlugin
    ClusterDemoPlugin.executor = Some(plugin)
    plugin
  }
}

object ClusterDemoPlugin {
  @volatile private var executor: Option[SpillwayExecutorPlugin] = None

  /** What the executor component of this JVM did at its start; None if it did not start. */
  def startup: Option[SpillwayStartup] = executor.flatMap(_.startup)

  /** Where Spark's metrics system holds this plugin's metrics. */
  val MetricsSource: String = PluginMetricsProbe.sourceName(classOf[ClusterDemoPlugin])
}
