package spillway.bench

import java.nio.file.{Files, Path, Paths}

import scala.util.control.NonFatal

import org.apache.spark.spillway.ListenerBusProbe
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.functions.expr
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanHelper

import spillway.TestFiles
import spillway.bench.BenchSupport._
import spillway.sql.SpillwaySortRule

/**
 * The SQL sort per row shape, four ways on the same TPC-H data and the same off-heap memory:
 * Spark's `SortExec`, Spillway's native sort, Apache DataFusion Comet 1.2.0's `CometSort` (Comet
 * alone), and Comet with Spillway (Spillway takes the sorts Comet leaves to Spark). Not a test: it
 * prints the sorting stage's wall time, its task CPU and the process's CPU over it, what the sorts
 * spilled (the memory the spilled records took, or Comet's bytes) and the bytes their spill files
 * took on disk, medians with their range, and the ratios.
 *
 * Every round also runs each shape with no sort at all ("no sort: shuffle only"): the same query
 * with its ORDER BY turned into a range repartitioning on the same keys, so its last stage reads
 * the same shuffle and counts the same rows, and sorts nothing. That stage is the floor under any
 * sort fed by Spark's row shuffle: Spark's stage over it is the most that a sort costing nothing
 * could gain over Spark's, and the report gives it beside the engines' ratios. The same in a Comet
 * session ("no sort: Comet's shuffle only") is the floor under Comet's sort.
 *
 * Usage: `project/sbt "Test/runMain spillway.bench.SortShapesBench scaleFactor offHeap rounds [dataDir [shapes [engines [orders]]]]"`,
 * default "1 256m 3": local[2], `spark.memory.offHeap.size=offHeap` in every session (Spark's sort
 * takes its pages from it, Spillway its grant, Comet its pool), 8 shuffle partitions. Each round
 * (a warm-up round comes first and is not counted) runs every shape in a Spillway session (rule off:
 * Spark; on: Spillway) and a Comet session (rule off: Comet alone; on: both), the sessions' order and
 * the on/off order alternating between rounds. `shapes` picks some by name (`wide,strings`);
 * `engines` picks some by key (`floor,spark,spillway`; keys: floor, spark, spillway, comet-floor, comet,
 * comet+spillway, comet-sort-off), and `all` adds to the default ones a last way: Comet with its
 * own sort off (`spark.comet.exec.sort.enabled=false`), so that Spillway takes every sort under
 * Comet's scan and shuffle. Needs Comet's jar on the classpath (the 4.1 line's test classpath has
 * it) for the Comet ways. `orders` picks the sort's input orders by key (`dbgen`, the default;
 * `random`, `generated`, `sorted`, `reverse`, `few`; see [[Order]]): every shape runs on each.
 */
object SortShapesBench extends AdaptiveSparkPlanHelper {
  /**
   * A query whose last stage sorts. `inputKeys` is its ORDER BY over lineitem's own columns (the
   * sort's keys before the query's projection): the order of the `sorted` and `reverse` inputs.
   */
  final case class Shape(name: String, sql: String, about: String, inputKeys: String)

  val Shapes: Seq[Shape] = Seq(
    Shape("wide", "SELECT * FROM lineitem ORDER BY l_partkey, l_suppkey DESC, l_orderkey, l_linenumber",
      "all 16 columns of lineitem (strings, decimals, dates), four keys", "l_partkey, l_suppkey DESC, l_orderkey, l_linenumber"),
    Shape("narrow", "SELECT l_orderkey, l_quantity FROM lineitem ORDER BY l_orderkey",
      "two columns, one long key (the sort Q18's join does)", "l_orderkey"),
    Shape("nulls", "SELECT k, l_quantity FROM (SELECT IF(l_suppkey % 100 = 0, NULL, l_orderkey) AS k, l_quantity FROM lineitem) ORDER BY k",
      "narrow rows, the long key 1% null (as an outer join's key may be)", "IF(l_suppkey % 100 = 0, NULL, l_orderkey)"),
    Shape("strings", "SELECT l_comment, l_shipinstruct, l_orderkey FROM lineitem ORDER BY l_comment, l_shipinstruct",
      "string keys (l_comment: 10-43 chars)", "l_comment, l_shipinstruct"),
    Shape("two-key", "SELECT * FROM lineitem ORDER BY l_shipdate, l_extendedprice",
      "all 16 columns, a date and a decimal key", "l_shipdate, l_extendedprice"),
    Shape("interval", "SELECT make_dt_interval(0, l_linenumber, cast(l_orderkey % 60 AS int), 0) AS k FROM lineitem ORDER BY k DESC",
      "a day-time interval key, which Comet 1.2.0 leaves to Spark's sort",
      "make_dt_interval(0, l_linenumber, cast(l_orderkey % 60 AS int), 0) DESC"))

