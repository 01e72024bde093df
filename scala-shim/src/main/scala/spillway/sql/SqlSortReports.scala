package spillway.sql

import scala.util.control.NonFatal

import org.apache.spark.scheduler.{SparkListener, SparkListenerEvent}
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanHelper
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd
import org.apache.spark.sql.spillway.SqlInternals

import spillway.{SpillwayEvent, SpillwaySortFallback, SpillwaySqlSorts}

/**
 * On the driver, as each SQL query ends: its sorts as it ran them, posted as one
 * [[SpillwaySqlSorts]] (the native sorts, and the sorts left to Spark with the reason
 * [[SpillwaySortRule]] tagged them with), for queries that have either. Reads the plan the query
 * ran, nothing else; holds nothing.
 */
final class SqlSortReports(post: SpillwayEvent => Unit) extends SparkListener with AdaptiveSparkPlanHelper {
  private lazy val log = org.slf4j.LoggerFactory.getLogger(classOf[SqlSortReports])

  override def onOtherEvent(event: SparkListenerEvent): Unit = event match {
    case end: SparkListenerSQLExecutionEnd =>
      try SqlInternals.executedPlan(end).foreach { plan =>
        val natives = collectWithSubqueries(plan) { case s: SpillwaySortExec => s }.size
        val fallbacks = SpillwaySortRule.fallbacks(plan).map { case (keys, reason) => SpillwaySortFallback(keys, reason) }
        if (natives > 0 || fallbacks.nonEmpty) post(SpillwaySqlSorts(end.executionId, natives, fallbacks))
      } catch {
        case NonFatal(e) => log.debug(s"Spillway: could not read the sorts of SQL query ${end.executionId}", e)
      }
    case _ =>
  }
}
