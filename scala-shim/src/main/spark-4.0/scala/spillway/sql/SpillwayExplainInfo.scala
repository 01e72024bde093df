package spillway.sql

import org.apache.spark.sql.ExtendedExplainGenerator
import org.apache.spark.sql.execution.SparkPlan

/**
 * Spillway's section of `explain` and of the SQL tab's plan details:
 * `spark.sql.extendedExplainProviders=spillway.sql.SpillwayExplainInfo` adds, under `== Extended
 * Information (Spillway) ==`, one line per sort that Spark's sort runs because the native sort
 * cannot, with why ([[SpillwaySortRule.fallbackLines]]); nothing when every sort runs natively.
 *
 * Spark's explain providers came with Spark 4.0, so this class is only in the jars for 4.0 and
 * later. Spark 3.5 does not know the setting and ignores it: there [[SpillwaySortRule]] warns once
 * when the setting names this class, and [[SpillwaySortRule.fallbacksOf]] lists the same lines on
 * every line. Spark makes an instance for each explain (no-argument constructor); it holds nothing.
 */
final class SpillwayExplainInfo extends ExtendedExplainGenerator {
  override def title: String = "Spillway"

  override def generateExtendedInfo(plan: SparkPlan): String = SpillwaySortRule.fallbackLines(plan).mkString("\n")
}