  /**
   * The order lineitem's rows come in, the sort's input: the table is rewritten so (once, kept
   * under the data dir's `sort-inputs/`, beside TPC-H's tables), and each shape's query reads it
   * as `lineitem`. The sort reads its input through a range shuffle, so a stage's task gets the
   * rows of every map task in turn: input sorted its way comes as one sorted stretch per map task.
   */
  sealed abstract class Order(val key: String, val about: String)
  /** As dbgen writes lineitem: by order key, each order's lines together. */
  case object Dbgen extends Order("dbgen", "as dbgen writes them (by l_orderkey)")
  /** Rows in random order: every column's values come in no particular order. */
  case object RandomOrder extends Order("random", "rows in random order (every column in no particular order)")
  /** Sorted by the shape's own keys. */
  case object Sorted extends Order("sorted", "already sorted by the shape's keys")
  /** Sorted by the shape's keys the other way round. */
  case object Reverse extends Order("reverse", "sorted by the shape's keys in reverse")
  /**
   * lineitem's columns generated anew, each from its own hash of the row's number within TPC-H's
   * ranges (the comments of words drawn by hashes from dbgen's): every column in no particular
   * order, and no two columns related, unlike dbgen's rows in any order (see [[generated]]).
   */
  case object Generated extends Order("generated", "generated from hashes, each column on its own (TPC-H's ranges)")
  /** Every key column of every shape cut to at most FewKeys values, rows in random order. */
  case object Few extends Order("few", s"few distinct keys (at most $FewKeys values per key column), in random order")
  val Orders: Seq[Order] = Seq(Dbgen, RandomOrder, Generated, Sorted, Reverse, Few)
  val FewKeys = 8

  /** `cometSort`: Comet's own sort on (`spark.comet.exec.sort.enabled`), in a Comet session. */
  sealed abstract class Engine(val key: String, val name: String, val comet: Boolean, val spillway: Boolean,
      val cometSort: Boolean = true, val sorts: Boolean = true)
  /** The floor: the sort's shuffle and every row counted, no sort (see [[withoutSort]]). */
  case object NoSort extends Engine("floor", "no sort: shuffle only", comet = false, spillway = false, sorts = false)
  /** The floor under Comet: its scan and columnar shuffle, no sort. */
  case object CometNoSort extends Engine("comet-floor", "no sort: Comet's shuffle only", comet = true, spillway = false,
    sorts = false)
  case object SparkSort extends Engine("spark", "Spark", comet = false, spillway = false)
  case object SpillwaySort extends Engine("spillway", "Spillway", comet = false, spillway = true)
  case object CometAlone extends Engine("comet", "Comet", comet = true, spillway = false)
  case object CometSpillway extends Engine("comet+spillway", "Comet+Spillway", comet = true, spillway = true)
  /** Comet's scan and shuffle, its sort off: every sort is Spark's and Spillway takes it. */
  case object CometScanSpillwaySort extends Engine("comet-sort-off", "Comet, sort off, +Spillway", comet = true, spillway = true,
    cometSort = false)
  val Engines: Seq[Engine] = Seq(NoSort, SparkSort, SpillwaySort, CometNoSort, CometAlone, CometSpillway, CometScanSpillwaySort)
  /** The engines a round runs unless told otherwise: the last one only when asked for (`all`, or by key). */
  val DefaultEngines: Seq[Engine] = Engines.init

