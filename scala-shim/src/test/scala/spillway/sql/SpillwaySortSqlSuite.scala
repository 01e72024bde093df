package spillway.sql

import java.math.{BigDecimal => JBigDecimal}
import java.nio.file.Files
import java.time.{Duration, Instant, LocalDate, LocalDateTime, Period, ZoneOffset}
import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.atomic.AtomicReference

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.Random

import org.apache.logging.log4j.{Level, LogManager}
import org.apache.logging.log4j.core.{LogEvent, Logger => CoreLogger}
import org.apache.logging.log4j.core.appender.AbstractAppender
import org.apache.logging.log4j.core.config.Property
import org.apache.spark.sql.{DataFrame, Row}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.{QueryExecution, SortExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.{AdaptiveSparkPlanExec, AdaptiveSparkPlanHelper}
import org.apache.spark.sql.execution.joins.SortMergeJoinExec
import org.apache.spark.sql.functions.{col, monotonically_increasing_id, udf}
import org.apache.spark.sql.types._
import org.apache.spark.sql.util.QueryExecutionListener
import org.apache.spark.TaskContext
import org.apache.spark.scheduler.{SparkListener, SparkListenerTaskEnd}
import org.apache.spark.spillway.{ListenerBusProbe, MemoryHog}
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

import spillway.{DirectBufferPool, LocalSpark, SpillwayConf, TaskSpill, TestFiles}

/**
 * The extension in real queries, with Spark's own SortExec as the oracle: every query runs with
 * `spark.spillway.sql.sort.enabled` off (Spark's sort) and on (Spillway's), and both must return
 * the same rows in the same order of sort keys (rows whose keys tie may come in another order,
 * as between two runs of Spark's own sort once it spills). The native node must stand wherever
 * Spark's sort stood, inside adaptive query stages included; nothing may be left on disk.
 */
class SpillwaySortSqlSuite extends AnyFunSuite with LocalSpark with AdaptiveSparkPlanHelper {
  import SpillwaySortSqlSuite._

  override protected def sparkConf: Map[String, String] = Map(
    "spark.sql.extensions" -> "spillway.SpillwayExtensions",
    "spark.sql.shuffle.partitions" -> "4",
    "spark.sql.datetime.java8API.enabled" -> "true",
    "spark.sql.session.timeZone" -> "UTC")

  private val Enabled = SpillwaySortRule.EnabledKey
  private val Budget = SpillwayConf.SortMemoryBudgetKey

  override def beforeAll(): Unit = {
    super.beforeAll()
    spark.createDataFrame(sc.parallelize(randomRows(12000, seed = 42), 3), schema).createOrReplaceTempView("t")
  }

  private final class Run(val rows: Seq[Row], val plan: SparkPlan) {
    // The native node is a SortExec too: Spark's sorts are the others.
    def sparkSorts: Int = collect(plan) { case s: SortExec if !s.isInstanceOf[SpillwaySortExec] => s }.size
    def nativeSorts: Seq[SpillwaySortExec] = collect(plan) { case s: SpillwaySortExec => s }
    def metric(name: String): Long = nativeSorts.map(_.metrics(name).value).sum
  }

  private def withConfs[T](confs: (String, String)*)(body: => T): T = {
    confs.foreach { case (k, v) => spark.conf.set(k, v) }
    try body
    finally confs.foreach { case (k, _) => spark.conf.unset(k) }
  }

  private def run(enabled: Boolean, confs: (String, String)*)(query: => DataFrame): Run =
    withConfs((Enabled -> enabled.toString) +: confs: _*) {
      val df = query
      val rows = df.collect().toSeq
      new Run(rows, df.queryExecution.executedPlan)
    }

  /**
   * Runs `query` off and on; checks the plans (the native sort wherever Spark's was) and the
   * results: the same rows, and if `keys` is given, the same sequence of those key values.
   */
  private def compare(keys: Seq[String], confs: (String, String)*)(query: => DataFrame): Run = {
    val off = run(enabled = false, confs: _*)(query)
    val on = run(enabled = true, confs: _*)(query)
    assert(off.nativeSorts.isEmpty, s"switched off, yet native sorts:\n${off.plan}")
    assert(off.sparkSorts > 0, s"the query has no sort to replace:\n${off.plan}")
    assert(on.sparkSorts == 0, s"a Spark sort was left:\n${on.plan}")
    assert(on.nativeSorts.size == off.sparkSorts, s"on:\n${on.plan}\noff:\n${off.plan}")
    assert(on.rows.size == off.rows.size)
    if (keys.nonEmpty) {
      val schema = on.rows.headOption.map(_.schema).orNull
      if (schema != null) {
        val ordinals = keys.map(schema.fieldIndex)
        val keysOn = on.rows.map(r => ordinals.map(i => canon(r.get(i), normaliseZero = true)))
        val keysOff = off.rows.map(r => ordinals.map(i => canon(r.get(i), normaliseZero = true)))
        val firstDiff = keysOn.indices.find(i => keysOn(i) != keysOff(i))
        firstDiff.foreach(i => fail(s"sort keys differ first at row $i of ${keysOn.size}: on ${keysOn(i)}, off ${keysOff(i)}"))
      }
    }
    assert(multiset(on.rows) == multiset(off.rows), "the rows differ")
    assertNothingLeft()
    on
  }

  private def assertNothingLeft(): Unit = {
    assert(TestFiles.spillDirsUnder(roots).isEmpty, "plan dirs left on disk")
    assert(TaskSpill.activePlans == 0, "plans left unreleased")
  }

  private val orderings = Seq("ASC NULLS FIRST", "ASC NULLS LAST", "DESC NULLS FIRST", "DESC NULLS LAST")

  test("ORDER BY each supported type (the four direction and null orderings in turn): Spark's order; the node in explain before running") {
    // Two keys a query: each column's special values tie often, so the second key decides a lot.
    val pairs = (sortableColumns :+ "str").grouped(2).toSeq
    for ((Seq(first, second), n) <- pairs.zipWithIndex) {
      val order = s"$first ${orderings(n % 4)}, $second ${orderings((n + 1) % 4)}"
      withClue(s"ORDER BY $order: ") {
        compare(Seq(first, second))(spark.sql(s"SELECT * FROM t ORDER BY $order"))
      }
    }
    // Adaptive execution shows its initial plan before running: the native sort is already there.
    withConfs(Enabled -> "true") {
      val df = spark.sql("SELECT * FROM t ORDER BY str DESC")
      val before = df.queryExecution.executedPlan
      assert(before.isInstanceOf[AdaptiveSparkPlanExec])
      assert(before.toString.contains("SpillwaySort [str"), before.toString)
    }
  }

  test("multi-key ORDER BY under a tight budget: spills inside the query, Spark's order, SQL and task metrics") {
    val keys = Seq("b", "y", "ym", "str", "d", "dec38", "bin", "ts")
    val order = keys.zipWithIndex.map { case (k, n) => s"$k ${orderings(n % 4)}" }.mkString(", ")
    val on = compare(keys, Budget -> "64k")(spark.sql(s"SELECT * FROM t ORDER BY $order"))
    assert(on.metric("runsSpilled") > 0, "the native sort did not spill")
    assert(on.metric("mergePasses") >= 1, "a sort that spilled merges its runs at least once")
    assert(on.metric("spillSize") > 0)
    assert(on.metric("peakMemory") > 0)
    // The default budget holds this data in memory: no run.
    val inMemory = compare(keys)(spark.sql(s"SELECT * FROM t ORDER BY $order"))
    assert(inMemory.metric("runsSpilled") == 0)
    assert(inMemory.metric("mergePasses") == 0)
    assert(inMemory.metric("peakMemory") > 0)
  }

  test("task metrics: the native sort's spills count in the tasks' memory and disk bytes spilled") {
    val memorySpilled = new java.util.concurrent.atomic.AtomicLong
    val diskSpilled = new java.util.concurrent.atomic.AtomicLong
    val listener = new SparkListener {
      override def onTaskEnd(end: SparkListenerTaskEnd): Unit = if (end.taskMetrics != null) {
        memorySpilled.addAndGet(end.taskMetrics.memoryBytesSpilled)
        diskSpilled.addAndGet(end.taskMetrics.diskBytesSpilled)
      }
    }
    ListenerBusProbe.drain(sc)
    sc.addSparkListener(listener)
    val on =
      try {
        val on = run(enabled = true, Budget -> "64k")(spark.sql("SELECT * FROM t ORDER BY str DESC, dec38"))
        ListenerBusProbe.drain(sc)
        on
      } finally sc.removeSparkListener(listener)
    assert(on.metric("runsSpilled") > 0)
    assert(diskSpilled.get > 0)
    assert(memorySpilled.get == on.metric("spillSize"), s"task metrics ${memorySpilled.get}, SQL metric ${on.metric("spillSize")}")
    assertNothingLeft()
  }

  test("Spark makes the native sort spill while its output is read (another consumer needs the memory)") {
    // Three times while the rows are read, a consumer asks for more memory than the executor has:
    // Spark spills the task's other consumers, the sort among them, before it gives up. One
    // partition of all rows, so that the sort holds more than the read buffer a spill would cost.
    val hog = udf { (id: Long) =>
      if (id % 4000 == 0) MemoryHog.grabAndRelease(TaskContext.get())
      id
    }.asNondeterministic()
    val on = compare(Seq("str", "d"))(
      spark.table("t").coalesce(1).sortWithinPartitions(col("str").desc, col("d")).select(hog(col("id")).as("id"), col("str"), col("d")))
    assert(on.metric("runsSpilled") > 0, "Spark did not make the native sort spill")
  }

  test("rows larger than a batch: the buffers grow, the order holds") {
    // Under a 64k budget a batch is 16 KiB: rows of 100 to 200 KB pass it on the way in and on the way out.
    compare(Seq("k"), Budget -> "64k")(spark.sql(
      "SELECT id % 7 AS k, repeat(cast(id AS string), 100000) AS big FROM range(0, 40, 1, 2) ORDER BY k DESC, big"))
  }

  test("the rows point into the sort's output buffers: a row's bytes stay valid past the next row, across batches") {
    // A 64k budget makes 16 KiB batches: the 4,000 rows of a partition span many of them. Each
    // row's string is read without a copy (a UTF8String over the buffer) and checked once the
    // next row has been returned: the lifetime the sort promises (SpillwaySortIterator).
    // An RDD action carries no session conf to its tasks: the budget goes as a local property.
    withConfs(Enabled -> "true") {
      val df = spark.sql("SELECT id % 97 AS k, repeat(cast(id AS string), 3) AS s FROM range(0, 12000, 1, 3) ORDER BY k, s")
      val checked = withLocalProperty(Budget, "64k")(df.queryExecution.toRdd.mapPartitions { rows =>
        var previous: org.apache.spark.unsafe.types.UTF8String = null
        var previousCopy = ""
        var n = 0L
        rows.foreach { row =>
          if (previous != null) assert(previous.toString == previousCopy, s"row ${n - 1} changed under the next row")
          previous = row.getUTF8String(1)
          previousCopy = previous.toString
          n += 1
        }
        Iterator(n)
      }.collect()).sum
      assert(checked == 12000)
      assert(collect(df.queryExecution.executedPlan) { case s: SpillwaySortExec => s }.nonEmpty)
    }
  }

  /** `k`, `s` unique per row; sorted within each of `partitions` partitions (no shuffle). */
  private def sortedWithinPartitions(partitions: Int): DataFrame =
    spark.range(0, 12000, 1, partitions).selectExpr("id % 97 AS k", "repeat(cast(id AS string), 3) AS s")
      .sortWithinPartitions(col("k").desc, col("s"))

  test("the last row stays readable after hasNext() is false; its buffers went back to the pool, were reused and overwritten") {
    // One partition, so that no other task uses the pool meanwhile; emptied first, then given one
    // marked buffer of the batch size, so that where the sort's buffers come from shows. The task
    // keeps the reference to the last row, as an operator does (Spark's GroupedIterator reads it
    // after hasNext() is false), then takes every buffer of the pool, as the next sort would, and
    // overwrites them before reading the row.
    // An RDD action sets no session conf as a local property: the budget is set as one, making
    // 16 KiB batches: the output's first buffer is then the input batch given back.
    def lastRow(enabled: Boolean): LastRowSeen = withConfs(Enabled -> enabled.toString) {
      val df = sortedWithinPartitions(1)
      assert(collect(df.queryExecution.executedPlan) { case s: SpillwaySortExec => s }.size == (if (enabled) 1 else 0))
      drainPool()
      val marked = DirectBufferPool.take(DirectBufferPool.MinBytes)
      val markedAt = DirectBufferPool.address(marked)
      DirectBufferPool.give(marked)
      withLocalProperty(Budget, "64k")(df.queryExecution.toRdd.mapPartitions { rows =>
        var first: InternalRow = null
        var last: InternalRow = null
        val addresses = mutable.ArrayBuffer[Long]() // where the rows' bytes were while they pointed into an output buffer
        var lastValue: UTF8String = null // read without a copy, as generated code does
        while (rows.hasNext) {
          last = rows.next()
          if (first == null) first = last
          val unsafe = last.asInstanceOf[UnsafeRow]
          if (unsafe.getBaseObject == null) addresses += unsafe.getBaseOffset
          lastValue = last.getUTF8String(1)
        }
        val pooled = DirectBufferPool.pooledBytes
        val buffers = drainPool()
        val overwritten = addresses.lastOption.exists(at => buffers.exists(holds(_, at)))
        val outputs = buffers.filter(b => addresses.exists(holds(b, _)))
        // Both output buffers, and nothing else, are in the pool.
        val outputsPooled = outputs.size == 2 && addresses.forall(at => outputs.exists(holds(_, at))) &&
          pooled == outputs.map(_.capacity.toLong).sum
        // The input batch was the marked buffer, given back after the last add and taken by the output.
        val outputInBatch = addresses.headOption.exists(at => at >= markedAt && at < markedAt + DirectBufferPool.MinBytes)
        buffers.foreach { b =>
          (0 until b.capacity()).foreach(i => b.put(i, 0xa5.toByte))
          DirectBufferPool.give(b)
        }
        if (enabled) assert(first eq last, "the native sort returns one reused row")
        val onHeap = last.asInstanceOf[UnsafeRow].getBaseObject != null
        Iterator(LastRowSeen(last.getLong(0), lastValue.toString, overwritten, onHeap, outputsPooled, outputInBatch,
          buffers.map(b => (DirectBufferPool.address(b), b.capacity()))))
      }.collect().head)
    }
    val off = lastRow(enabled = false)
    val on = lastRow(enabled = true)
    assert(on.lastOutputPooled, "the last output buffer was not in the pool once the output was exhausted")
    assert(on.lastRowOnHeap, "the last row was not returned as an on-heap copy")
    // The row and the string read from it without a copy survived their buffers' reuse.
    assert((on.k, on.s) == (off.k, off.s))
    assert(off.k == 0 && off.s == "999199919991", off) // k descending, then s: 9991 = 97 × 103
    assert(on.outputsPooled, "the sort did not give its two output buffers back to the pool")
    // The pool held only the marked buffer: the input batch was taken from it, and the output
    // took the input batch given back after the last add.
    assert(on.outputInBatch, "the output's first buffer was not the input batch, taken from the pool")
    // Run again, the sort takes its buffers, overwritten above, from the pool, and returns the
    // right rows: every row points into one of them.
    val overwritten = on.givenBack
    val (again, fromPool) = withConfs(Enabled -> "true") {
      withLocalProperty(Budget, "64k")(sortedWithinPartitions(1).queryExecution.toRdd.mapPartitions { rows =>
        var fromPool = true
        val seen = rows.map { r =>
          val unsafe = r.asInstanceOf[UnsafeRow]
          if (unsafe.getBaseObject == null) {
            val at = unsafe.getBaseOffset
            fromPool &&= overwritten.exists { case (address, capacity) => at >= address && at < address + capacity }
          }
          (r.getLong(0), r.getUTF8String(1).toString)
        }.toVector
        Iterator((seen, fromPool))
      }.collect().head)
    }
    assert(fromPool, "the sort's output buffers were not the pool's")
    assert(again == (0L until 12000L).map(id => (id % 97, id.toString * 3)).sortBy { case (k, s) => (-k, s) })
    assertNothingLeft()
  }

  test("a sort read only partly (LIMIT, a failure downstream) gives no output buffer back; later sorts are correct") {
    // Each sort starts on an empty pool: its input batch goes back to the pool once every batch was
    // added and the output's first buffer takes it again, so the pool stays empty unless the sort
    // gives its output buffers back.
    drainPool()
    // CollectLimit reads 10 rows of the first partition's sort: Spark's rows, natively sorted.
    val limited = compare(Seq("k", "s"), Budget -> "64k")(sortedWithinPartitions(3).limit(10))
    assert(limited.rows.size == 10)
    assert(DirectBufferPool.pooledBytes == 0, "a sort not read to the end gave its buffers back")
    // A downstream operator fails after 1,000 rows of the only partition's sort.
    val failing = udf { (k: Long, n: Long) =>
      if (n == 1000) throw new IllegalStateException("downstream failure")
      k
    }
    drainPool()
    val e = intercept[Exception](withConfs(Enabled -> "true", Budget -> "64k") {
      val df = sortedWithinPartitions(1).withColumn("n", monotonically_increasing_id()).select(failing(col("k"), col("n")))
      assert(collect(df.queryExecution.executedPlan) { case s: SpillwaySortExec => s }.size == 1)
      df.collect()
    })
    assert(TestFiles.causeChain(e).exists(_.getMessage.contains("downstream failure")), e)
    assert(DirectBufferPool.pooledBytes == 0, "a failed sort gave its buffers back")
    assertNothingLeft()
    // The pool is whole: full sorts, two tasks at once, taking its buffers, return Spark's rows
    // and give their buffers back.
    drainPool()
    compare(Seq("k", "s"), Budget -> "64k")(sortedWithinPartitions(3))
    assert(DirectBufferPool.pooledBytes >= 2L * DirectBufferPool.MinBytes, "the sorts read to the end gave no buffer back")
    // Each of them gives its output buffers back: one after another in one task (coalesce), the
    // next sort takes them, so the rows of all three point into the same two buffers, which are in
    // the pool at the end.
    drainPool()
    val (rows, sameTwo) = withConfs(Enabled -> "true") {
      val df = sortedWithinPartitions(3).coalesce(1)
      assert(collect(df.queryExecution.executedPlan) { case s: SpillwaySortExec => s }.size == 1)
      withLocalProperty(Budget, "64k")(df.queryExecution.toRdd.mapPartitions { rows =>
        val addresses = mutable.ArrayBuffer[Long]()
        var n = 0
        rows.foreach { r =>
          val unsafe = r.asInstanceOf[UnsafeRow]
          if (unsafe.getBaseObject == null) addresses += unsafe.getBaseOffset
          n += 1
        }
        val outputs = drainPool().filter(b => addresses.exists(holds(b, _)))
        Iterator((n, outputs.size == 2 && addresses.forall(at => outputs.exists(holds(_, at)))))
      }.collect().head)
    }
    assert(rows == 12000)
    assert(sameTwo, "a sort read to the end did not give its output buffers back for the next one")
    assertNothingLeft()
  }

  test("groupByKey/mapGroups: GroupedIterator reads the last row after hasNext() is false; the same groups") {
    val session = spark
    import session.implicits._
    compare(Seq.empty, Budget -> "64k") {
      spark.range(0, 12000, 1, 3).as[Long].groupByKey(_ % 97)
        .mapGroups((k, ids) => (k, ids.toSeq.sorted.takeRight(3).mkString(","))).toDF("k", "last")
    }
  }

  test("without adaptive execution too (the pre-columnar rule alone)") {
    val on = compare(Seq("dec18", "tsntz"), "spark.sql.adaptive.enabled" -> "false", Budget -> "64k")(
      spark.sql("SELECT * FROM t ORDER BY dec18 DESC NULLS LAST, tsntz"))
    assert(!on.plan.isInstanceOf[AdaptiveSparkPlanExec])
    assert(on.metric("runsSpilled") > 0)
  }

  test("sortWithinPartitions: each partition in Spark's order, spilling") {
    val on = compare(Seq("i", "str", "f"), Budget -> "64k")(
      spark.table("t").sortWithinPartitions(col("i").desc_nulls_last, col("str"), col("f").asc_nulls_last))
    assert(on.metric("runsSpilled") > 0)
  }

  test("a sort-merge join: both sides sorted natively inside adaptive stages, spilling; the same rows") {
    val on = compare(Seq.empty, "spark.sql.autoBroadcastJoinThreshold" -> "-1", Budget -> "64k")(spark.sql(
      "SELECT a.id, a.str, a.dec38, b.d, b.bin FROM t a JOIN t b ON a.id = b.id AND a.str = b.str"))
    assert(on.nativeSorts.size == 2)
    assert(on.plan.toString.contains("SortMergeJoin"))
    assert(on.metric("runsSpilled") > 0)
  }

  test("adaptive skew-join handling still splits a skewed sort-merge join") {
    // Spark's own skew test setup: a quarter of each side's keys on one value. The rule runs after
    // OptimizeSkewedJoin among the stage preparation rules, so the join must still be split.
    val skewConfs = Seq("spark.sql.autoBroadcastJoinThreshold" -> "-1",
      "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes" -> "100",
      "spark.sql.adaptive.advisoryPartitionSizeInBytes" -> "100",
      "spark.sql.adaptive.coalescePartitions.minPartitionNum" -> "1",
      "spark.sql.shuffle.partitions" -> "100")
    def skewed(): DataFrame = {
      val left = spark.range(0, 1000, 1, 10).selectExpr("CASE WHEN id < 250 THEN 249 WHEN id >= 750 THEN 1000 ELSE id END AS key1", "id AS value1")
      val right = spark.range(0, 1000, 1, 10).selectExpr("CASE WHEN id < 250 THEN 249 ELSE id END AS key2", "id AS value2")
      left.join(right, col("key1") === col("key2"))
    }
    def skewJoins(run: Run): Int = collect(run.plan) { case j: SortMergeJoinExec if j.isSkewJoin => j }.size
    val off = run(enabled = false, skewConfs: _*)(skewed())
    val on = compare(Seq.empty, skewConfs: _*)(skewed())
    assert(skewJoins(off) == 1, off.plan.toString)
    assert(skewJoins(on) == 1, on.plan.toString)
  }

  test("the native node is a SortExec: tests and rules that count sorts see as many with the extension as without") {
    // As Spark's own PlannerSuite and JoinSuite count a sort-merge join's sorts.
    def sortsOf(run: Run): Seq[SortExec] = collect(run.plan) { case s: SortExec => s }
    val query = "SELECT a.id, b.str FROM t a JOIN t b ON a.id = b.id ORDER BY a.id DESC"
    val off = run(enabled = false, "spark.sql.autoBroadcastJoinThreshold" -> "-1")(spark.sql(query))
    val on = compare(Seq.empty, "spark.sql.autoBroadcastJoinThreshold" -> "-1")(spark.sql(query))
    assert(sortsOf(off).size == 3 && sortsOf(off).forall(!_.isInstanceOf[SpillwaySortExec]), off.plan.toString)
    assert(sortsOf(on).size == 3 && sortsOf(on).forall(_.isInstanceOf[SpillwaySortExec]), on.plan.toString)
    // SortExec's extractor, as rules match sorts, reads the native node's fields.
    val native = on.nativeSorts.head
    (native: SortExec) match {
      case SortExec(order, global, child, _) => assert(order == native.sortOrder && global == native.global && (child eq native.child))
    }
    // Copies made the ways Spark's rules make them stay native; a SortExec with the same fields is another node.
    assert(native.withNewChildren(Seq(native.child)).isInstanceOf[SpillwaySortExec])
    assert(native.makeCopy(native.productIterator.map(_.asInstanceOf[AnyRef]).toArray).isInstanceOf[SpillwaySortExec])
    val sparks = SortExec(native.sortOrder, native.global, native.child)
    assert(native != sparks && sparks != native && native == SpillwaySortExec(native.sortOrder, native.global, native.child))
    // No whole-stage code generation of Spark's sorter around it.
    assert(!native.supportCodegen)
    assert(on.plan.toString.contains("SpillwaySort"), on.plan.toString)
  }

  test("window functions: the same ranks and running sums") {
    val on = compare(Seq.empty, Budget -> "64k")(spark.sql(
      """SELECT id,
        |  rank() OVER (PARTITION BY b ORDER BY d DESC NULLS LAST, str) AS r,
        |  sum(i) OVER (PARTITION BY y ORDER BY dec38 NULLS LAST) AS s
        |FROM t""".stripMargin))
    assert(on.nativeSorts.size >= 2)
    assert(on.metric("runsSpilled") > 0)
  }

  test("a partitioned write: the write's sort runs natively; the files hold the same rows") {
    val captured = new AtomicReference[QueryExecution]()
    val listener = new QueryExecutionListener {
      override def onSuccess(funcName: String, qe: QueryExecution, durationNs: Long): Unit =
        if (funcName != "collect") captured.set(qe)
      override def onFailure(funcName: String, qe: QueryExecution, exception: Exception): Unit = ()
    }
    val out = Files.createTempDirectory(base, "write-")
    spark.listenerManager.register(listener)
    try {
      def write(enabled: Boolean): (Seq[Row], SparkPlan) = withConfs(Enabled -> enabled.toString, Budget -> "64k") {
        captured.set(null)
        val path = out.resolve(s"enabled-$enabled").toString
        spark.table("t").select("id", "b", "str", "d", "dec38").write.partitionBy("b").parquet(path)
        ListenerBusProbe.drain(sc) // listeners are called asynchronously
        assert(captured.get != null, "the write's plan was not reported")
        (spark.read.parquet(path).collect().toSeq, captured.get.executedPlan)
      }
      val (offRows, offPlan) = write(enabled = false)
      val (onRows, onPlan) = write(enabled = true)
      assert(collect(offPlan) { case s: SortExec => s }.nonEmpty, offPlan.toString)
      assert(collect(onPlan) { case s: SortExec if !s.isInstanceOf[SpillwaySortExec] => s }.isEmpty, onPlan.toString)
      assert(collect(onPlan) { case s: SpillwaySortExec => s }.nonEmpty, onPlan.toString)
      assert(onRows.size == 12000 && multiset(onRows) == multiset(offRows))
      assertNothingLeft()
    } finally {
      spark.listenerManager.unregister(listener)
      TestFiles.deleteRecursively(out)
    }
  }

  test("unsupported keys fall back to Spark's sort, with a log line and a plan tag naming the sort and the reason") {
    val lines = capturingLog {
      val arrays = run(enabled = true)(spark.sql("SELECT * FROM t ORDER BY i, arr DESC"))
      assert(arrays.nativeSorts.isEmpty && arrays.sparkSorts == 1, arrays.plan.toString)
      assert(SpillwaySortRule.fallbacks(arrays.plan) ==
        Seq("t.i ASC NULLS FIRST, t.arr DESC NULLS LAST" -> "key t.arr: nested type array<int> (only atomic types are encoded)"))
      // A sort inside a subquery is found too; a sort the native sort runs is no fallback.
      val inSubquery = run(enabled = true)(spark.sql(
        "SELECT (SELECT max(r) FROM (SELECT rank() OVER (ORDER BY arr) AS r FROM t)) AS m, str FROM t ORDER BY str"))
      assert(inSubquery.nativeSorts.size == 1, inSubquery.plan.toString)
      val inSubqueryKeys = SpillwaySortRule.fallbacks(inSubquery.plan).map(_._1)
      assert(inSubqueryKeys.size == 1 && inSubqueryKeys.head.endsWith("arr ASC NULLS FIRST"), s"$inSubqueryKeys\n${inSubquery.plan}")
      // Switched off, nothing is a fallback: Spark's sort runs by choice.
      assert(SpillwaySortRule.fallbacks(run(enabled = false)(spark.sql("SELECT * FROM t ORDER BY i, arr DESC")).plan).isEmpty)
      val off = run(enabled = false)(spark.sql("SELECT * FROM t ORDER BY i, arr DESC"))
      assert(arrays.rows.map(_.get(0)) == off.rows.map(_.get(0)))
    }
    assert(lines.exists(l => l.contains("arr DESC") && l.contains("array<int>")), lines.mkString("\n"))
    assertNothingLeft()
  }

  test("a spark.spillway.* typo set in the session is warned once by the rule, with the closest key") {
    val typo = "spark.spillway.sort.memoryBudgett"
    spark.conf.set(typo, "1m")
    try {
      val lines = capturingLog {
        for (_ <- 1 to 3) run(enabled = true)(spark.sql("SELECT * FROM t ORDER BY i"))
      }.filter(_.contains(typo))
      assert(lines.size == 1 && lines.head.startsWith(s"Spillway: $typo is not a Spillway setting and is ignored; " +
        s"did you mean $Budget?"), lines)
    } finally spark.conf.unset(typo)
  }

  // TIME came with Spark 4.1, behind spark.sql.timeType.enabled there.
  if (SparkLineTestTypes.time.isDefined) {
    test("TIME keys in each direction and null ordering, spilling: the native sort, Spark's order") {
      val times = "SELECT CASE WHEN id % 11 = 0 THEN NULL ELSE make_time(CAST(id * 7 % 24 AS INT), " +
        "CAST(id * 13 % 60 AS INT), CAST(id * 17 % 60 AS DECIMAL(16, 6)) + CAST(id % 1000 AS DECIMAL(16, 6)) / 1000000) END AS tm, " +
        "id FROM range(0, 20000, 1, 3)"
      for (order <- orderings) withClue(s"ORDER BY tm $order: ") {
        val on = compare(Seq("tm"), "spark.sql.timeType.enabled" -> "true", Budget -> "64k")(
          spark.sql(s"SELECT * FROM ($times) ORDER BY tm $order"))
        assert(on.rows.head.schema("tm").dataType == SparkLineTestTypes.time.get)
        assert(on.metric("runsSpilled") > 0, "the sort did not spill")
      }
    }
  }

  // Collations came with Spark 4.0 (COLLATE does not parse on 3.5, where every string sorts by its bytes).
  if (SparkLineTestTypes.collated("UTF8_LCASE").isDefined) {
    test("strings under a collation fall back to Spark's sort, naming the collation; Spark's order") {
      val lines = capturingLog {
        val collated = run(enabled = true)(spark.sql("SELECT * FROM t ORDER BY str COLLATE UTF8_LCASE, id"))
        assert(collated.nativeSorts.isEmpty && collated.sparkSorts == 1, collated.plan.toString)
        val collatedReasons = SpillwaySortRule.fallbacks(collated.plan).map(_._2)
        assert(collatedReasons.size == 1 && collatedReasons.head.endsWith("strings under collation UTF8_LCASE do not sort by their bytes"),
          collatedReasons)
        val off = run(enabled = false)(spark.sql("SELECT * FROM t ORDER BY str COLLATE UTF8_LCASE, id"))
        assert(collated.rows.map(_.get(0)) == off.rows.map(_.get(0)))
      }
      assert(lines.exists(l => l.contains("UTF8_LCASE")), lines.mkString("\n"))
      assertNothingLeft()
    }
  }

  test("spark.spillway.sql.sort.enabled: off leaves the plan untouched; a bad value names the key") {
    val off = run(enabled = false)(spark.sql("SELECT * FROM t ORDER BY l"))
    assert(off.nativeSorts.isEmpty && off.sparkSorts == 1)
    val e = intercept[Exception](withConfs(Enabled -> "yes")(spark.sql("SELECT * FROM t ORDER BY l").collect()))
    val messages = TestFiles.causeChain(e).map(_.getMessage).mkString("\n")
    assert(messages.contains(s"Invalid value 'yes' for $Enabled: expected true or false"), messages)
  }

  /** Runs `body` with the rule's logger at INFO into a capturing appender; the lines logged. */
  private def capturingLog(body: => Unit): Seq[String] = {
    val logger = LogManager.getLogger(classOf[SpillwaySortRule]).asInstanceOf[CoreLogger]
    val lines = new ConcurrentLinkedQueue[String]()
    val appender = new AbstractAppender("spillway-test-capture", null, null, true, Property.EMPTY_ARRAY) {
      override def append(event: LogEvent): Unit = lines.add(event.getMessage.getFormattedMessage)
    }
    appender.start()
    val level = logger.getLevel
    logger.addAppender(appender)
    logger.setLevel(Level.INFO)
    try body
    finally {
      logger.removeAppender(appender)
      logger.setLevel(level)
      appender.stop()
    }
    lines.asScala.toSeq
  }
}

object SpillwaySortSqlSuite {
  /**
   * What the task of the last-row test saw: the last row's values, whether the last output buffer,
   * and both output buffers and nothing else, were in the pool once the output was exhausted,
   * whether the last row was an on-heap copy, whether the output's first buffer was the input
   * batch, and the (address, capacity) of the buffers it overwrote and gave back to the pool.
   */
  final case class LastRowSeen(k: Long, s: String, lastOutputPooled: Boolean, lastRowOnHeap: Boolean, outputsPooled: Boolean,
      outputInBatch: Boolean, givenBack: Seq[(Long, Int)])

  /** Whether `address` is in `buffer`. */
  def holds(buffer: java.nio.ByteBuffer, address: Long): Boolean = {
    val start = DirectBufferPool.address(buffer)
    address >= start && address < start + buffer.capacity()
  }

  /** Takes every buffer the pool holds (and fresh ones of the sizes it lacks): it is then empty. */
  def drainPool(): Seq[java.nio.ByteBuffer] =
    Iterator.iterate(DirectBufferPool.MinBytes)(_ * 2).takeWhile(_ <= DirectBufferPool.MaxBytes).toVector
      .flatMap(size => Seq.fill(DirectBufferPool.SlotsPerSize)(DirectBufferPool.take(size)))

  val sortableColumns: Seq[String] =
    Seq("b", "y", "s", "i", "l", "f", "d", "dec9", "dec18", "dec38", "str", "bin", "dt", "ts", "tsntz", "ym", "dti")

  val schema: StructType = new StructType()
    .add("id", LongType, nullable = false)
    .add("b", BooleanType).add("y", ByteType).add("s", ShortType).add("i", IntegerType).add("l", LongType)
    .add("f", FloatType).add("d", DoubleType)
    .add("dec9", DecimalType(9, 2)).add("dec18", DecimalType(18, 4)).add("dec38", DecimalType(38, 10))
    .add("str", StringType).add("bin", BinaryType)
    .add("dt", DateType).add("ts", TimestampType).add("tsntz", TimestampNTZType)
    .add("ym", YearMonthIntervalType()).add("dti", DayTimeIntervalType())
    .add("arr", ArrayType(IntegerType))

  def canon(v: Any, normaliseZero: Boolean): String = v match {
    case null => "null"
    case b: Array[Byte] => b.map(x => f"${x & 0xff}%02x").mkString("0x", "", "")
    case d: Double if normaliseZero && d == 0.0d => "0.0"
    case f: Float if normaliseZero && f == 0.0f => "0.0"
    case s: scala.collection.Seq[_] => s.map(canon(_, normaliseZero)).mkString("[", ",", "]")
    case other => other.toString
  }

  def multiset(rows: Seq[Row]): Map[String, Int] =
    rows.groupBy(r => r.toSeq.map(canon(_, normaliseZero = false)).mkString("|")).map { case (k, v) => k -> v.size }

  /**
   * Rows with every supported type: a tenth null, two fifths from a few special values (extremes,
   * NaN, ±0.0, ±Inf, empty and non-ASCII strings, long strings sharing prefixes, dates and times
   * before 1970) so that keys tie often, the rest random.
   */
  def randomRows(n: Int, seed: Long): Seq[Row] = {
    val r = new Random(seed)
    def pick[T](specials: Seq[T], random: => T): Any = {
      val x = r.nextDouble()
      if (x < 0.1) null else if (x < 0.5) specials(r.nextInt(specials.size)) else random
    }
    def decimal(precision: Int, scale: Int): JBigDecimal = {
      val digits = 1 + r.nextInt(precision)
      val unscaled = BigInt(r.nextLong()).abs * BigInt(r.nextLong()).abs * BigInt(r.nextLong()).abs % BigInt(10).pow(digits)
      new JBigDecimal((if (r.nextBoolean()) -unscaled else unscaled).bigInteger, scale)
    }
    def maxDecimal(precision: Int, scale: Int, sign: Int): JBigDecimal =
      new JBigDecimal(BigInt(10).pow(precision).-(1).*(sign).bigInteger, scale)
    val prefix = "spillway-" * 20
    val strings = Seq("", "a", "a\u0000", "ab", "é", "日本語", "\ud83d\ude00", "\ud83d\ude00\ud83d\ude01", prefix, prefix + "a", prefix + "\u0000")
    val alphabet = "ab\u0000é日\ud83d\ude00".codePoints().toArray
    def randomString(): String = {
      val sb = new java.lang.StringBuilder(if (r.nextBoolean()) prefix else "")
      (0 until r.nextInt(6)).foreach(_ => sb.appendCodePoint(alphabet(r.nextInt(alphabet.length))))
      sb.toString
    }
    val minSecond = -62135596800L // 0001-01-01
    val maxSecond = 253402300799L // 9999-12-31 23:59:59
    def second(): Long = minSecond + (r.nextDouble() * (maxSecond - minSecond)).toLong
    (0 until n).map { id =>
      Row(
        id.toLong,
        pick(Seq(true, false), r.nextBoolean()),
        pick(Seq(Byte.MinValue, Byte.MaxValue, 0.toByte, -1.toByte), r.nextInt(256).toByte),
        pick(Seq(Short.MinValue, Short.MaxValue, 0.toShort), r.nextInt(65536).toShort),
        pick(Seq(Int.MinValue, Int.MaxValue, 0, -1, 1), r.nextInt()),
        pick(Seq(Long.MinValue, Long.MaxValue, 0L, -1L), r.nextLong()),
        pick(Seq(Float.NaN, Float.PositiveInfinity, Float.NegativeInfinity, 0.0f, -0.0f, Float.MaxValue, Float.MinValue, Float.MinPositiveValue),
          (r.nextGaussian() * 1000).toFloat),
        pick(Seq(Double.NaN, Double.PositiveInfinity, Double.NegativeInfinity, 0.0d, -0.0d, Double.MaxValue, Double.MinValue, Double.MinPositiveValue),
          r.nextGaussian() * math.pow(10, r.nextInt(40) - 20)),
        pick(Seq(maxDecimal(9, 2, 1), maxDecimal(9, 2, -1), new JBigDecimal("0.00")), decimal(9, 2)),
        pick(Seq(maxDecimal(18, 4, 1), maxDecimal(18, 4, -1), new JBigDecimal("0.0000")), decimal(18, 4)),
        pick(Seq(maxDecimal(38, 10, 1), maxDecimal(38, 10, -1), new JBigDecimal("0E-10"), new JBigDecimal("-0.0000000001")), decimal(38, 10)),
        pick(strings, randomString()),
        pick(Seq(Array.emptyByteArray, Array[Byte](0), Array[Byte](0, 0), Array[Byte](-1), prefix.getBytes("UTF-8")),
          Array.fill(r.nextInt(5))(Seq[Byte](0, 1, -1, 127, -128)(r.nextInt(5)))),
        pick(Seq(LocalDate.of(1, 1, 1), LocalDate.of(9999, 12, 31), LocalDate.of(1969, 12, 31), LocalDate.of(1970, 1, 1)),
          LocalDate.ofEpochDay(-719162L + r.nextInt(2932896 + 719162))),
        pick(Seq(Instant.ofEpochSecond(minSecond), Instant.ofEpochSecond(maxSecond, 999999000), Instant.ofEpochSecond(-1, 999999000), Instant.EPOCH),
          Instant.ofEpochSecond(second(), r.nextInt(1000000) * 1000L)),
        pick(Seq(LocalDateTime.of(1, 1, 1, 0, 0), LocalDateTime.of(1969, 12, 31, 23, 59, 59, 999999000)),
          LocalDateTime.ofEpochSecond(second(), r.nextInt(1000000) * 1000, ZoneOffset.UTC)),
        pick(Seq(Period.ofMonths(0), Period.ofMonths(-1), Period.ofMonths(Int.MaxValue), Period.ofMonths(Int.MinValue + 1)),
          Period.ofMonths(r.nextInt(2000000) - 1000000)),
        pick(Seq(Duration.ZERO, Duration.ofNanos(-1000), Duration.ofDays(106751990), Duration.ofDays(-106751990)),
          Duration.ofSeconds(r.nextInt(2000000000) - 1000000000L, r.nextInt(1000000) * 1000L)),
        pick(Seq(Seq.empty[Int], Seq(1, 2), Seq(-1)), Seq.fill(r.nextInt(3))(r.nextInt(10)))
      )
    }
  }
}
