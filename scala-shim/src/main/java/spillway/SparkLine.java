package spillway;

import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Method;
import java.util.Properties;

/**
 * The Spark line and Scala version this jar is built for, checked against the ones running.
 *
 * <p>Every Spark line (3.5, 4.0, 4.1) and Scala binary version (2.12, 2.13) gets a jar of its own:
 * a class compiled against one fails in another with a {@code NoClassDefFoundError} somewhere deep
 * in a query. The plugin and the SQL extension, Spark's two entry points into this jar, call
 * {@link #require} before they touch any Scala class, so the wrong jar fails at once with one line
 * that names what is running and the artifact to use. Plain Java that asks Spark and Scala for their
 * versions by reflection: it runs the same on every line. The build writes {@code
 * spillway/spark-line.properties} into each jar (build.sbt, {@code sparkLineResource}).
 */
public final class SparkLine {
  private SparkLine() {}

  static final String RESOURCE = "spillway/spark-line.properties";

  private static final Properties BUILT = readBuilt();

  /** The Spark line this jar is built for, such as {@code 3.5}. */
  public static String builtSparkLine() {
    return BUILT.getProperty("spark.line");
  }

  /** The Scala binary version this jar is built for, such as {@code 2.12}. */
  public static String builtScalaBinary() {
    return BUILT.getProperty("scala.binary");
  }

  /** This jar's Maven coordinates, {@code group:artifact:version}. */
  public static String coordinates() {
    return coordinates(BUILT.getProperty("artifact"));
  }

  /**
   * Throws {@link IllegalStateException} with one line naming the running Spark and Scala versions
   * and the artifact to use when this jar is built for another line or Scala version. {@code
   * entry} says which entry point was taken ({@code spark.plugins=spillway.SpillwayPlugin}).
   */
  public static void require(String entry) {
    String problem = mismatch(runningSparkVersion(), runningScalaVersion(), entry);
    if (problem != null) {
      throw new IllegalStateException(problem);
    }
  }

  /** The one-line message for a jar loaded into Spark {@code spark} on Scala {@code scala}, or null when they match. */
  static String mismatch(String spark, String scala, String entry) {
    String line = lineOf(spark);
    String scalaBinary = lineOf(scala);
    if (line.equals(builtSparkLine()) && scalaBinary.equals(builtScalaBinary())) {
      return null;
    }
    String running = "this is Spark " + spark + " on Scala " + scala;
    String built = "Spillway " + coordinates() + " (" + entry + ") is built for Spark "
        + builtSparkLine() + " on Scala " + builtScalaBinary() + ", but " + running;
    String wanted = "spillway-spark" + line + "_" + scalaBinary;
    for (String supported : BUILT.getProperty("supported").split(",")) {
      if (supported.equals(line + "_" + scalaBinary)) {
        return built + ": use " + coordinates(wanted) + " instead";
      }
    }
    return built + ", for which Spillway has no build: it has one for Spark "
        + BUILT.getProperty("supported").replace("_", " on Scala ").replace(",", ", ");
  }

  private static String coordinates(String artifact) {
    return BUILT.getProperty("group") + ":" + artifact + ":" + BUILT.getProperty("version");
  }

  /** {@code 3.5} of {@code 3.5.9}, {@code 2.12} of {@code 2.12.18}. */
  private static String lineOf(String version) {
    String[] parts = version.split("[.\\-]");
    return parts.length < 2 ? version : parts[0] + "." + parts[1];
  }

  /** {@code org.apache.spark.SPARK_VERSION}, the same on every line. */
  static String runningSparkVersion() {
    return (String) moduleValue("org.apache.spark.package$", "SPARK_VERSION");
  }

  /** {@code scala.util.Properties.versionNumberString}, the same on every Scala version. */
  static String runningScalaVersion() {
    return (String) moduleValue("scala.util.Properties$", "versionNumberString");
  }

  private static Object moduleValue(String module, String method) {
    try {
      Class<?> c = Class.forName(module, true, SparkLine.class.getClassLoader());
      Object instance = c.getField("MODULE$").get(null);
      Method m = c.getMethod(method);
      return m.invoke(instance);
    } catch (ReflectiveOperationException | LinkageError e) {
      throw new IllegalStateException("Spillway " + coordinates() + " could not read " + module.replace("$", "")
          + "." + method + ": is Spark on the classpath? (" + e + ")", e);
    }
  }

  private static Properties readBuilt() {
    Properties p = new Properties();
    try (InputStream in = SparkLine.class.getClassLoader().getResourceAsStream(RESOURCE)) {
      if (in == null) {
        throw new IllegalStateException(RESOURCE + " is missing from the Spillway jar: rebuild it with `make jar`");
      }
      p.load(in);
    } catch (IOException e) {
      throw new IllegalStateException("cannot read " + RESOURCE + " from the Spillway jar: " + e, e);
    }
    return p;
  }
}