  /** One run; `failed` holds why the query failed (its stage times and spills are then not counted). */
  final case class Run(shape: Shape, order: Order, engine: Engine, round: Int, seconds: Double, stage: StageTime, spilledBytes: Long,
      onDiskBytes: Long, rows: Long, sorts: Seq[String], failed: Option[String] = None)

  def main(args: Array[String]): Unit = {
    val scaleFactor = args.lift(0).map(_.toDouble).getOrElse(1.0)
    val offHeap = args.lift(1).getOrElse("256m")
    val rounds = args.lift(2).map(_.toInt).getOrElse(3)
    val sfName = BigDecimal(scaleFactor).bigDecimal.stripTrailingZeros.toPlainString
    val data = Paths.get(args.lift(3).filter(_.nonEmpty).getOrElse(s"build/tpch-sf$sfName")).toAbsolutePath
    val picked = args.lift(4).filter(_.nonEmpty).map(_.split(",").toSet)
    val shapes = picked.fold(Shapes)(p => Shapes.filter(s => p(s.name)))
    // "all" adds Comet with its sort off and Spillway's in its place; keys pick engines.
    val engines = args.lift(5).filter(_.nonEmpty) match {
      case None => DefaultEngines
      case Some("all") => Engines
      case Some(keys) =>
        val picked = keys.split(",").map(_.trim).toSet
        val unknown = picked -- Engines.map(_.key)
        require(unknown.isEmpty, s"unknown engines ${unknown.mkString(", ")}: pick among ${Engines.map(_.key).mkString(", ")}, or all")
        Engines.filter(e => picked(e.key))
    }
    val orders = args.lift(6).filter(_.nonEmpty).fold(Seq[Order](Dbgen)) { keys =>
      val picked = keys.split(",").map(_.trim).toSet
      val unknown = picked -- Orders.map(_.key)
      require(unknown.isEmpty, s"unknown orders ${unknown.mkString(", ")}: pick among ${Orders.map(_.key).mkString(", ")}")
      Orders.filter(o => picked(o.key))
    }
    val local = Files.createTempDirectory("spillway-shapes-bench-")
    try {
      tables(local, scaleFactor, sfName, data)
      inputs(local, data, shapes, orders)
      val memory = Seq("spark.memory.offHeap.enabled" -> "true", "spark.memory.offHeap.size" -> offHeap,
        "spark.sql.shuffle.partitions" -> "8")
      val runs = (0 to rounds).flatMap { round =>
        val kinds = if (round % 2 == 0) Seq(false, true) else Seq(true, false) // Comet's session second, then first
        kinds.flatMap { comet =>
          val confs = (if (comet) cometConfs else spillwayConfs) ++ memory
          withSession(s"SortShapesBench-${if (comet) "comet" else "spark"}", local, data, confs) { spark =>
            for (shape <- shapes; order <- orders; engine <- {
              val mine = engines.filter(_.comet == comet)
              if (round % 2 == 0) mine.reverse else mine
            }) yield {
              spark.read.parquet(input(data, shape, order).toString).createOrReplaceTempView("lineitem")
              once(spark, shape, order, engine, round)
            }
          }
        }
      }
      report(sfName, offHeap, rounds, shapes, orders, runs.filter(_.round > 0))
    } finally TestFiles.deleteRecursively(local)
  }

  /** One run of `shape` by `engine`; a query that fails (an engine out of memory, say) is a failed run, not the end of the bench. */
  private def once(spark: SparkSession, shape: Shape, order: Order, engine: Engine, round: Int): Run =
    try measure(spark, shape, order, engine, round)
    catch {
      case NonFatal(e) =>
        val root = Iterator.iterate[Throwable](e)(_.getCause).takeWhile(_ != null).toSeq.last
        val why = Option(root.getMessage).getOrElse(root.toString).linesIterator.take(3).mkString(" ")
        println(f"  ${if (round == 0) "warm-up" else s"round $round"}%-8s ${shape.name}%-9s ${order.key}%-7s ${engine.name}%-15s FAILED: $why")
        Run(shape, order, engine, round, Double.NaN, StageTime(Double.NaN, Double.NaN, Double.NaN), 0, 0, 0, Nil, Some(why))
    }

