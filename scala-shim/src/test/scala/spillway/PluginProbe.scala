package spillway

import java.nio.ByteBuffer

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.SparkSession

/** Entry point of child JVMs started by SpillwayPluginSuite; prints `key=value` lines. */
object PluginProbe {
  def main(args: Array[String]): Unit = args.toList match {
    case "orphans" :: dirs =>
      // A process that dies mid-spill: one plan per dir, each with a live file, never released.
      NativeLoader.load()
      dirs.foreach { dir =>
        val plan = NativeSpill.createPlan(Array(dir), 1L << 30)
        val file = NativeSpill.createTmpFile(plan)
        NativeSpill.write(file, ByteBuffer.wrap(Array.fill[Byte](4096)(1)), 0, 4096)
        println(s"orphan=${NativeSpill.path(file)}")
      }
      System.out.flush()
      Runtime.getRuntime.halt(0) // no shutdown hooks: nothing is released, as after a kill -9
    case List("load-failure") =>
      // Started with -Dspillway.library.path pointing nowhere: SparkContext creation must fail with
      // the plugin's error (local mode creates the executor, and so runs the plugin, at startup).
      try {
        SparkSession.builder().master("local[1]").appName("plugin-probe")
          .config("spark.ui.enabled", "false")
          .config("spark.plugins", classOf[SpillwayPlugin].getName)
          .getOrCreate()
        println("started=true")
      } catch {
        case t: Throwable =>
          TestFiles.causeChain(t).foreach(c => println(s"error=${c.getClass.getName}: ${c.getMessage}"))
      }
    case List("bad-conf", key, value) =>
      // SparkContext creation with the plugin and a bad Spillway setting must fail with its message.
      try {
        SparkSession.builder().master("local[1]").appName("plugin-probe")
          .config("spark.ui.enabled", "false")
          .config("spark.plugins", classOf[ObservedSpillwayPlugin].getName)
          .config(key, value)
          .getOrCreate()
        println("started=true")
      } catch {
        case t: Throwable =>
          TestFiles.causeChain(t).foreach(c => println(s"error=${c.getClass.getName}: ${c.getMessage}"))
      }
      println(s"executorPluginStarted=${ObservedSpillwayPlugin.startup.isDefined}")
    case List("executor-failed") =>
      // The driver plugin told that an executor cannot start Spillway: the running job and every
      // later one must fail with that message.
      val spark = SparkSession.builder().master("local[1]").appName("plugin-probe")
        .config("spark.ui.enabled", "false").getOrCreate()
      val sc = spark.sparkContext
      val plugin = new SpillwayDriverPlugin
      plugin.init(sc, null)
      def runJob(name: String, sleepMillis: Long): Unit =
        try {
          sc.parallelize(Seq(1), 1).foreach(_ => Thread.sleep(sleepMillis))
          println(s"$name=finished")
        } catch {
          case t: Throwable => println(s"$name.error=${t.getClass.getName}: ${t.getMessage}")
        }
      val running = new Thread(() => runJob("running", 10 * 60 * 1000L)) // until cancelled
      running.start()
      val deadline = System.nanoTime() + 60L * 1000 * 1000 * 1000
      while (sc.statusTracker.getActiveJobIds().isEmpty && System.nanoTime() < deadline) Thread.sleep(10)
      println(s"reply=${plugin.receive(SpillwayExecutorFailed("7", "host-a", "Spillway cannot start on executor 7: broken"))}")
      // A second report (another executor) changes nothing.
      println(s"reply=${plugin.receive(SpillwayExecutorFailed("8", "host-b", "Spillway cannot start on executor 8: broken"))}")
      running.join(60 * 1000L)
      runJob("later", 0)
      spark.stop()
    case List("wrong-platform") =>
      // Started with -Dos.arch set to an architecture the classpath has no library for.
      println(s"platform=${NativeLoader.platform()}")
      println(s"bundled=${BundledLibrary.platforms().asScala.mkString(",")}")
      try {
        NativeLoader.load()
        println("loaded=true")
      } catch {
        case t: Throwable => println(s"error=${t.getClass.getName}: ${t.getMessage}")
      }
    case other => throw new IllegalArgumentException(s"unknown probe: $other")
  }
}
