package spillway.sql

import org.apache.spark.sql.SparkSessionExtensions
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ColumnarRule, SparkPlan}

/**
 * What [[spillway.SpillwayExtensions]] injects into a session, once it has checked the Spark line.
 *
 * The rule is injected three times, and is idempotent: as a query-stage preparation rule, so that
 * the plan adaptive execution shows before running (`explain()`) already has the native sorts; as
 * a pre-columnar rule, which Spark applies last to every plan (without adaptive execution) and to
 * every adaptive query stage, after the sorts that `EnsureRequirements` adds; and as a
 * post-columnar rule, after the columnar transitions are in place.
 *
 * A session with a native engine that takes sorts over (Apache DataFusion Comet) gets the sorts
 * replaced at the post-columnar point only ([[SpillwaySortRule.Phase]]): by then the engine has
 * taken every sort it runs, whatever the order of `spark.sql.extensions`, and what is left as
 * Spark's `SortExec` is a row-based sort between row-based nodes, so putting Spillway's row-based
 * sort in its place adds no transition.
 */
object SpillwaySessionRules {
  def inject(extensions: SparkSessionExtensions): Unit = {
    extensions.injectQueryStagePrepRule(session => SpillwaySortRule(session, SpillwaySortRule.Phase.QueryStagePrep))
    extensions.injectColumnar(session =>
      new ColumnarRule {
        // One rule each for the session (Spark asks for them on every plan): a rule reads the
        // session's static confs once.
        private val pre = SpillwaySortRule(session, SpillwaySortRule.Phase.PreColumnar)
        private val post = SpillwaySortRule(session, SpillwaySortRule.Phase.PostColumnar)
        override def preColumnarTransitions: Rule[SparkPlan] = pre
        override def postColumnarTransitions: Rule[SparkPlan] = post
      })
  }
}