  private def measure(spark: SparkSession, shape: Shape, order: Order, engine: Engine, round: Int): Run = {
    spark.conf.set(SpillwaySortRule.EnabledKey, engine.spillway.toString)
    if (engine.comet) spark.conf.set("spark.comet.exec.sort.enabled", engine.cometSort.toString)
    val stages = stageTimes(spark)
    ListenerBusProbe.drain(spark.sparkContext)
    stages.take()
    val t0 = System.nanoTime()
    val df = if (engine.sorts) spark.sql(shape.sql) else withoutSort(spark, shape)
    val rows = df.queryExecution.toRdd.mapPartitions(it => Iterator(it.size.toLong)).collect().sum // every row read, none kept
    val seconds = (System.nanoTime() - t0) / 1e9
    val plan: SparkPlan = df.queryExecution.executedPlan
    val sortNodes = collectWithSubqueries(plan) { case p if p.nodeName.contains("Sort") => p }
    val sorts = sortNodes.map(_.getClass.getSimpleName)
    check(shape, engine, sorts, plan)
    // What the sorts spilled, as each engine's own metric says: SortExec's (and Spillway's)
    // "spillSize" is the memory the spilled records took (Spark's memoryBytesSpilled), Comet's
    // "spilled_bytes" the bytes its spill files take on disk. So the bytes on disk are compared
    // apart, as the stage's diskBytesSpilled: every engine counts its spill files there (Comet
    // adds its spilled_bytes to it).
    def metric(name: String) = sortNodes.flatMap(_.metrics.collect { case (k, m) if k == name => m.value }).sum
    val spilled = metric("spillSize") + metric("spilled_bytes")
    ListenerBusProbe.drain(spark.sparkContext)
    val last = stages.take().lastOption.getOrElse(throw new IllegalStateException(s"no stage of ${shape.name} completed"))
    val onDisk = last.diskBytesSpilled
    println(f"  ${if (round == 0) "warm-up" else s"round $round"}%-8s ${shape.name}%-9s ${order.key}%-7s ${engine.name}%-15s $seconds%6.2f s; " +
      f"sorting stage ${last.seconds}%.2f s, ${last.cpuSeconds}%.2f task CPU-s, ${last.processCpuSeconds}%.2f process CPU-s; " +
      f"spilled ${spilled / 1e6}%.0f MB, ${onDisk / 1e6}%.0f MB on disk; $rows rows in ${last.tasks} tasks; ${sorts.mkString(",")}")
    if (round == 0 && engine.comet) { // what Comet's sort reports, to keep the metric above honest
      sortNodes.filter(_.nodeName.startsWith("Comet")).headOption.foreach(n => println(s"    ${n.nodeName} metrics: ${n.metrics.keys.toSeq.sorted.mkString(", ")}"))
    }
    Run(shape, order, engine, round, seconds, last, spilled, onDisk, rows, sorts)
  }

  /** Where lineitem in `order` for `shape` is: dbgen's table, or one rewritten by [[inputs]]. */
  private def input(data: Path, shape: Shape, order: Order): Path = order match {
    case Dbgen => data.resolve("lineitem")
    case RandomOrder | Generated | Few => data.resolve("sort-inputs").resolve(order.key)
    case Sorted | Reverse => data.resolve("sort-inputs").resolve(s"${shape.name}-${order.key}")
  }

