package org.apache.spark.spillway.ui

import java.nio.file.Files
import java.util.concurrent.ConcurrentLinkedQueue

import scala.jdk.CollectionConverters._

import org.apache.spark.{SparkConf, SparkEnv}
import org.apache.spark.scheduler.{SparkListener, SparkListenerEvent, SparkListenerTaskEnd}
import org.apache.spark.spillway.ListenerBusProbe
import org.apache.spark.sql.SparkSession
import org.apache.spark.status.ElementTrackingStore
import org.apache.spark.util.JsonProtocol
import org.apache.spark.util.kvstore.InMemoryStore
import org.scalatest.BeforeAndAfterAll
import org.scalatest.LoneElement._
import org.scalatest.concurrent.Eventually._
import org.scalatest.funsuite.AnyFunSuite
import org.scalatest.time.SpanSugar._

import spillway._

/**
 * Spillway's events on real Spark (local mode, the plugin and the SQL extension on, the real
 * library): what they say against Spark's own task metrics and the sort rule's fallbacks, that
 * they read back from the event log's JSON as they were written, and the tab's store and view
 * built from them, bounded. Run on every Spark line (LINE_SUITES).
 */
class SpillwayEventsSuite extends AnyFunSuite with BeforeAndAfterAll {
  private val base = Files.createTempDirectory("spillway-events-")
  private var spark: SparkSession = _
  private val events = new ConcurrentLinkedQueue[SparkListenerEvent]()
  private val taskDiskSpilled = new ConcurrentLinkedQueue[(Int, Long)]() // (stage, bytes) per task

  override def beforeAll(): Unit = {
    super.beforeAll()
    spark = SparkSession.builder().master("local[2]").appName("SpillwayEventsSuite")
      .config("spark.plugins", "spillway.SpillwayPlugin")
      .config("spark.sql.extensions", "spillway.SpillwayExtensions")
      .config("spark.spillway.sort.memoryBudget", "1m")
      .config("spark.spillway.ui.updateInterval", "200ms")
      .config("spark.sql.shuffle.partitions", "2")
      .config("spark.local.dir", Files.createDirectory(base.resolve("local")).toString)
      .config("spark.ui.enabled", "false")
      .getOrCreate()
    spark.sparkContext.addSparkListener(new SparkListener {
      override def onOtherEvent(e: SparkListenerEvent): Unit = e match {
        case s: SpillwayEvent => events.add(s)
        case _ =>
      }
      override def onTaskEnd(end: SparkListenerTaskEnd): Unit =
        Option(end.taskMetrics).foreach(m => taskDiskSpilled.add(end.stageId -> m.diskBytesSpilled))
    })
  }

  override def afterAll(): Unit =
    try if (spark != null) spark.stop()
    finally {
      TestFiles.deleteRecursively(base)
      super.afterAll()
    }

  private def posted[T <: SpillwayEvent](klass: Class[T]): Seq[T] =
    events.asScala.toSeq.collect { case e if klass.isInstance(e) => klass.cast(e) }

  test("a spilling SQL sort posts its stage's spills, as Spark's task metrics count them, once per stage and executor") {
    events.clear()
    taskDiskSpilled.clear()
    val sc = spark.sparkContext
    sc.setJobDescription("spilling")
    spark.range(0, 200000, 1, 2).selectExpr("id", "cast(rand(3) * 1e12 as bigint) as k", "repeat('x', 40) as pad")
      .orderBy("k").write.format("noop").mode("overwrite").save()
    sc.setJobDescription(null)
    ListenerBusProbe.drain(sc)
    val stages = posted(classOf[SpillwayStageSpills])
    val spilledStages = taskDiskSpilled.asScala.groupBy(_._1).map { case (s, ts) => s -> ts.map(_._2).sum }.filter(_._2 > 0)
    assert(spilledStages.nonEmpty, "the sort did not spill by Spark's metrics")
    assert(stages.map(s => s.stageId -> s.diskBytes).toMap === spilledStages)
    assert(stages.map(s => (s.stageId, s.stageAttemptId, s.executorId)).distinct.size === stages.size)
    stages.foreach { s =>
      assert(s.executorId === "driver")
      assert(s.plans >= 1 && s.sortRuns >= 1 && s.logicalBytes > 0 && s.files === 0, s)
      assert(s.sqlExecutionId >= 0, s)
    }
    val sorts = posted(classOf[SpillwaySqlSorts])
    assert(sorts.map(_.executionId).distinct === stages.map(_.sqlExecutionId).distinct)
    assert(sorts.head.nativeSorts >= 1 && sorts.head.fallbacks.isEmpty)
  }

