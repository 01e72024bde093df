package spillway.sql

/** Whether this Spark line has explain providers, and so whether its jar has `spillway.sql.SpillwayExplainInfo`. Spark 3.5 has none: `spark.sql.extendedExplainProviders` came with 4.0. */
object SparkLineTestExplain {
  val providers: Boolean = false
}