  /**
   * Writes lineitem in each order the bench runs that is not written yet, each through a sibling
   * dir renamed at the end (so a cut-off run leaves no half table), in as many files as dbgen's.
   */
  private def inputs(local: Path, data: Path, shapes: Seq[Shape], orders: Seq[Order]): Unit = {
    val wanted = (for (shape <- shapes; order <- orders if order != Dbgen) yield (input(data, shape, order), shape, order))
      .foldLeft(Vector.empty[(Path, Shape, Order)])((acc, w) => if (acc.exists(_._1 == w._1)) acc else acc :+ w) // one per table
    val missing = wanted.filterNot { case (p, _, _) => Files.exists(p.resolve("_SUCCESS")) }
    if (missing.isEmpty) return
    val files = Option(data.resolve("lineitem").toFile.listFiles()).getOrElse(Array.empty[java.io.File]).count(_.getName.endsWith(".parquet"))
    withSession("SortShapesBench-inputs", local, data, Seq("spark.sql.shuffle.partitions" -> math.max(2, files).toString)) { spark =>
      val lineitem = spark.table("lineitem")
      for ((path, shape, order) <- missing) {
        val t0 = System.nanoTime()
        val rows = order match {
          case RandomOrder => lineitem.orderBy(expr("xxhash64(l_orderkey, l_linenumber)"))
          case Few => few(lineitem).orderBy(expr("xxhash64(l_orderkey, l_linenumber, l_partkey)"))
          case Generated => generated(spark, lineitem)
          case Sorted => lineitem.orderBy(sortKeys(shape.inputKeys, reverse = false): _*)
          case Reverse => lineitem.orderBy(sortKeys(shape.inputKeys, reverse = true): _*)
          case Dbgen => lineitem
        }
        val partial = path.resolveSibling(path.getFileName.toString + ".partial")
        TestFiles.deleteRecursively(partial)
        rows.write.parquet(partial.toString)
        TestFiles.deleteRecursively(path)
        Files.move(partial, path)
        println(f"lineitem ${order.key}${if (order == Sorted || order == Reverse) s" for ${shape.name}" else ""} written into $path in ${(System.nanoTime() - t0) / 1e9}%.0f s")
      }
    }
  }

  /**
   * lineitem with each key column of the shapes cut to at most FewKeys values of its own type
   * (l_linenumber and l_shipinstruct have 7 and 4 already), the other columns as they are.
   */
  private def few(lineitem: DataFrame): DataFrame = {
    val types = lineitem.schema.fields.map(f => f.name -> f.dataType.sql).toMap
    val h = s"pmod(xxhash64(l_orderkey, l_linenumber), $FewKeys)"
    val cut = Map(
      "l_orderkey" -> h,
      "l_partkey" -> s"pmod(l_partkey, $FewKeys)",
      "l_suppkey" -> s"pmod(l_suppkey, $FewKeys)",
      "l_extendedprice" -> s"pmod(l_partkey, $FewKeys) * 1000",
      "l_shipdate" -> s"date_add(DATE'1995-01-01', CAST($h AS INT))",
      "l_comment" -> s"concat('few keys ', $h)")
    lineitem.select(lineitem.columns.map(c => cut.get(c).fold(lineitem.col(c))(e => expr(s"CAST($e AS ${types(c)})").as(c))).toIndexedSeq: _*)
  }

  /**
   * As many rows as lineitem, each column from a hash of the row's number and the column's own
   * seed, within the ranges TPC-H gives it at SF1 (the orders' keys, parts, suppliers, prices,
   * dates from 1992 to 1998, the flags, instructions and modes); each comment is CommentWords words
   * drawn by hashes from the words of dbgen's comments, cut at a hashed offset to 10-43 chars, so
   * that no two rows' comments are alike and lz4 finds in them what it finds in words, no more. Cast
   * to lineitem's types.
   */
  private val CommentPool = 100 // dbgen's comments whose words make the generated ones: about 400
  private val CommentWords = 12 // more than 43 chars of dbgen's words, from any offset of the first

