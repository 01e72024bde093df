package spillway

import org.apache.spark.SparkConf

import org.scalatest.funsuite.AnyFunSuite

/**
 * The settings' one parser, through the entry points users meet: the driver's startup check, a
 * session's `spark.conf.set`, and SparkContext creation with the plugin (in a child JVM, since it
 * must fail).
 */
class SpillwayConfSuite extends AnyFunSuite with LocalSpark {
  private val Limit = SpillwayConf.MaxTempDirectorySizeKey
  private val ExecutorLimit = SpillwayConf.MaxExecutorTempDirectorySizeKey
  private val Budget = SpillwayConf.SortMemoryBudgetKey

  private def conf(settings: (String, String)*): SparkConf = new SparkConf(false).setAll(settings)

  private def rejected(key: String, value: String): String =
    intercept[IllegalArgumentException](SpillwayConf.validate(conf(key -> value))).getMessage

  test("every bad value is rejected at the driver's check with the key, the value and what to write") {
    val cases = Seq(
      "10x" -> "unknown unit 'x'",
      "-1" -> "must not be negative",
      "1.5g" -> "fractions are not supported (write 1536m)",
      "100000000000000000g" -> "too large: the largest size is 8191p; write unlimited for no limit",
      "lots" -> "not a size",
      "" -> "not a size")
    for ((value, why) <- cases; key <- Seq(Limit, ExecutorLimit)) {
      val message = rejected(key, value)
      assert(message.startsWith(s"Invalid value '$value' for $key: $why; expected a byte size such as"), message)
      assert(message.endsWith("or unlimited"), message)
      assert(!message.contains("TYPE_MISMATCH"), message)
    }
    assert(rejected(Budget, "-1m") == s"Invalid value '-1m' for $Budget: must not be negative; expected a positive " +
      "byte size such as 512m or 10g (units b, k, m, g, t, p; binary, 1k = 1024), or unlimited")
    assert(rejected(Budget, "0").contains("must be positive"))
    val age = SpillwayConf.RemoteOrphanAge.key
    assert(rejected(age, "0").startsWith(s"Invalid value '0' for $age: expected a positive time such as 1h"), rejected(age, "0"))
    // Every bad value at once, not one per attempt.
    val both = intercept[IllegalArgumentException](SpillwayConf.validate(conf(Limit -> "10x", Budget -> "0"))).getMessage
    assert(both.contains(Limit) && both.contains(Budget), both)
  }

  test("good values: Spark's byte strings, unlimited for the limits and the sort's cap, 0 (no spill allowed) for the limits") {
    assert(SpillwayConf.validate(conf(Limit -> "10g", ExecutorLimit -> "unlimited", Budget -> "64m")).isEmpty)
    assert(SpillwayConf.validate(conf(Limit -> " 8191P ", ExecutorLimit -> "0", Budget -> "1")).isEmpty)
    assert(SpillwayConf.validate(conf(Limit -> "512mb", ExecutorLimit -> "100", Budget -> "unlimited")).isEmpty)
  }

  test("the spill file format: Spark's switches and ours, defaults, and every bad value named") {
    import SpillwayConf.{CompressionCodecKey, SpillFormat, ZstdLevelKey}
    assert(SpillwayConf.spillFormat(conf()) == SpillFormat("lz4", 1, encrypt = false, keyBits = 128), "lz4 as Spark")
    assert(SpillwayConf.spillFormat(conf("spark.shuffle.spill.compress" -> "false")).codec == "none")
    assert(SpillwayConf.spillFormat(conf(CompressionCodecKey -> " ZSTD ", "spark.io.compression.zstd.level" -> "5")) ==
      SpillFormat("zstd", 5, encrypt = false, keyBits = 128), "the zstd level follows Spark's by default")
    assert(SpillwayConf.spillFormat(conf(ZstdLevelKey -> "9", "spark.io.compression.zstd.level" -> "5")).zstdLevel == 9)
    assert(SpillwayConf.spillFormat(conf("spark.io.encryption.enabled" -> "true", "spark.io.encryption.keySizeBits" -> "256")) ==
      SpillFormat("lz4", 1, encrypt = true, keyBits = 256))
    for ((k, v, want) <- Seq(
      (CompressionCodecKey, "snappy", "none, lz4, zstd"),
      (ZstdLevelKey, "0", "1 to 22"),
      (ZstdLevelKey, "fast", "1 to 22"),
      ("spark.io.encryption.keySizeBits", "512", "128, 192 or 256"))) {
      val m = rejected(k, v)
      assert(m.contains(k) && m.contains(v) && m.contains(want), m)
      val atTask = intercept[IllegalArgumentException](SpillwayConf.spillFormat(conf(k -> v))).getMessage
      assert(atTask == m, "the executor refuses it with the driver's message")
    }
    assert(SpillwayConf.validate(conf(CompressionCodecKey -> "zstd", ZstdLevelKey -> "3")).isEmpty, "known keys, no warning")
  }

