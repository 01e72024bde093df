package spillway.sql

import org.apache.spark.sql.Row
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanHelper
import org.scalatest.funsuite.AnyFunSuite

import spillway.{LocalSpark, TaskSpill, TestFiles}
import spillway.tpch.TpchTables

/**
 * The 22 TPC-H queries over tables generated in the suite (scale factor 0.01), each with the
 * extension off (Spark's sort) and on: the same result (in the same order where the query orders
 * it), a node named `Spillway...` wherever the plan without the extension had a `Sort`, no sort left
 * to Spark, and nothing left on disk. Every join is a sort-merge join and execution memory is tight,
 * so that the native sort runs under the joins and spills inside some of the queries.
 */
class TpchSqlSuite extends AnyFunSuite with LocalSpark with AdaptiveSparkPlanHelper {
  override protected def sparkConf: Map[String, String] = Map(
    "spark.sql.extensions" -> "spillway.SpillwayExtensions",
    "spark.sql.shuffle.partitions" -> "2",
    "spark.sql.session.timeZone" -> "UTC",
    // No broadcast joins: the sorts under sort-merge joins are most of TPC-H's sorts.
    "spark.sql.autoBroadcastJoinThreshold" -> "-1",
    // 8 MiB of execution and storage memory for two tasks: the larger sorts spill at this scale.
    "spark.testing.memory" -> (16L << 20).toString,
    "spark.testing.reservedMemory" -> "0",
    "spark.memory.fraction" -> "0.5")

  private val ScaleFactor = 0.01

  /** The queries in which the native sort spilled (its "spill size" metric), in the order run. */
  private val spilled = Seq.newBuilder[Int]

  override def beforeAll(): Unit = {
    super.beforeAll()
    val dir = base.resolve("tpch") // under the suite's temp dir, removed with it
    TpchTables.write(spark, ScaleFactor, dir, parts = 1)
    TpchTables.register(spark, dir)
  }

  private final class Run(val rows: Seq[Row], val plan: SparkPlan) {
    /** Every node of the executed plan: adaptive final plans, their query stages and subqueries included. */
    def nodeNames: Seq[String] = collectWithSubqueries(plan) { case p => p.nodeName }
    def nativeSorts: Seq[SpillwaySortExec] = collectWithSubqueries(plan) { case s: SpillwaySortExec => s }
  }

  private def run(n: Int, enabled: Boolean): Run = {
    spark.conf.set(SpillwaySortRule.EnabledKey, enabled.toString)
    try {
      val df = spark.sql(TpchTables.query(n))
      new Run(df.collect().toSeq, df.queryExecution.executedPlan)
    } finally spark.conf.unset(SpillwaySortRule.EnabledKey)
  }

  for (n <- TpchTables.Queries) {
    test(f"TPC-H Q$n%02d: Spark's result with the native sort wherever Spark's sort was") {
      val off = run(n, enabled = false)
      val on = run(n, enabled = true)
      val sparkSorts = off.nodeNames.count(_ == "Sort")
      assert(!off.nodeNames.exists(_.startsWith("Spillway")), s"switched off, yet native sorts:\n${off.plan}")
      assert(!on.nodeNames.contains("Sort"), s"a Spark sort was left:\n${on.plan}")
      assert(on.nodeNames.count(_.startsWith("Spillway")) == sparkSorts, s"on:\n${on.plan}\noff:\n${off.plan}")
      assert(SpillwaySortRule.fallbacks(on.plan).isEmpty)
      assert(on.rows.size == off.rows.size)
      // Money is DECIMAL: sums and averages are exact, so the results must be equal, not close.
      if (TpchTables.ordered(n)) assert(on.rows == off.rows)
      else assert(SpillwaySortSqlSuite.multiset(on.rows) == SpillwaySortSqlSuite.multiset(off.rows))
      if (on.nativeSorts.map(_.metrics("spillSize").value).sum > 0) spilled += n
      assert(TestFiles.spillDirsUnder(roots).isEmpty, "plan dirs left on disk")
      assert(TaskSpill.activePlans == 0, "plans left unreleased")
    }
  }

  test("the native sort spilled inside the queries, and left nothing on disk") {
    val queries = spilled.result()
    info(s"spilled in Q${queries.mkString(", Q")}")
    assert(queries.nonEmpty, "no query made the native sort spill: lower the execution memory")
    assert(TestFiles.spillDirsUnder(roots).isEmpty)
  }
}