  private def generated(spark: SparkSession, lineitem: DataFrame): DataFrame = {
    val types = lineitem.schema.fields.map(f => f.name -> f.dataType.sql).toMap
    val words = lineitem.select("l_comment").limit(CommentPool).collect()
      .flatMap(_.getString(0).split(" ")).filter(_.nonEmpty).distinct.sorted
    var seed = 0
    def h(n: Long): String = { seed += 1; s"pmod(xxhash64(id, $seed), $n)" }
    def pick(values: String*): String = s"element_at(array(${values.map(v => s"'$v'").mkString(", ")}), CAST(${h(values.size.toLong)} AS INT) + 1)"
    val columns = Seq(
      "l_orderkey" -> s"${h(6000000)} + 1",
      "l_partkey" -> s"${h(200000)} + 1",
      "l_suppkey" -> s"${h(10000)} + 1",
      "l_linenumber" -> s"${h(7)} + 1",
      "l_quantity" -> s"${h(50)} + 1",
      "l_extendedprice" -> s"(${h(10405100)} + 90000) / 100",
      "l_discount" -> s"${h(11)} / 100",
      "l_tax" -> s"${h(9)} / 100",
      "l_returnflag" -> pick("A", "N", "R"),
      "l_linestatus" -> pick("O", "F"),
      "l_shipdate" -> s"date_add(DATE'1992-01-02', CAST(${h(2526)} AS INT))",
      "l_commitdate" -> s"date_add(DATE'1992-01-31', CAST(${h(2466)} AS INT))",
      "l_receiptdate" -> s"date_add(DATE'1992-01-03', CAST(${h(2555)} AS INT))",
      "l_shipinstruct" -> pick("DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN"),
      "l_shipmode" -> pick("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"),
      "l_comment" -> {
        val wordSeed = { seed += 1; seed } // word i of a row's comment: the hash of (id, wordSeed, i)
        val vocabulary = words.map(w => s"'${w.replace("\\", "\\\\").replace("'", "\\'")}'").mkString("array(", ", ", ")")
        val text = s"array_join(transform(sequence(0, ${CommentWords - 1}), i -> element_at($vocabulary, " +
          s"CAST(pmod(xxhash64(id, $wordSeed, i), ${words.length}) AS INT) + 1)), ' ')"
        s"substr($text, CAST(${h(4)} AS INT) + 1, CAST(${h(34)} AS INT) + 10)"
      }).toMap
    val missing = lineitem.columns.filterNot(columns.contains)
    require(missing.isEmpty, s"no generator for lineitem's ${missing.mkString(", ")}")
    spark.range(0, lineitem.count(), 1, lineitem.rdd.getNumPartitions)
      .select(lineitem.columns.map(c => expr(s"CAST(${columns(c)} AS ${types(c)})").as(c)).toIndexedSeq: _*)
  }

  /** An ORDER BY list (`a, b DESC`) as columns, each the other way round with `reverse` (nulls last then, as Spark's DESC). */
  private def sortKeys(list: String, reverse: Boolean): Seq[org.apache.spark.sql.Column] =
    list.split(",").map(_.trim).toIndexedSeq.map { k =>
      val desc = k.endsWith(" DESC")
      val c = expr(k.stripSuffix(" DESC").stripSuffix(" ASC"))
      if (desc != reverse) c.desc else c.asc
    }

  /** The plan each engine must have run: else the numbers are another engine's. */
  private def check(shape: Shape, engine: Engine, sorts: Seq[String], plan: SparkPlan): Unit = {
    def fail(why: String) = throw new IllegalStateException(s"${shape.name} under ${engine.name}: $why\n$plan")
    if (engine.sorts && sorts.isEmpty) fail("no sort in the plan")
    engine match {
      case SparkSort     => if (sorts.exists(_ != "SortExec")) fail(s"sorts other than Spark's: $sorts")
      case SpillwaySort  => if (sorts.exists(_ != "SpillwaySortExec")) fail(s"sorts other than Spillway's: $sorts")
      case CometAlone    => if (sorts.exists(s => s != "SortExec" && !s.startsWith("Comet"))) fail(s"sorts neither Comet's nor Spark's: $sorts")
      case CometSpillway => if (sorts.contains("SortExec")) fail(s"a sort left to Spark's SortExec: $sorts")
      case CometScanSpillwaySort => if (sorts.exists(_ != "SpillwaySortExec")) fail(s"sorts other than Spillway's: $sorts")
      case NoSort | CometNoSort => if (sorts.nonEmpty) fail(s"a sort in the floor's plan: $sorts")
    }
  }

  /**
   * The shape's query with its ORDER BY turned into a range repartitioning on the same keys: the
   * same shuffle (range partitioning into `spark.sql.shuffle.partitions`, which adaptive execution
   * may coalesce as it does the sort's) read by a last stage that counts the same rows and sorts
   * none. The stage's task count is printed beside the sorts', so that a floor over other
   * partitions shows.
   */
  private def withoutSort(spark: SparkSession, shape: Shape): DataFrame = {
    val at = shape.sql.indexOf(" ORDER BY ")
    require(at > 0, s"${shape.name}: no ORDER BY in ${shape.sql}")
    val (select, orderBy) = (shape.sql.take(at), shape.sql.drop(at + " ORDER BY ".length))
    val keys = orderBy.split(",").map(_.trim).map { k =>
      if (k.endsWith(" DESC")) expr(k.stripSuffix(" DESC")).desc else expr(k.stripSuffix(" ASC")).asc
    }
    spark.sql(select).repartitionByRange(keys.toIndexedSeq: _*)
  }

