package spillway.sql

/** Whether this Spark line has explain providers, and so whether its jar has `spillway.sql.SpillwayExplainInfo`. Spark 4.1 has them (`spark.sql.extendedExplainProviders`). */
object SparkLineTestExplain {
  val providers: Boolean = true
}
