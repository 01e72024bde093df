package spillway;

import org.apache.spark.sql.SparkSession;

/**
 * The driver program of {@link SparkLineSuite}'s child JVMs: this line's Spark with one Spillway jar
 * (perhaps another line's) on the classpath, nothing else of Spillway. Takes each of Spark's two
 * entry points into the jar in turn, the plugin alone, then the SQL extension alone, and prints for each
 * either {@code <entry>-ran count=<n>} or {@code <entry>-failed=<exception class>}, the message's
 * lines, and {@code <entry>-end}. Java, so that nothing of Scala runs here before Spark does.
 *
 * <p>Arguments: the spark.local.dir to use.
 */
public final class SparkLineChild {
  private SparkLineChild() {}

  public static void main(String[] args) {
    String localDir = args[0];
    take("plugin", localDir, "spark.plugins", "spillway.SpillwayPlugin");
    take("extension", localDir, "spark.sql.extensions", "spillway.SpillwayExtensions");
    System.out.flush();
    System.exit(0);
  }

  private static void take(String entry, String localDir, String key, String value) {
    SparkSession spark = null;
    try {
      spark = SparkSession.builder().master("local[1]").appName("spark-line-" + entry)
          .config("spark.ui.enabled", "false").config("spark.local.dir", localDir)
          .config(key, value).getOrCreate();
      long count = spark.range(10).count();
      System.out.println(entry + "-ran count=" + count);
    } catch (Throwable t) {
      System.out.println(entry + "-failed=" + t.getClass().getName());
      System.out.println(t.getMessage());
    } finally {
      System.out.println(entry + "-end");
      if (spark != null) {
        spark.stop();
      }
      // The plugin's failure stopped its SparkContext; the extension's, the last entry, leaves
      // one running, which System.exit's shutdown hook stops.
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    }
  }
}
