package org.apache.spark.sql.spillway

import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd

/**
 * The Spark SQL calls Spillway needs that Spark keeps `private[sql]`, each with why; like
 * `org.apache.spark.spillway.SparkInternals`, it imports nothing of Spillway.
 */
object SqlInternals {
  /**
   * The plan a SQL query ran, as its end event carries it on the driver that ran it (the sorts the
   * query ran natively and those it left to Spark are tagged there); None once the event was
   * written and read back (the History Server), or if the query failed before it had a plan.
   */
  def executedPlan(end: SparkListenerSQLExecutionEnd): Option[SparkPlan] =
    Option(end.qe).flatMap(qe => scala.util.Try(qe.executedPlan).toOption)
}