  test("the sorts' memory cache: off (0) by default, an opt-in time as Spark's, every bad value named") {
    import SpillwayConf.{SortMemoryCacheIdleKey => Idle}
    assert(SpillwayConf.sortMemoryCacheIdleMs(conf()) == 0L, "no cache unless asked: memory ends with its task")
    assert(SpillwayConf.sortMemoryCacheIdleMs(conf(Idle -> "60s")) == 60000L)
    assert(SpillwayConf.sortMemoryCacheIdleMs(conf(Idle -> " 2min ")) == 120000L)
    assert(SpillwayConf.sortMemoryCacheIdleMs(conf(Idle -> "500ms")) == 500L)
    assert(SpillwayConf.sortMemoryCacheIdleMs(conf(Idle -> "0")) == 0L, "no cache")
    assert(SpillwayConf.validate(conf(Idle -> "10s")).isEmpty, "a known key, no warning")
    for (v <- Seq("-1s", "soon", "10 parsecs", "")) {
      val m = rejected(Idle, v)
      assert(m == s"Invalid value '$v' for $Idle: expected a time such as 60s, 2min or 500ms, or 0 for no cache", m)
      assert(intercept[IllegalArgumentException](SpillwayConf.sortMemoryCacheIdleMs(conf(Idle -> v))).getMessage == m,
        "the executor refuses it with the driver's message")
    }
  }

  test("the switches: true or false, checked at the driver and known (no typo warning)") {
    for (key <- Seq(SpillwayConf.SqlSortEnabledKey, SpillwayConf.SqlSortLogFallbacksKey)) {
      assert(SpillwayConf.validate(conf(key -> "false")).isEmpty)
      assert(SpillwayConf.validate(conf(key -> " TRUE ")).isEmpty)
      assert(rejected(key, "yes") == s"Invalid value 'yes' for $key: expected true or false")
    }
  }

  test("a task reads unlimited as no limit, and the executor limit's default is unlimited") {
    val limits = withLocalProperties(Limit -> "UNLIMITED") {
      sc.parallelize(Seq(1), 1).map { _ =>
        val task = org.apache.spark.TaskContext.get()
        val env = org.apache.spark.SparkEnv.get
        (SpillwayConf.maxTempDirectorySize(task, env.conf), SpillwayConf.maxExecutorTempDirectorySize(task, env.conf))
      }.collect().head
    }
    assert(limits == (Long.MaxValue, Long.MaxValue))
  }

  test("an unknown spark.spillway.* key is a warning naming the closest known key") {
    val warnings = SpillwayConf.validate(conf(
      "spark.spillway.maxTempDirSize" -> "1g", "spark.spillway.sort.memoryBudjet" -> "1m", Limit -> "1g",
      "spark.other.key" -> "x"))
    assert(warnings.size == 2, warnings)
    assert(warnings.head.startsWith(s"spark.spillway.maxTempDirSize is not a Spillway setting and is ignored; did you mean $Limit?"))
    assert(warnings(1).startsWith(s"spark.spillway.sort.memoryBudjet is not a Spillway setting and is ignored; did you mean $Budget?"))
  }

  test("a session value is checked when it is set, with the same message") {
    val e = intercept[IllegalArgumentException](spark.conf.set(Limit, "1.5g"))
    assert(TestFiles.causeChain(e).exists(_.getMessage.contains(s"Invalid value '1.5g' for $Limit: fractions are not supported (write 1536m)")), e)
    spark.conf.set(Limit, "unlimited")
    try assert(spark.conf.get(Limit) == "unlimited")
    finally spark.conf.unset(Limit)
  }

  test("the declarations: one per key, each known, and a session may set exactly those read in a task, checked") {
    import SpillwayConf.Settings
    assert(Settings.map(_.key).distinct == Settings.map(_.key) && Settings.forall(_.key.startsWith(SpillwayConf.Prefix)))
    assert(SpillwayConf.KnownKeys == Settings.map(_.key))
    assert(SpillwayConf.SparkKeys.forall(k => !k.key.startsWith(SpillwayConf.Prefix)))
    assert(SpillwayConf.validate(conf(Settings.map(s => s.key -> s.default): _*)).isEmpty, "every default passes its check")
    for (s <- Settings) {
      val error = s.check("bogus!").left.getOrElse(fail(s"${s.key} took bogus!"))
      assert(error.startsWith(s"Invalid ") && error.contains(s"'bogus!' for ${s.key}: "), error)
      if (s.scope.perTask) {
        val set = intercept[IllegalArgumentException](spark.conf.set(s.key, "bogus!"))
        assert(TestFiles.causeChain(set).exists(_.getMessage.contains(error)), set)
      } else {
        // Read from the session when a query is planned, or once per executor: not registered.
        spark.conf.set(s.key, "bogus!")
        spark.conf.unset(s.key)
      }
    }
  }

  test("with the plugin, a bad value fails SparkContext creation at once, before any executor starts") {
    val result = ChildJvm.run(PluginProbe.getClass.getName.stripSuffix("$"),
      ChildJvm.sparkOptions ++ ChildJvm.libraryOption :+ "-Xmx512m",
      Seq("bad-conf", Limit, "100000000000000000g"))
    val errors = result.output.linesIterator.filter(_.startsWith("error=")).toSeq
    withClue(result.output) {
      assert(result.exitCode == 0)
      assert(!result.output.contains("started=true"))
      assert(errors.exists(_.contains(s"Invalid value '100000000000000000g' for $Limit: too large")), errors)
      assert(!result.output.contains("executorPluginStarted=true"), "no executor plugin ran")
    }
  }
}
