package spillway.sql

import java.io.ByteArrayOutputStream
import java.util.concurrent.ConcurrentLinkedQueue

import scala.util.Try

import org.apache.logging.log4j.{Level, LogManager}
import org.apache.logging.log4j.core.{LogEvent, Logger => CoreLogger}
import org.apache.logging.log4j.core.appender.AbstractAppender
import org.apache.logging.log4j.core.config.Property
import org.apache.spark.scheduler.{SparkListener, SparkListenerEvent}
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.execution.ui.{SparkListenerSQLAdaptiveExecutionUpdate, SparkListenerSQLExecutionStart}
import org.apache.spark.spillway.ListenerBusProbe
import org.scalatest.funsuite.AnyFunSuite

import spillway.{LocalSpark, TestFiles}

/**
 * Where users see the sorts left to Spark's sort: `explain` and the SQL tab's plan through the
 * explain provider (Spark 4.0 and later), a log line at WARN on request, and
 * `SpillwaySortRule.fallbacksOf`, the plain-strings listing PySpark reaches on every line. Each
 * check also runs a query whose sorts all run natively, which must list nothing.
 */
class SortFallbacksSuite extends AnyFunSuite with LocalSpark {
  override protected def sparkConf: Map[String, String] = Map(
    "spark.sql.extensions" -> "spillway.SpillwayExtensions",
    "spark.sql.shuffle.partitions" -> "2")

  private val Providers = SpillwaySortRule.ExplainProvidersKey
  private val LogFallbacks = SpillwaySortRule.LogFallbacksKey

  /** The one sort of [[fallbackQuery]], as every listing writes it. */
  private val FallbackLine =
    "Sort [t.i ASC NULLS FIRST, t.arr DESC NULLS LAST] runs as Spark's sort: key t.arr: nested type array<int> (only atomic types are encoded)"

  override def beforeAll(): Unit = {
    super.beforeAll()
    spark.range(0, 3000, 1, 2)
      .selectExpr("CAST(id % 13 AS INT) AS i", "array(CAST(id % 7 AS INT), CAST(id AS INT)) AS arr", "CAST(id AS STRING) AS str")
      .createOrReplaceTempView("t")
  }

  private def fallbackQuery(): DataFrame = spark.sql("SELECT * FROM t ORDER BY i, arr DESC")
  private def nativeQuery(): DataFrame = spark.sql("SELECT * FROM t ORDER BY i, str DESC")

  private def withConfs[T](confs: (String, String)*)(body: => T): T = {
    confs.foreach { case (k, v) => spark.conf.set(k, v) }
    try body
    finally confs.foreach { case (k, _) => spark.conf.unset(k) }
  }

  /** What `df.explain(mode)` prints. */
  private def explained(df: DataFrame, mode: String): String = {
    val out = new ByteArrayOutputStream()
    Console.withOut(out)(df.explain(mode))
    out.toString("UTF-8")
  }

  private val SectionHeader = "== Extended Information (Spillway) ==\n"

  /** The body of Spillway's section of an explain text (up to the next section), or None without one. */
  private def section(text: String): Option[String] = {
    val at = text.indexOf(SectionHeader)
    if (at < 0) None
    else {
      val body = text.substring(at + SectionHeader.length)
      val next = body.indexOf("\n== ")
      Some((if (next < 0) body else body.substring(0, next)).trim)
    }
  }

  if (SparkLineTestExplain.providers) {
    test("explain(\"extended\") with SpillwayExplainInfo lists the sort left to Spark and why, before and after the run; nothing for native sorts") {
      withConfs(Providers -> SpillwaySortRule.ExplainInfoClass) {
        val fallback = fallbackQuery()
        assert(section(explained(fallback, "extended")).contains(FallbackLine), explained(fallback, "extended"))
        fallback.collect()
        // After the run, adaptive execution's final plan: the same sort, listed once.
        assert(section(explained(fallback, "extended")).contains(FallbackLine), explained(fallback, "extended"))
        // Simple and formatted explain (the SQL tab's mode) carry the section as well.
        assert(section(explained(fallback, "simple")).contains(FallbackLine))
        assert(section(explained(fallback, "formatted")).contains(FallbackLine))

        val native = nativeQuery()
        native.collect()
        val text = explained(native, "extended")
        assert(text.contains("SpillwaySort ["), text)
        assert(section(text).contains(""), text)
      }
      // Without the setting, explain has no such section.
      assert(section(explained(fallbackQuery(), "extended")).isEmpty)
    }

    test("the SQL tab's plan description carries the section, from the query's start to its final plan") {
      val descriptions = new ConcurrentLinkedQueue[String]()
      val listener = new SparkListener {
        override def onOtherEvent(event: SparkListenerEvent): Unit = event match {
          case start: SparkListenerSQLExecutionStart => descriptions.add(start.physicalPlanDescription)
          case update: SparkListenerSQLAdaptiveExecutionUpdate => descriptions.add(update.physicalPlanDescription)
          case _ =>
        }
      }
      def seen(query: => DataFrame): Seq[String] = {
        ListenerBusProbe.drain(sc)
        descriptions.clear()
        sc.addSparkListener(listener)
        try {
          withConfs(Providers -> SpillwaySortRule.ExplainInfoClass)(query.collect())
          ListenerBusProbe.drain(sc)
        } finally sc.removeSparkListener(listener)
        descriptions.toArray.map(_.toString).toSeq
      }
      val fallback = seen(fallbackQuery())
      assert(fallback.size >= 2, "the start and the final plan") // an adaptive query posts its final plan as an update
      fallback.foreach(d => assert(section(d).contains(FallbackLine), d))
      val native = seen(nativeQuery())
      assert(native.nonEmpty)
      native.foreach(d => assert(section(d).contains(""), d))
    }
  }