  private def report(sf: String, offHeap: String, rounds: Int, shapes: Seq[Shape], orders: Seq[Order], runs: Seq[Run]): Unit = {
    println()
    println(s"Sorting stages, TPC-H SF$sf lineitem, local[2], $offHeap off-heap in every session, $rounds alternating rounds after a warm-up;")
    println("medians (min-max). Wall and task CPU of the stage that sorts (shuffle read, sort, every row read); process CPU: all threads over it.")
    println("\"no sort\" is the same shuffle and rows with no sort: its \"Spark / it\" is the most a sort costing nothing could gain over Spark's;")
    println("\"over the floor\" is a stage's median wall less its session's floor's (Comet's for the Comet ways), the sort's own share;")
    println("\"Spark / it, over the floor\" compares those shares.")
    for (shape <- shapes; order <- orders) {
      val all = runs.filter(r => r.shape == shape && r.order == order)
      val mine = all.filter(_.failed.isEmpty)
      def of(e: Engine) = mine.filter(_.engine == e)
      val sparkWall = median(of(SparkSort).map(_.stage.seconds))
      val sparkCpu = median(of(SparkSort).map(_.stage.processCpuSeconds))
      val cometWall = median(of(CometAlone).map(_.stage.seconds))
      // The floor under each engine's sort: Spark's row shuffle, or Comet's (NaN when it did not run).
      val floorWall = median(of(NoSort).map(_.stage.seconds))
      val cometFloorWall = median(of(CometNoSort).map(_.stage.seconds))
      val rows = mine.map(_.rows).distinct
      println(s"\n${shape.name}, input ${order.key}: ${shape.about}; rows ${order.about}\n  ${shape.sql}${if (rows.size > 1) s"\n  WARNING: the engines read different row counts: $rows" else s" (${rows.headOption.getOrElse(0L)} rows)"}")
      println("| engine | sort | tasks | stage wall (s) | over the floor (s) | task CPU (s) | process CPU (s) | spilled (MB) | on disk (MB) | Spark / it, wall | Spark / it, over the floor | Spark / it, process CPU | Comet / it, wall |")
      println("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
      for (e <- Engines; failed = all.filter(r => r.engine == e && r.failed.nonEmpty) if failed.nonEmpty) {
        println(s"| ${e.name} | failed in ${failed.size} of ${all.count(_.engine == e)} runs: ${failed.head.failed.get} | | | | | | | | | | | |")
      }
      for (e <- Engines; rs = of(e) if rs.nonEmpty) {
        val wall = median(rs.map(_.stage.seconds))
        val cpu = median(rs.map(_.stage.processCpuSeconds))
        val tasks = rs.map(_.stage.tasks).distinct.sorted.mkString("/")
        val overFloor = wall - (if (e.comet) cometFloorWall else floorWall)
        val sparkOverFloor = if (!e.sorts) "" else f"${(sparkWall - floorWall) / overFloor}%.2f"
        println(s"| ${e.name} | ${rs.head.sorts.distinct.map(_.stripSuffix("Exec")).mkString(", ")} | $tasks | ${spread(rs.map(_.stage.seconds))} | " +
          f"$overFloor%.2f | ${spread(rs.map(_.stage.cpuSeconds))} | ${spread(rs.map(_.stage.processCpuSeconds))} | ${spread(rs.map(_.spilledBytes / 1e6), 0)} | " +
          s"${spread(rs.map(_.onDiskBytes / 1e6), 0)} | " +
          f"${sparkWall / wall}%.2f | $sparkOverFloor | ${sparkCpu / cpu}%.2f | ${cometWall / wall}%.2f |")
      }
    }
  }
}
