package spillway.sql

import java.util.Locale

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.catalyst.trees.TreeNodeTag
import org.apache.spark.sql.execution.{SortExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanHelper
import spillway.SpillwayConf

/**
 * Replaces each `SortExec` whose keys [[SortKeyEncoder]] can encode with a [[SpillwaySortExec]];
 * leaves the others to Spark, with a log line naming the sort and why, and the why as a tag on the
 * `SortExec` ([[SpillwaySortRule.fallbacks]] lists them in an executed plan). Does nothing when
 * `spark.spillway.sql.sort.enabled` is false in the session.
 */
final case class SpillwaySortRule(session: SparkSession) extends Rule[SparkPlan] {
  override def apply(plan: SparkPlan): SparkPlan = {
    // A typo set in this session (`spark.conf.set`, `SET`): told once per JVM, even with no plugin.
    SpillwayConf.unknownKeyWarningsOnce(session.conf.getAll.keys).foreach(w => SpillwaySortRule.log.warn(s"Spillway: $w"))
    if (!SpillwaySortRule.enabled(session)) plan
    else
      plan.transformUp {
        case native: SpillwaySortExec => native // a SortExec too: already replaced (the rule runs twice)
        case sort: SortExec =>
        SpillwaySortRule.fallbackReason(sort) match {
          case None =>
            val replaced = SpillwaySortExec(sort.sortOrder, sort.global, sort.child)
            replaced.copyTagsFrom(sort) // the logical link adaptive execution re-plans from
            replaced
          case Some(reason) =>
            SpillwaySortRule.log.info(s"Spillway: Spark's sort runs this sort (${SpillwaySortRule.keys(sort)}): $reason")
            // Explain prints SortExec as Spark renders it: the tag is how the plan itself says why.
            sort.setTagValue(SpillwaySortRule.FallbackReason, reason)
            sort
        }
      }
  }
}

object SpillwaySortRule extends AdaptiveSparkPlanHelper {
  private[sql] lazy val log = org.slf4j.LoggerFactory.getLogger(classOf[SpillwaySortRule])

  /** On a `SortExec` the rule left to Spark: why the native sort could not run it. */
  val FallbackReason: TreeNodeTag[String] = TreeNodeTag[String]("spillway.sort.fallbackReason")

  /**
   * The sorts of `plan` (an executed plan: `df.queryExecution.executedPlan`) that Spark's sort runs
   * because the native sort cannot: each as its keys in SQL (`i ASC NULLS FIRST, arr DESC NULLS
   * LAST`) and the reason. Looks inside adaptive plans (the final plan and its query stages, once
   * the query has run; the initial plan before) and subqueries.
   */
  def fallbacks(plan: SparkPlan): Seq[(String, String)] =
    collectWithSubqueries(plan) {
      case sort: SortExec if sort.getTagValue(FallbackReason).isDefined => keys(sort) -> sort.getTagValue(FallbackReason).get
    }

  private def keys(sort: SortExec): String = sort.sortOrder.map(_.sql).mkString(", ")

  val EnabledKey: String = SpillwayConf.SqlSortEnabledKey

  /**
   * Whether the session runs eligible sorts natively: `spark.spillway.sql.sort.enabled`, `true`
   * unless set.
   *
   * @throws IllegalArgumentException for a value other than true or false
   */
  def enabled(session: SparkSession): Boolean =
    session.conf.getOption(EnabledKey).forall { v =>
      SpillwayConf.sqlSortEnabledError(v).foreach(e => throw new IllegalArgumentException(e))
      v.trim.toLowerCase(Locale.ROOT) == "true"
    }

  /** Why `sort` must stay Spark's, or None if the native sort can run it. */
  def fallbackReason(sort: SortExec): Option[String] =
    sort.sortOrder.iterator
      .map(o => SortKeyEncoder.unsupportedReason(o.dataType).map(r => s"key ${o.child.sql}: $r"))
      .collectFirst { case Some(r) => r }
}
