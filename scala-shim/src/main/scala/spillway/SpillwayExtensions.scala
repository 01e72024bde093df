package spillway

import org.apache.spark.sql.SparkSessionExtensions
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ColumnarRule, SparkPlan}

import spillway.sql.SpillwaySortRule

/**
 * Spillway's Spark SQL extension: `spark.sql.extensions=spillway.SpillwayExtensions` runs every
 * eligible sort of SQL, DataFrame and PySpark queries (ORDER BY, and the sorts under sort-merge
 * joins, windows, sort aggregates and partitioned writes) as Spillway's native sort
 * ([[spillway.sql.SpillwaySortExec]], shown as `SpillwaySort` in `explain` and the SQL tab).
 *
 * The rule is injected twice, and is idempotent: as a query-stage preparation rule, so that the
 * plan adaptive execution shows before running (`explain()`) already has the native sorts, and as
 * a pre-columnar rule, which Spark applies last to every plan (without adaptive execution) and to
 * every adaptive query stage, after the sorts that `EnsureRequirements` adds.
 */
class SpillwayExtensions extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    extensions.injectQueryStagePrepRule(session => SpillwaySortRule(session))
    extensions.injectColumnar(session =>
      new ColumnarRule {
        override def preColumnarTransitions: Rule[SparkPlan] = SpillwaySortRule(session)
      })
  }
}

