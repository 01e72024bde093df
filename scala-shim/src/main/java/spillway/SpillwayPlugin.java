package spillway;

import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * Spillway's Spark plugin: {@code spark.plugins=spillway.SpillwayPlugin}.
 *
 * <p>On the driver, at startup: checks that this jar is the one for the running Spark line and
 * Scala version ({@link SparkLine}: the wrong jar fails SparkContext creation with the artifact to
 * use), checks every {@code spark.spillway.*} setting (a bad value fails SparkContext creation, so
 * spark-submit fails at once with what to write instead; an unknown key is logged with the closest
 * known one), and ends the application when an executor reports that Spillway cannot start there
 * (see {@link SpillwayDriverPlugin}).
 *
 * <p>On each executor, at start: the same jar check, then loads the native library (a failure is
 * reported to the driver, then fails the executor with the cause and what to do, instead of failing
 * every task that spills later), removes the plan dirs that dead executors left in this executor's
 * and its siblings' block manager dirs ({@link OrphanSweep}), and registers the library's counters
 * as metrics (source {@code plugin.spillway.SpillwayPlugin}, {@link SpillwayMetrics}); see {@link
 * SpillwayExecutorPlugin}. In local mode both components run in the driver JVM.
 *
 * <p>Java, so that Spark can load it and call it on any line before a Scala class of this jar is
 * touched.
 */
public class SpillwayPlugin implements SparkPlugin {
  static final String ENTRY = "spark.plugins=spillway.SpillwayPlugin";

  @Override
  public DriverPlugin driverPlugin() {
    SparkLine.require(ENTRY);
    return new SpillwayDriverPlugin();
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    SparkLine.require(ENTRY);
    return new SpillwayExecutorPlugin();
  }
}
