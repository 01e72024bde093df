package spillway.sql

import java.nio.file.{Files, Path}

import org.apache.spark.SparkEnv
import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.execution.{SortExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanHelper
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import spillway.TestFiles

/**
 * Spillway beside Apache DataFusion Comet 1.2.0 (the real jar, `libcomet.so` inside, a Test
 * dependency of this line only): the same queries with Spark alone, Comet alone, Spillway alone and
 * both, in both orders of `spark.sql.extensions`. With both on, every sort Comet runs natively
 * must stay Comet's (`CometSort`), Spillway must take exactly the sorts Comet leaves to Spark's
 * row-based `SortExec`, every result must be Spark's, and no columnar-to-row transition may be
 * added to what Comet alone has.
 *
 * Comet's plugin and shuffle manager are SparkContext settings: each configuration gets a session
 * (and SparkContext) of its own, made and stopped here, one after another. The suites share one JVM,
 * so the last test checks that nothing of Comet is left on the session a later suite would get.
 */
class CometComposeSuite extends AnyFunSuite with BeforeAndAfterAll with AdaptiveSparkPlanHelper {
  import CometComposeSuite._

  private var base: Path = _
  private var data: String = _

  override def beforeAll(): Unit = {
    super.beforeAll()
    base = Files.createTempDirectory("spillway-CometComposeSuite-")
    data = base.resolve("data").toString
    // Parquet, so that Comet scans natively and its sorts have a native child.
    withSession(Mode.Spark) { spark =>
      spark.range(0, Rows, 1, 3).selectExpr(
        "id",
        "cast((id * 7919) % 1000 as int) AS i",
        "concat('s', cast((id * 104729) % 997 as string)) AS s",
        "cast(id % 50 as int) AS k",
        "cast((id * 31) % 1000 as double) / 7 AS d",
        "make_dt_interval(0, cast(id % 24 as int), cast((id * 13) % 60 as int), 0) AS dt"
      ).write.parquet(s"$data/t")
      spark.range(0, 50).selectExpr("cast(id as int) AS k", "concat('u', cast(id as string)) AS name")
        .write.parquet(s"$data/u")
    }
  }

  override def afterAll(): Unit =
    try if (base != null) TestFiles.deleteRecursively(base)
    finally super.afterAll()

  /** A session of `mode`, its views registered; stopped (with its SparkContext) after `body`. */
  private def withSession[T](mode: Mode)(body: SparkSession => T): T = {
    val spark = mode.confs
      .foldLeft(SparkSession.builder().master("local[2]").appName(s"CometComposeSuite-${mode.name}")) {
        case (b, (k, v)) => b.config(k, v)
      }
      .config("spark.local.dir", base.toString)
      .config("spark.ui.enabled", "false")
      .config("spark.sql.shuffle.partitions", "4")
      .config("spark.sql.autoBroadcastJoinThreshold", "-1")
      .getOrCreate()
    try {
      if (data != null && Files.isDirectory(java.nio.file.Paths.get(data, "t"))) {
        spark.read.parquet(s"$data/t").createOrReplaceTempView("t")
        spark.read.parquet(s"$data/u").createOrReplaceTempView("u")
      }
      body(spark)
    } finally {
      spark.stop()
      SparkSession.clearActiveSession()
      SparkSession.clearDefaultSession()
    }
  }

  /** Each mode's runs of every query: made once, in mode order, one session at a time. */
  private lazy val runs: Map[(Mode, String), QueryRun] = Mode.all.flatMap { mode =>
    withSession(mode) { spark =>
      contexts(mode) = ContextSeen(
        spark.sparkContext.getConf.getOption("spark.plugins"),
        SparkEnv.get.shuffleManager.getClass.getName,
        spark.sparkContext.getConf.getOption("spark.sql.extensions"))
      Queries.map { case (name, sql) =>
        val df = spark.sql(sql)
        val rows = df.collect().toSeq
        val plan = df.queryExecution.executedPlan // the final plan, the query having run
        (mode, name) -> QueryRun(rows, nodeNames(plan), plan.toString)
      }
    }
  }.toMap

  private val contexts = scala.collection.mutable.Map.empty[Mode, ContextSeen]

  private def nodeNames(plan: SparkPlan): Seq[String] = collectWithSubqueries(plan) { case p => p.getClass.getName }

  private def run(mode: Mode, query: String): QueryRun = runs((mode, query))

  test("every configuration returns Spark's rows") {
    for (mode <- Mode.all; (name, _) <- Queries) {
      val expected = run(Mode.Spark, name).rows
      val actual = run(mode, name).rows
      val inOrder = name.startsWith("order by")
      if (inOrder) assert(actual == expected, s"$name under ${mode.name}")
      else assert(actual.map(_.toString).sorted == expected.map(_.toString).sorted, s"$name under ${mode.name}")
    }
  }

  private def plans(query: String, modes: Mode*): String =
    modes.map(m => s"--- ${m.name}:\n${run(m, query).plan}").mkString("\n")

  test("the queries are the cases: Comet runs some sorts natively and leaves others to Spark's SortExec") {
    for (name <- NativeInComet) {
      val comet = run(Mode.Comet, name)
      assert(comet.cometSorts > 0 && comet.sparkSorts == 0, plans(name, Mode.Comet))
    }
    for (name <- FallbackInComet) {
      val comet = run(Mode.Comet, name)
      assert(comet.cometSorts == 0 && comet.sparkSorts > 0, plans(name, Mode.Comet))
    }
    for ((name, _) <- Queries) assert(run(Mode.Spillway, name).sparkSorts == 0, plans(name, Mode.Spillway))
  }

  for (both <- Mode.Both) {
    test(s"${both.name}: Comet keeps every sort it runs natively, Spillway takes the ones Comet leaves to SortExec") {
      for ((name, _) <- Queries) {
        val comet = run(Mode.Comet, name)
        val composed = run(both, name)
        val where = plans(name, Mode.Comet, both)
        assert(composed.cometSorts == comet.cometSorts, where)
        assert(composed.spillwaySorts == comet.sparkSorts, where)
        assert(composed.sparkSorts == 0, where)
      }
    }

    test(s"${both.name}: no columnar transition that Comet alone does not have") {
      for ((name, _) <- Queries) {
        val comet = run(Mode.Comet, name)
        val composed = run(both, name)
        val where = plans(name, Mode.Comet, both)
        assert(composed.columnarToRow == comet.columnarToRow, where)
        assert(composed.rowToColumnar == comet.rowToColumnar, where)
        // Every other node is Comet's own: only Spark's sorts became Spillway's.
        assert(composed.cometNodes == comet.cometNodes, where)
      }
    }
  }

  test("Comet's plugin and shuffle manager are on Comet's sessions only, and gone once they stop") {
    for (mode <- Mode.all) {
      val seen = contexts.getOrElse(mode, fail(s"no session of ${mode.name} ran"))
      val comet = mode.confs.get("spark.plugins").exists(_.contains("CometPlugin"))
      assert(seen.plugins.exists(_.contains("CometPlugin")) == comet, s"${mode.name}: $seen")
      assert(seen.shuffleManager.contains("CometShuffleManager") == comet, s"${mode.name}: $seen")
      // Comet's plugin puts its extension into the conf of the SparkContext it is in, no other.
      assert(seen.extensions.exists(_.contains(Mode.CometExtensions)) == comet, s"${mode.name}: $seen")
    }
    // Spillway alone ran after Comet alone, in the same JVM: none of Comet's nodes.
    for ((name, _) <- Queries) assert(run(Mode.Spillway, name).cometNodes == 0, plans(name, Mode.Spillway))
    assert(SparkSession.getActiveSession.isEmpty && SparkSession.getDefaultSession.isEmpty)
  }
}

object CometComposeSuite {
  val Rows = 20000

  /**
   * One query's rows and the class names of its final plan's nodes (subqueries and query stages
   * included). Comet's nodes are known by name: the suite compiles without Comet.
   */
  final case class QueryRun(rows: Seq[Row], nodes: Seq[String], plan: String) {
    private val simple = nodes.map(n => n.substring(n.lastIndexOf('.') + 1))
    /** Comet's native sorts (`CometSortExec`; not `CometSortMergeJoinExec`). */
    def cometSorts: Int = simple.count(_ == "CometSortExec")
    def spillwaySorts: Int = nodes.count(_ == classOf[SpillwaySortExec].getName)
    /** Spark's own row-based sort, exactly (SpillwaySortExec is a SortExec too). */
    def sparkSorts: Int = nodes.count(_ == classOf[SortExec].getName)
    /** Columnar-to-row transitions, Spark's and Comet's (`ColumnarToRowExec`, `CometColumnarToRowExec`, ...). */
    def columnarToRow: Int = simple.count(_.contains("ColumnarToRow"))
    def rowToColumnar: Int = simple.count(_.contains("RowToColumnar"))
    def cometNodes: Int = simple.count(_.startsWith("Comet"))
  }

  final case class ContextSeen(plugins: Option[String], shuffleManager: String, extensions: Option[String])

  final case class Mode(name: String, confs: Map[String, String])

  object Mode {
    val CometExtensions = "org.apache.comet.CometSparkSessionExtensions"
    val SpillwayExtensions = "spillway.SpillwayExtensions"

    /** What Comet needs (its plugin adds its extension to `spark.sql.extensions`, last, if absent). */
    val CometConfs: Map[String, String] = Map(
      "spark.plugins" -> "org.apache.spark.CometPlugin",
      "spark.shuffle.manager" -> "org.apache.spark.sql.comet.execution.shuffle.CometShuffleManager",
      "spark.memory.offHeap.enabled" -> "true",
      "spark.memory.offHeap.size" -> "1g")

    val Spark = Mode("spark", Map.empty)
    val Comet = Mode("comet", CometConfs)
    val SpillwayPlugin = "spillway.SpillwayPlugin"

    val Spillway = Mode("spillway", Map("spark.plugins" -> SpillwayPlugin, "spark.sql.extensions" -> SpillwayExtensions))
    private val BothConfs = CometConfs + ("spark.plugins" -> s"$SpillwayPlugin,${CometConfs("spark.plugins")}")
    /** What a user who adds Comet's plugin to a Spillway session gets: Spillway's rules first. */
    val BothSpillwayFirst = Mode("both, spillway first", BothConfs + ("spark.sql.extensions" -> SpillwayExtensions))
    val BothCometFirst = Mode("both, comet first", BothConfs + ("spark.sql.extensions" -> s"$CometExtensions,$SpillwayExtensions"))

    // Spillway alone after Comet: a later session must not see Comet.
    val all: Seq[Mode] = Seq(Spark, Comet, Spillway, BothSpillwayFirst, BothCometFirst)
    val Both: Seq[Mode] = Seq(BothSpillwayFirst, BothCometFirst)
  }

  // Comet 1.2.0 sorts these natively (parquet scanned natively, keys of types and expressions it supports).
  val NativeInComet: Seq[String] = Seq("order by int, string", "order by double", "order by decimal(38)", "order by binary", "sort-merge join")
  // And leaves these to Spark's SortExec: a day-time interval column (Comet's scan does not read
  // the type, so the query runs as Spark's), and a lone day-time interval key computed over Comet's
  // scan, projection and shuffle (Comet sorts a single key of scalar types other than intervals
  // only, so the sort alone falls back, after a columnar-to-row transition). Its rows are the key
  // alone: ties are identical rows.
  val FallbackInComet: Seq[String] = Seq("order by interval column", "order by interval expression")

  val Queries: Seq[(String, String)] = Seq(
    "order by int, string" -> "SELECT id, i, s FROM t ORDER BY i, s DESC, id",
    "order by double" -> "SELECT id, d FROM t ORDER BY d, id",
    "order by decimal(38)" -> "SELECT id, i FROM t ORDER BY cast(i AS decimal(38, 2)) DESC, id",
    "order by binary" -> "SELECT id, s FROM t ORDER BY cast(s AS binary), id",
    "order by interval column" -> "SELECT id, dt FROM t ORDER BY dt, id",
    "order by interval expression" -> "SELECT make_dt_interval(0, i % 24, cast(id % 60 AS int), 0) AS k FROM t ORDER BY k DESC",
    "sort-merge join" -> "SELECT /*+ MERGE(u) */ t.id, t.i, u.name FROM t JOIN u ON t.k = u.k")
}
