package spillway;

import org.apache.spark.sql.SparkSessionExtensions;

import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * Spillway's Spark SQL extension: {@code spark.sql.extensions=spillway.SpillwayExtensions} runs
 * every eligible sort of SQL, DataFrame and PySpark queries (ORDER BY, and the sorts under
 * sort-merge joins, windows, sort aggregates and partitioned writes) as Spillway's native sort
 * ({@link spillway.sql.SpillwaySortExec}, shown as {@code SpillwaySort} in {@code explain} and the
 * SQL tab); the rules are {@link spillway.sql.SpillwaySessionRules}'.
 *
 * <p>First it checks that this jar is the one for the running Spark line and Scala version ({@link
 * SparkLine}): the wrong jar fails the session's creation with the artifact to use, before any
 * query. Java, so that this runs on any line before a Scala class of this jar is touched.
 */
public final class SpillwayExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
  static final String ENTRY = "spark.sql.extensions=spillway.SpillwayExtensions";

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    SparkLine.require(ENTRY);
    spillway.sql.SpillwaySessionRules.inject(extensions);
    return BoxedUnit.UNIT;
  }
}
