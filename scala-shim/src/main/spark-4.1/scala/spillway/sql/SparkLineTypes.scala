package spillway.sql

import org.apache.spark.sql.catalyst.util.CollationFactory
import org.apache.spark.sql.types.{DataType, StringType, TimeType}

/** The sort-key types that differ between Spark lines, as Spark 4.1 has them: collations and TIME. */
private[sql] object SparkLineTypes {
  /** Why strings of `st` do not sort by their UTF-8 bytes, or None if they do (UTF8_BINARY, the default). */
  def stringOrderProblem(st: StringType): Option[String] = {
    val collation = CollationFactory.fetchCollation(st.collationId)
    if (collation.supportsBinaryOrdering) None
    else Some(s"strings under collation ${collation.collationName} do not sort by their bytes")
  }

  /** Whether `dataType` is TIME, stored as a long of nanoseconds and ordered as one. */
  def isTime(dataType: DataType): Boolean = dataType.isInstanceOf[TimeType]
}
