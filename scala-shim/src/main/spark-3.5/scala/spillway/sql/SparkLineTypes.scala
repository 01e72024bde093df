package spillway.sql

import org.apache.spark.sql.types.{DataType, StringType}

/** The sort-key types that differ between Spark lines, as Spark 3.5 has them: no collations, no TIME. */
private[sql] object SparkLineTypes {
  /** Strings in Spark 3.5 always sort by their UTF-8 bytes. */
  def stringOrderProblem(st: StringType): Option[String] = None

  /** Spark 3.5 has no TIME type. */
  def isTime(dataType: DataType): Boolean = false
}