  test("a sort left to Spark posts its keys and reason, as the rule lists them; a plan that never spills posts nothing") {
    events.clear()
    val df = spark.range(0, 100).selectExpr("id", "array(id, id % 3) as arr").orderBy("arr")
    df.write.format("noop").mode("overwrite").save()
    ListenerBusProbe.drain(spark.sparkContext)
    val sorts = posted(classOf[SpillwaySqlSorts])
    assert(sorts.size === 1)
    assert(sorts.head.fallbacks.map(f => spillway.sql.SpillwaySortRule.describe(f.keys, f.reason)) ===
      spillway.sql.SpillwaySortRule.fallbacksOf(df).toSeq)
    assert(posted(classOf[SpillwayStageSpills]).isEmpty)
  }

  test("a spill file made through TaskSpill names its local dir and counts its bytes") {
    events.clear()
    spark.sparkContext.parallelize(1 to 2, 2).foreach { _ =>
      val file = TaskSpill.plan().createSpillFile()
      val out = file.outputStream()
      out.write(new Array[Byte](100000))
      out.close()
    }
    ListenerBusProbe.drain(spark.sparkContext)
    val stages = posted(classOf[SpillwayStageSpills])
    assert(stages.size === 1)
    val s = stages.head
    assert(s.plans === 2 && s.files === 2 && s.sortRuns === 0 && s.logicalBytes === 200000 && s.diskBytes > 0)
    assert(s.sqlExecutionId === -1)
    assert(s.localDirs.nonEmpty && s.localDirs.forall(SparkEnv.get.blockManager.getLocalDiskDirs.contains), s.localDirs)
  }

  test("a local dir's Spillway bytes are those of the files in its plan dirs, none once the plan is released") {
    val dir = Files.createTempDirectory("spillway-events-dir")
    try {
      assert(ExecutorReports.localDir(dir.toString).spillwayBytes === 0)
      Files.write(dir.resolve("not-a-plan-dir"), new Array[Byte](5000)) // Spark's, not ours
      val plan = SpillPlan.create(Array(dir.toString), Long.MaxValue)
      try {
        val files = Seq(100000, 3000).map { n =>
          val f = plan.createSpillFile()
          val out = f.outputStream()
          out.write(TestFiles.pattern(n))
          out.close()
          f
        }
        val d = ExecutorReports.localDir(dir.toString)
        assert(d.spillwayBytes === files.map(_.bytesOnDisk).sum && d.spillwayBytes > 0, d)
        assert(d.totalBytes > 0 && !d.givenUp, d)
      } finally plan.close()
      assert(ExecutorReports.localDir(dir.toString).spillwayBytes === 0)
    } finally TestFiles.deleteRecursively(dir)
  }

  test("the executor posts its state: local dirs, limits, counters") {
    val u = eventually(timeout(60.seconds), interval(100.millis)) {
      val us = posted(classOf[SpillwayExecutorUpdate])
      assert(us.nonEmpty)
      us.last
    }
    assert(u.executorId === "driver")
    assert(u.localDirs.map(_.path) === SparkEnv.get.blockManager.getLocalDiskDirs.toSeq)
    assert(u.localDirs.forall(d => d.totalBytes > 0 && d.freeBytes > 0 && !d.full && !d.givenUp))
    assert(u.planLimit === SpillwayConf.MaxTempDirectorySize.defaultValue && u.executorLimit === Long.MaxValue)
  }

  test("every event reads back from the event log's JSON as it was written") {
    val all = Seq(
      SpillwayStageSpills(3, 1, "7", 12L, 2, 3, 4, 5L << 33, 6, Seq("/a", "/b")),
      SpillwayStageSpills(3, 0, "7", -1L, 1, 0, 0, 0, 0, Nil),
      SpillwayExecutorUpdate("7", "h", 1L << 41, atStop = true, Seq(SpillwayLocalDir("/a", 1L << 40, 0, givenUp = true, spillwayBytes = 12345)), 100,
        Long.MaxValue, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12L << 33, 13, 14),
      SpillwaySqlSorts(5, 2, Seq(SpillwaySortFallback("a ASC NULLS FIRST", "key a: nested type array<int>"))))
    all.foreach { e =>
      assert(JsonProtocol.sparkEventFromJson(JsonProtocol.sparkEventToJsonString(e)) === e)
    }
  }

  private def store(): ElementTrackingStore =
    new ElementTrackingStore(new InMemoryStore, new SparkConf(false).set("spark.appStateStore.asyncTracking.enable", "false"))

