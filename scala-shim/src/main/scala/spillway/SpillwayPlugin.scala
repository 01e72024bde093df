package spillway

import org.apache.spark.api.plugin.{DriverPlugin, ExecutorPlugin, SparkPlugin}

/**
 * Spillway's Spark plugin: `spark.plugins=spillway.SpillwayPlugin`.
 *
 * On the driver, at startup: checks every `spark.spillway.*` setting (a bad value fails
 * SparkContext creation, so spark-submit fails at once with what to write instead; an unknown key
 * is logged with the closest known one), and ends the application when an executor reports that
 * Spillway cannot start there (see [[SpillwayDriverPlugin]]).
 *
 * On each executor, at start: loads the native library (a failure is reported to the driver, then
 * fails the executor with the cause and what to do, instead of failing every task that spills
 * later), removes the plan dirs that dead executors left in this executor's and its siblings' block
 * manager dirs ([[OrphanSweep]]), and registers the library's counters as metrics (source
 * `plugin.spillway.SpillwayPlugin`, [[SpillwayMetrics]]); see [[SpillwayExecutorPlugin]]. In local
 * mode both components run in the driver JVM.
 */
class SpillwayPlugin extends SparkPlugin {
  override def driverPlugin(): DriverPlugin = new SpillwayDriverPlugin
  override def executorPlugin(): ExecutorPlugin = new SpillwayExecutorPlugin
}