  test("the explain provider is in this line's jar exactly when Spark has explain providers; on 3.5, naming it warns once") {
    val inJar = Try(Class.forName(SpillwaySortRule.ExplainInfoClass)).isSuccess
    assert(inJar == SparkLineTestExplain.providers)
    val named = Some(s"other.Provider, ${SpillwaySortRule.ExplainInfoClass}")
    assert(SpillwaySortRule.explainProvidersWarning(named).isDefined == !SparkLineTestExplain.providers)
    assert(SpillwaySortRule.explainProvidersWarning(Some("other.Provider")).isEmpty)
    assert(SpillwaySortRule.explainProvidersWarning(None).isEmpty)
    val lines = capturingLog(Level.WARN) {
      // Spark 4 loads every class listed: name Spillway's alone there.
      withConfs(Providers -> SpillwaySortRule.ExplainInfoClass)((1 to 3).foreach(_ => fallbackQuery().collect()))
    }.filter(_._2.contains(Providers))
    if (SparkLineTestExplain.providers) assert(lines.isEmpty, lines)
    else assert(lines == Seq(Level.WARN -> (s"Spillway: $Providers names ${SpillwaySortRule.ExplainInfoClass}, but Spark 3.5 " +
      "has no explain providers and ignores the setting (the class is in the jars for Spark 4.0 and later): list the sorts " +
      s"left to Spark's sort with spillway.sql.SpillwaySortRule.fallbacksOf(df), or set $LogFallbacks=true to log each at WARN")),
      lines)
  }

  test("spark.spillway.sql.sort.logFallbacks=true logs each sort left to Spark at WARN, once per query; INFO otherwise") {
    def fallbackLines(lines: Seq[(Level, String)]) = lines.filter(_._2.contains("runs as Spark's sort"))
    // Under the tests' log configuration (WARN, as PySpark's default) the line is hidden unless asked for.
    val hidden = capturingLog(level = null)(fallbackQuery().collect())
    assert(fallbackLines(hidden).isEmpty, hidden)
    val atWarn = capturingLog(level = null)(withConfs(LogFallbacks -> "true") {
      fallbackQuery().collect()
      nativeQuery().collect()
    })
    assert(fallbackLines(atWarn) == Seq(Level.WARN -> s"Spillway: $FallbackLine"), atWarn)
    // A sort-merge join's sorts (EnsureRequirements adds them) in the stage adaptive execution plans
    // again after each of the two shuffles: still once each.
    val join = capturingLog(level = null)(withConfs(LogFallbacks -> "true", "spark.sql.autoBroadcastJoinThreshold" -> "-1") {
      val df = spark.sql("SELECT a.i, b.str FROM t a JOIN t b ON a.arr = b.arr")
      df.collect()
      assert(SpillwaySortRule.fallbacksOf(df).length == 2, SpillwaySortRule.fallbacksOf(df).toSeq)
    })
    assert(fallbackLines(join).sortBy(_._2) == Seq("a", "b").map(side => Level.WARN ->
      s"Spillway: Sort [$side.arr ASC NULLS FIRST] runs as Spark's sort: key $side.arr: nested type array<int> (only atomic types are encoded)"), join)
    val atInfo = capturingLog(Level.INFO)(withConfs(LogFallbacks -> "false")(fallbackQuery().collect()))
    assert(fallbackLines(atInfo) == Seq(Level.INFO -> s"Spillway: $FallbackLine"), atInfo)
    val e = intercept[Exception](withConfs(LogFallbacks -> "yes")(fallbackQuery().collect()))
    val messages = TestFiles.causeChain(e).map(_.getMessage).mkString("\n")
    assert(messages.contains(s"Invalid value 'yes' for $LogFallbacks: expected true or false"), messages)
  }

  test("fallbacksOf (what PySpark calls): the sort left to Spark as a plain string, before and after the run; nothing otherwise") {
    val fallback = fallbackQuery()
    assert(SpillwaySortRule.fallbacksOf(fallback).toSeq == Seq(FallbackLine))
    fallback.collect()
    assert(SpillwaySortRule.fallbacksOf(fallback).toSeq == Seq(FallbackLine))
    assert(SpillwaySortRule.fallbacksOf(fallback).toSeq == Seq(FallbackLine), "asked twice")
    val native = nativeQuery()
    native.collect()
    assert(SpillwaySortRule.fallbacksOf(native).isEmpty)
    // Switched off, Spark's sorts run by choice: none is a fallback.
    withConfs(SpillwaySortRule.EnabledKey -> "false")(assert(SpillwaySortRule.fallbacksOf(fallbackQuery()).isEmpty))
  }

  /**
   * Runs `body` with a capturing appender on the rule's logger, at `level` (null: as configured);
   * each event's level and message.
   */
  private def capturingLog(level: Level)(body: => Unit): Seq[(Level, String)] = {
    val logger = LogManager.getLogger(classOf[SpillwaySortRule]).asInstanceOf[CoreLogger]
    val events = new ConcurrentLinkedQueue[(Level, String)]()
    val appender = new AbstractAppender("spillway-fallbacks-capture", null, null, true, Property.EMPTY_ARRAY) {
      override def append(event: LogEvent): Unit = events.add(event.getLevel -> event.getMessage.getFormattedMessage)
    }
    appender.start()
    val configured = logger.getLevel
    logger.addAppender(appender)
    if (level != null) logger.setLevel(level)
    try body
    finally {
      logger.removeAppender(appender)
      if (level != null) logger.setLevel(configured)
      appender.stop()
    }
    events.toArray.map(_.asInstanceOf[(Level, String)]).toSeq
  }
}
