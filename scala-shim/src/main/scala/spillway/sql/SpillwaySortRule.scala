package spillway.sql

import java.util.Locale

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{SortExec, SparkPlan}
import spillway.SpillwayConf

/**
 * Replaces each `SortExec` whose keys [[SortKeyEncoder]] can encode with a [[SpillwaySortExec]];
 * leaves the others to Spark, with a log line naming the sort and why. Does nothing when
 * `spark.spillway.sql.sort.enabled` is false in the session.
 */
final case class SpillwaySortRule(session: SparkSession) extends Rule[SparkPlan] {
  override def apply(plan: SparkPlan): SparkPlan =
    if (!SpillwaySortRule.enabled(session)) plan
    else
      plan.transformUp { case sort: SortExec =>
        SpillwaySortRule.fallbackReason(sort) match {
          case None =>
            val replaced = SpillwaySortExec(sort.sortOrder, sort.global, sort.child)
            replaced.copyTagsFrom(sort) // the logical link adaptive execution re-plans from
            replaced
          case Some(reason) =>
            SpillwaySortRule.log.info(
              s"Spillway: Spark's sort runs this sort (${sort.sortOrder.map(_.sql).mkString(", ")}): $reason")
            sort
        }
      }
}

object SpillwaySortRule {
  private[sql] lazy val log = org.slf4j.LoggerFactory.getLogger(classOf[SpillwaySortRule])

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