  test("the tab's store sums a stage's events, keeps an executor's peak, and the view joins them per query") {
    val s = store()
    val listener = new SpillwayStatusListener(s)
    listener.onOtherEvent(SpillwayStageSpills(1, 0, "1", 4, 1, 1, 2, 100, 10, Seq("/b")))
    listener.onOtherEvent(SpillwayStageSpills(1, 0, "1", -1, 2, 0, 3, 200, 20, Seq("/a")))
    listener.onOtherEvent(SpillwayStageSpills(2, 0, "2", 4, 1, 0, 1, 50, 5, Nil))
    listener.onOtherEvent(SpillwaySqlSorts(4, 2, Seq(SpillwaySortFallback("k", "why"))))
    listener.onOtherEvent(SpillwaySqlSorts(9, 0, Seq(SpillwaySortFallback("j", "because"))))
    val update = SpillwayExecutorUpdate("1", "h", 1, atStop = false,
      Seq(SpillwayLocalDir("/a", 100, 0, givenUp = false), SpillwayLocalDir("/gone", 0, 0, givenUp = true)), 10, 20, 0, 15,
      0, 1, 1, 1, 1, 1, 0, 0)
    listener.onOtherEvent(update)
    listener.onOtherEvent(update.copy(peakBytesInUse = 3, time = 2))
    listener.onOtherEvent(update.copy(time = 5000, bytesSpilled = 40))
    listener.onOtherEvent(update.copy(executorId = "2", time = 3000, bytesSpilled = 0))
    val view = new SpillwayView(s)
    assert(view.queries === Seq(
      SpillwayQuery(9, 0, Seq(SpillwaySortFallback("j", "because")), 0, 0, 0, 0, 0, Nil),
      SpillwayQuery(4, 2, Seq(SpillwaySortFallback("k", "why")), plans = 4, files = 1, sortRuns = 6, logicalBytes = 350,
        diskBytes = 35, localDirs = Seq("/a", "/b"))))
    assert(view.executors.map(e => e.executorId -> e.peakBytesInUse) === Seq("1" -> 15L, "2" -> 15L))
    assert(view.timelines === Seq(
      SpillwayExecutorTimelineRow("1", Seq(SpillwayTimelinePoint(1, 1), SpillwayTimelinePoint(5000, 40))),
      SpillwayExecutorTimelineRow("2", Seq(SpillwayTimelinePoint(3000, 0)))))

    val html = SpillwayPageContent.render(view, "/root").toString
    assert(!html.contains("Remote files"), "no remote columns while no executor used the remote tier")
    assert(html.contains("""<a href="/root/SQL/execution/?id=4">4</a>"""))
    assert(html.contains("""<span class="fallback-reason">why</span>"""))
    assert(html.contains("spillway-full"), "the full dir is not marked")
    assert(html.contains("""data-path="/gone" data-total-bytes="0" data-free-bytes="0" data-full="true" data-given-up="true""""))
    assert(html.contains("spillway-given-up"), "the dir given up is not marked")
    // Spark's own sortable tables, on every line: sorttable.js sorts a table of this class.
    Seq("spillway-queries", "spillway-executors", "spillway-stages").foreach { id =>
      assert(html.contains(s"""<table id="$id" class="${org.apache.spark.ui.UIUtils.TABLE_CLASS_STRIPED_SORTABLE}">"""), id)
    }
    assert(org.apache.spark.ui.UIUtils.TABLE_CLASS_STRIPED_SORTABLE.split(" ").contains("sortable"))
    assert(html.contains("""<a href="/root/stages/stage/?id=1&amp;attempt=0">1</a>"""))
    // The timeline: executor 1's line, which ends at its bytes; executor 2 never spilled, no line.
    val svg = scala.xml.XML.loadString(html) \\ "svg"
    assert((svg \\ "polyline").map(l => (l \@ "data-executor-id", l \@ "data-bytes")) === Seq("1" -> "40"))
    assert((svg \\ "polyline" \@ "points").split(" ").last.endsWith(",10.0"), "the line does not end at the top")
    val json = org.json4s.jackson.JsonMethods.compact(view.json)
    assert(json.contains(""""executionId":4,"nativeSorts":2"""))
    assert(json.contains(""""diskBytes":35"""))
    assert(json.contains(""""remote":{"spillFiles":0,"bytesSpilled":0,"bytesRead":0,"retries":0}"""))

    // Once an executor has used the remote tier, its figures show in columns of their own.
    listener.onOtherEvent(update.copy(time = 6000, remoteSpillFiles = 3, remoteBytesSpilled = 5L << 20,
      remoteBytesRead = 7L << 20, remoteRetries = 2))
    val remote = SpillwayPageContent.render(new SpillwayView(s), "/root").toString
    assert(remote.contains("Remote files") && remote.contains("Remote retries"))
    assert(remote.contains("""<td class="remote-files">3</td>"""))
    assert(remote.contains(s"""<td class="remote-written" data-bytes="${5L << 20}"""))
    assert(remote.contains(s"""<td class="remote-read" data-bytes="${7L << 20}"""))
    assert(remote.contains("""<td class="remote-retries">2</td>"""))
    val remoteJson = org.json4s.jackson.JsonMethods.compact(new SpillwayView(s).json)
    assert(remoteJson.contains(s""""remote":{"spillFiles":3,"bytesSpilled":${5L << 20},"bytesRead":${7L << 20},"retries":2}"""))
  }

  test("an executor's timeline keeps its whole span in at most MaxPoints points, the latest last") {
    val s = store()
    val listener = new SpillwayStatusListener(s)
    val update = SpillwayExecutorUpdate("1", "h", 0, atStop = false, Nil, 10, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    val n = SpillwayExecutorTimelineRow.MaxPoints * 4 + 3
    (1 to n).foreach(i => listener.onOtherEvent(update.copy(time = i * 1000L, bytesSpilled = i.toLong)))
    listener.onOtherEvent(update.copy(time = (n + 1) * 1000L, bytesSpilled = n.toLong)) // nothing new: no point
    val points = new SpillwayView(s).timelines.loneElement.points
    assert(points.size <= SpillwayExecutorTimelineRow.MaxPoints && points.size > SpillwayExecutorTimelineRow.MaxPoints / 4)
    assert(points.head === SpillwayTimelinePoint(1000, 1))
    assert(points.last === SpillwayTimelinePoint(n * 1000L, n.toLong))
    assert(points.map(_.time) === points.map(_.time).sorted)
  }

  test("every row reads back from the serializer of the History Server's disk store as it was written") {
    val serializer = new org.apache.spark.status.KVUtils.KVStoreScalaSerializer
    val rows: Seq[AnyRef] = Seq(
      SpillwayStageRow("k", SpillwayStageSpills(3, 1, "7", 12L, 2, 3, 4, 5L << 33, 6, Seq("/a"))),
      SpillwayExecutorRow("7", SpillwayExecutorUpdate("7", "h", 1, atStop = false,
        Seq(SpillwayLocalDir("/a", 1L << 40, 0, givenUp = true, spillwayBytes = 12345)), 100, Long.MaxValue, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
        11, 12L << 33, 13, 14)),
      SpillwayExecutorTimelineRow("7", Seq(SpillwayTimelinePoint(1, 2), SpillwayTimelinePoint(3L << 40, 5L << 33))),
      SpillwaySqlRow(5, SpillwaySqlSorts(5, 2, Seq(SpillwaySortFallback("a", "why")))))
    rows.foreach { r =>
      val back = serializer.deserialize(serializer.serialize(r), r.getClass)
      assert(back === r)
      // Small numbers must come back as Longs, not Integers a Long field cannot hold.
      back match {
        case t: SpillwayExecutorTimelineRow => assert(t.points.map(_.time).sum === 1L + (3L << 40))
        case _ =>
      }
    }
  }

  test("plans that never spill post no event, however many there are: the events cost per spill, not per plan") {
    events.clear()
    val sc = spark.sparkContext
    val created = NativeStats.read()("plansCreated")
    // 64 tasks with a plan each, and a SQL query whose 16 native sorts fit in their budget.
    sc.parallelize(1 to 64, 64).foreach(_ => TaskSpill.plan())
    val df = spark.range(0, 16000, 1, 16).selectExpr("id", "-id as k").sortWithinPartitions("k")
    df.write.format("noop").mode("overwrite").save()
    ListenerBusProbe.drain(sc)
    assert(NativeStats.read()("plansCreated") - created >= 64 + 16, "fewer plans than tasks: the test tests nothing")
    assert(posted(classOf[SpillwayStageSpills]).isEmpty)
    // The query's one event (its native sorts), and the executor's periodic updates: none per plan.
    assert(posted(classOf[SpillwaySqlSorts]).map(_.nativeSorts) === Seq(1))
    assert(events.asScala.count(e => !e.isInstanceOf[SpillwayExecutorUpdate]) === 1)
  }

  test("the tab's store keeps at most its bounds, dropping the oldest queries and stages") {
    val s = store()
    val listener = new SpillwayStatusListener(s)
    val n = SpillwayStatusListener.MaxSqlRows + 10
    (0L until n).foreach(i => listener.onOtherEvent(SpillwaySqlSorts(i, 1, Nil)))
    (0L until SpillwayStatusListener.MaxStageRows + 10).foreach(i => listener.onOtherEvent(
      SpillwayStageSpills(i.toInt, 0, "1", -1, 1, 0, 1, 1, 1, Nil)))
    val view = new SpillwayView(s)
    assert(view.queries.size === SpillwayStatusListener.MaxSqlRows)
    assert(view.queries.map(_.executionId).min === 10L)
    assert(view.stages.size === SpillwayStatusListener.MaxStageRows)
    assert(view.stages.map(_.stageId).min === 10)
  }
}
