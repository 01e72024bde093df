package spillway.sql

import org.apache.spark.sql.catalyst.util.CollationFactory
import org.apache.spark.sql.types.{DataType, StringType}

/** The sort-key types that differ between Spark lines, as Spark 4.0 has them: collations, no TIME type. */
private[sql] object SparkLineTypes {
  /** Why strings of `st` do not sort by their UTF-8 bytes, or None if they do (UTF8_BINARY, the default). */
  def stringOrderProblem(st: StringType): Option[String] = {
    val collation = CollationFactory.fetchCollation(st.collationId)
    if (collation.supportsBinaryOrdering) None
    else Some(s"strings under collation ${collation.collationName} do not sort by their bytes")
  }

  /** Spark 4.0 has no TIME type. */
  def isTime(dataType: DataType): Boolean = false
}
