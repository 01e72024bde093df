package spillway.sql

import org.apache.spark.sql.SparkSessionExtensions
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ColumnarRule, SparkPlan}

/**
 * What [[spillway.SpillwayExtensions]] injects into a session, once it has checked the Spark line.
 *
 * The rule is injected twice, and is idempotent: as a query-stage preparation rule, so that the
 * plan adaptive execution shows before running (`explain()`) already has the native sorts, and as
 * a pre-columnar rule, which Spark applies last to every plan (without adaptive execution) and to
 * every adaptive query stage, after the sorts that `EnsureRequirements` adds.
 */
object SpillwaySessionRules {
  def inject(extensions: SparkSessionExtensions): Unit = {
    extensions.injectQueryStagePrepRule(session => SpillwaySortRule(session))
    extensions.injectColumnar(session =>
      new ColumnarRule {
        override def preColumnarTransitions: Rule[SparkPlan] = SpillwaySortRule(session)
      })
  }
}
