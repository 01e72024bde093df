package spillway.sql

import org.apache.spark.sql.types.{DataType, StringType}

/** The key types of the suites that only some Spark lines have: Spark 3.5 has no variant, collation or TIME. */
object SparkLineTestTypes {
  val variant: Option[DataType] = None
  def collated(collation: String): Option[StringType] = None
  val time: Option[DataType] = None
}
