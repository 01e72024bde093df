package spillway.sql

import org.apache.spark.sql.types.{DataType, StringType, VariantType}

/** The key types of the suites that only some Spark lines have: Spark 4.0 has variant and collations, no TIME. */
object SparkLineTestTypes {
  val variant: Option[DataType] = Some(VariantType)
  def collated(collation: String): Option[StringType] = Some(StringType(collation))
  val time: Option[DataType] = None
}
