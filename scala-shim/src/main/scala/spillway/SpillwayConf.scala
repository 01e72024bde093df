package spillway

import java.util.Locale
import java.util.concurrent.ConcurrentHashMap

import org.apache.spark.{SparkConf, TaskContext}
import org.apache.spark.network.util.JavaUtils
import org.apache.spark.spillway.SparkInternals

/**
 * Spillway's configuration keys and their one parser.
 *
 * Every value is checked three times with the same rules and messages: on the driver at startup
 * ([[validate]], called by the plugin's driver side, so spark-submit fails before any executor
 * starts), when a session sets it (`spark.conf.set`/`SET`: the keys are registered with SQLConf,
 * which runs the same check), and when a task reads it ([[read]]: a job local property set with
 * `sc.setLocalProperty` reaches only the task).
 */
object SpillwayConf {
  val Prefix: String = "spark.spillway."

  /** Written for a limit that must never be reached. */
  val Unlimited: String = "unlimited"

  /**
   * One byte-size setting: `allowUnlimited` accepts `unlimited` (Long.MaxValue), `minimum` is the
   * smallest value accepted.
   */
  private final case class ByteSetting(key: String, default: String, minimum: Long, allowUnlimited: Boolean) {
    def expected: String =
      (if (minimum > 0) "a positive byte size" else "a byte size") +
        " such as 512m or 10g (units b, k, m, g, t, p; binary, 1k = 1024)" +
        (if (allowUnlimited) s", or $Unlimited" else "")
  }

  val MaxTempDirectorySizeKey: String = "spark.spillway.maxTempDirectorySize"
  val MaxExecutorTempDirectorySizeKey: String = "spark.spillway.maxExecutorTempDirectorySize"
  val SortMemoryBudgetKey: String = "spark.spillway.sort.memoryBudget"

  private val MaxTempDirectorySize = ByteSetting(MaxTempDirectorySizeKey, "100g", 0, allowUnlimited = true)
  private val MaxExecutorTempDirectorySize = ByteSetting(MaxExecutorTempDirectorySizeKey, Unlimited, 0, allowUnlimited = true)

  // No cap by default, in either memory mode: the sort spills where Spark's own sort in the same
  // memory would (a cap made TPC-H queries spill that Spark's sort ran in memory). Its bytes are
  // native and granted by Spark before use: README "Memory" says what to size.
  private val SortMemoryBudget = ByteSetting(SortMemoryBudgetKey, Unlimited, 1, allowUnlimited = true)

  private val settings = Seq(MaxTempDirectorySize, MaxExecutorTempDirectorySize, SortMemoryBudget)

  // ---- The spill file format: executor-wide, read once per executor (SparkEnv). ----

  val CompressionCodecKey: String = "spark.spillway.compression.codec"
  val ZstdLevelKey: String = "spark.spillway.compression.zstd.level"
  /** The codecs of native spill files. */
  val Codecs: Seq[String] = Seq("none", "lz4", "zstd")

  /**
   * How native spill files are written: `codec` (none, lz4, zstd), `zstdLevel`, and whether they
   * are encrypted, with a key of `keyBits`.
   */
  final case class SpillFormat(codec: String, zstdLevel: Int, encrypt: Boolean, keyBits: Int)

  /**
   * The spill file format of an executor with `conf`: `spark.spillway.compression.codec` (default
   * lz4, as Spark's spills; `none` when `spark.shuffle.spill.compress` is false),
   * `spark.spillway.compression.zstd.level` (default Spark's `spark.io.compression.zstd.level`, 1),
   * and encryption as Spark's own: on with `spark.io.encryption.enabled`, the key size from
   * `spark.io.encryption.keySizeBits` (128 by default). The key itself is made in the executor's
   * memory and never written anywhere.
   *
   * @throws IllegalArgumentException naming the key and what to write instead, for a bad value
   */
  def spillFormat(conf: SparkConf): SpillFormat = {
    formatErrors(conf).headOption.foreach(e => throw new IllegalArgumentException(e))
    val codec =
      if (!conf.getBoolean("spark.shuffle.spill.compress", true)) "none"
      else conf.get(CompressionCodecKey, "lz4").trim.toLowerCase(Locale.ROOT)
    SpillFormat(codec, zstdLevel(conf).getOrElse(1), conf.getBoolean("spark.io.encryption.enabled", false),
      conf.getInt("spark.io.encryption.keySizeBits", 128))
  }

  private def zstdLevel(conf: SparkConf): Option[Int] =
    conf.getOption(ZstdLevelKey).orElse(conf.getOption("spark.io.compression.zstd.level")).flatMap(intValue)

  // String.toIntOption is Scala 2.13's.
  private def intValue(v: String): Option[Int] = scala.util.Try(v.trim.toInt).toOption

  private def formatErrors(conf: SparkConf): Seq[String] = {
    val codec = conf.getOption(CompressionCodecKey).filterNot(c => Codecs.contains(c.trim.toLowerCase(Locale.ROOT))).map { c =>
      s"Invalid value '$c' for $CompressionCodecKey: expected one of ${Codecs.mkString(", ")}"
    }
    val level = conf.getOption(ZstdLevelKey).orElse(conf.getOption("spark.io.compression.zstd.level")).filter { v =>
      intValue(v).forall(l => l < 1 || l > 22)
    }.map(v => s"Invalid zstd level '$v' for $ZstdLevelKey: expected an integer from 1 to 22")
    val bits = conf.getOption("spark.io.encryption.keySizeBits").filter(v => !Set("128", "192", "256").contains(v.trim))
      .map(v => s"Invalid value '$v' for spark.io.encryption.keySizeBits: expected 128, 192 or 256")
    (codec ++ level ++ bits).toSeq
  }

  // ---- The native sorts' memory cache: executor-wide, read once per executor (SparkEnv). ----

  /**
   * How long the memory a native sort gave back stays mapped, unused, for the next sorts of the
   * executor (NativeSpill.configureMemoryCache): a time as Spark's own (`60s`, `2min`, `500ms`; a
   * bare number is milliseconds); `0` turns the cache off.
   */
  val SortMemoryCacheIdleKey: String = "spark.spillway.sort.memoryCacheIdle"
  private val SortMemoryCacheIdleDefault = "60s"

  /**
   * The memory cache's idle time, in milliseconds, of an executor with `conf` ([[SortMemoryCacheIdleKey]]).
   *
   * @throws IllegalArgumentException naming the key and what to write instead, for a bad value
   */
  def sortMemoryCacheIdleMs(conf: SparkConf): Long = {
    memoryCacheErrors(conf).headOption.foreach(e => throw new IllegalArgumentException(e))
    timeMs(conf.get(SortMemoryCacheIdleKey, SortMemoryCacheIdleDefault)).get
  }

  private def timeMs(v: String): Option[Long] =
    scala.util.Try(JavaUtils.timeStringAsMs(v.trim)).toOption.filter(_ >= 0)

  private def memoryCacheErrors(conf: SparkConf): Seq[String] =
    conf.getOption(SortMemoryCacheIdleKey).filter(timeMs(_).isEmpty).map { v =>
      s"Invalid value '$v' for $SortMemoryCacheIdleKey: expected a time such as 60s, 2min or 500ms, or 0 for no cache"
    }.toSeq

  /** Whether SQL sorts run as the native sort (`spillway.SpillwayExtensions`); read per session. */
  val SqlSortEnabledKey: String = "spark.spillway.sql.sort.enabled"

  /**
   * Whether each SQL sort left to Spark's sort (keys the native sort cannot encode) is logged at
   * WARN rather than INFO, where PySpark's default log level shows it; read per session.
   */
  val SqlSortLogFallbacksKey: String = "spark.spillway.sql.sort.logFallbacks"

  /** The switches, true or false. */
  private val BooleanKeys = Seq(SqlSortEnabledKey, SqlSortLogFallbacksKey)

  /** The error for a value of the switch `key` other than true or false (any case, spaces around), if it is one. */
  def booleanError(key: String, value: String): Option[String] =
    if (Set("true", "false").contains(value.trim.toLowerCase(Locale.ROOT))) None
    else Some(s"Invalid value '$value' for $key: expected true or false")

  /** Every `spark.spillway.*` key Spillway reads; any other key under the prefix is a typo. */
  val KnownKeys: Seq[String] =
    settings.map(_.key) ++ Seq(CompressionCodecKey, ZstdLevelKey, SortMemoryCacheIdleKey) ++ BooleanKeys

  // Registered with SQLConf so that `spark.conf.set`/`SET` accept the keys per session (Spark
  // rejects session-level changes of keys registered only as core configs) and check the value
  // there with [[parse]]. Session values reach tasks as local properties, for SQL/Dataset actions
  // only. Each rejection says what to write instead (a checkValue's message would be fixed).
  private def register(s: ByteSetting, doc: String): Unit =
    SparkInternals.registerSessionConf(s.key, doc, "0.1.0", s.default) { v =>
      parse(s, v).left.foreach(e => throw new IllegalArgumentException(e))
    }

  register(MaxTempDirectorySize,
    "Limit on the bytes held in the live spill files of one native plan (one per task). A write " +
      "that would exceed it fails with SpillLimitExceededException. 0 refuses every write; " +
      "'unlimited' sets no limit. Read when a plan is created: the session value (SQL/Dataset " +
      "actions only) first, then the Spark conf.")

  // Opt-in (unlimited by default). Each plan keeps the value read at its creation, so no session
  // changes another's running plans.
  register(MaxExecutorTempDirectorySize,
    "Limit on the bytes held in the live spill files of all native plans of one executor " +
      "together, on top of each plan's own spark.spillway.maxTempDirectorySize. A write that " +
      "would exceed it fails with SpillLimitExceededException naming this key. Read when a plan " +
      "is created (the session value, for SQL/Dataset actions, first, then the Spark conf) and " +
      "fixed for that plan. Unlimited by default.")

  register(SortMemoryBudget,
    "A cap on the bytes of records one native sort holds in memory before it writes a sorted " +
      "run to disk. The sort takes its memory from the task's Spark execution memory as it grows, " +
      "and spills when Spark grants no more, asks for memory back, or the cap is reached; " +
      "'unlimited' (the default) sets no cap beyond Spark's grant. Read when a sort starts: the " +
      "session value (SQL/Dataset actions only) first, then the Spark conf.")

  /** The limit for a plan created now in `task`; see [[read]]. */
  def maxTempDirectorySize(task: TaskContext, conf: SparkConf): Long = read(MaxTempDirectorySize, task, conf)

  /** The executor-wide limit for a plan created now in `task`; see [[read]]. Unlimited by default. */
  def maxExecutorTempDirectorySize(task: TaskContext, conf: SparkConf): Long =
    read(MaxExecutorTempDirectorySize, task, conf)

  /** The cap on the memory of a native sort started now in `task` (Long.MaxValue: none, the default); see [[read]]. */
  def sortMemoryBudget(task: TaskContext, conf: SparkConf): Long = read(SortMemoryBudget, task, conf)

  /**
   * Checks every Spillway setting in `conf` (the driver's, at startup).
   *
   * @return warnings about `spark.spillway.*` keys Spillway does not know, each naming the closest
   *     known key
   * @throws IllegalArgumentException listing every bad value, each with what to write instead
   */
  def validate(conf: SparkConf): Seq[String] = {
    val errors = settings.flatMap(s => conf.getOption(s.key).flatMap(v => parse(s, v).left.toOption)) ++
      formatErrors(conf) ++ memoryCacheErrors(conf) ++ BooleanKeys.flatMap(k => conf.getOption(k).flatMap(booleanError(k, _)))
    if (errors.nonEmpty) throw new IllegalArgumentException(errors.mkString("; "))
    conf.getAll.map(_._1).sorted.toSeq.flatMap(unknownKeyWarning)
  }

  /** The warning for `key` if it is under `spark.spillway.` but not a key Spillway reads (a typo). */
  def unknownKeyWarning(key: String): Option[String] =
    if (!key.startsWith(Prefix) || KnownKeys.contains(key)) None
    else Some(s"$key is not a Spillway setting and is ignored; did you mean ${closestKnownKey(key)}? " +
      s"(Spillway reads ${KnownKeys.mkString(", ")})")

  // The unknown keys warned of in this JVM: a session key is seen on every query and job.
  private val warnedKeys = ConcurrentHashMap.newKeySet[String]()

  /**
   * The warnings for the unknown `spark.spillway.*` keys among `keys` that this JVM has not warned
   * of yet: each typo is told once, wherever it was set (spark-submit, `spark.conf.set`, `SET`).
   */
  def unknownKeyWarningsOnce(keys: Iterable[String]): Seq[String] =
    // Told keys cost a set lookup per call: the message (an edit distance per known key) is made once.
    keys.iterator.filter(k => k.startsWith(Prefix) && !KnownKeys.contains(k) && warnedKeys.add(k)).toSeq.sorted
      .flatMap(unknownKeyWarning)

  /** The known key nearest to `key` by edit distance (for a typo's warning). */
  def closestKnownKey(key: String): String = KnownKeys.minBy(k => editDistance(k.toLowerCase(Locale.ROOT), key.toLowerCase(Locale.ROOT)))

  private def editDistance(a: String, b: String): Int = {
    var previous = Array.tabulate(b.length + 1)(identity)
    for (i <- 1 to a.length) {
      val current = new Array[Int](b.length + 1)
      current(0) = i
      for (j <- 1 to b.length) {
        val substitution = previous(j - 1) + (if (a(i - 1) == b(j - 1)) 0 else 1)
        current(j) = math.min(substitution, math.min(previous(j), current(j - 1)) + 1)
      }
      previous = current
    }
    previous(b.length)
  }

  /**
   * The value of `s` for something created now in `task`: the task's local property (where SQL and
   * Dataset actions put the session conf) first, then `conf`, then the default.
   *
   * @throws IllegalArgumentException naming the key and the value as given if it is not valid;
   *     never falls back to the default silently
   */
  private def read(s: ByteSetting, task: TaskContext, conf: SparkConf): Long = {
    val value = valueSet(s.key, task, conf).getOrElse(s.default)
    parse(s, value) match {
      case Right(bytes) => bytes
      case Left(error) => throw new IllegalArgumentException(error)
    }
  }

  /** The value of `key` set for `task`: its local property (the session conf) first, then `conf`. */
  private def valueSet(key: String, task: TaskContext, conf: SparkConf): Option[String] =
    Option(task.getLocalProperty(key)).orElse(conf.getOption(key))

  private val Units: Map[String, Int] = Map(
    "" -> 0, "b" -> 0, "k" -> 1, "kb" -> 1, "m" -> 2, "mb" -> 2, "g" -> 3, "gb" -> 3, "t" -> 4, "tb" -> 4,
    "p" -> 5, "pb" -> 5)
  private val UnitNames = Seq("b", "k", "m", "g", "t", "p")
  private val SizePattern = """([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)""".r

  /**
   * Parses a byte size as Spark writes them (`512m`, `10g`, `100` for bytes; binary units), or
   * `unlimited` where allowed. Every rejection says what to write instead.
   */
  private def parse(s: ByteSetting, raw: String): Either[String, Long] = {
    def invalid(why: String) = Left(s"Invalid value '$raw' for ${s.key}: $why; expected ${s.expected}")
    val value = raw.trim.toLowerCase(Locale.ROOT)
    value match {
      case Unlimited if s.allowUnlimited => Right(Long.MaxValue)
      case Unlimited => invalid("this setting cannot be unlimited")
      case v if v.startsWith("-") => invalid("must not be negative")
      case SizePattern(number, unit) if Units.contains(unit) =>
        val bytes = BigDecimal(number) * BigDecimal(2).pow(10 * Units(unit))
        if (number.contains('.')) { // as in Spark's byte strings
          val exact = UnitNames.indices.reverse.map(i => bytes / BigDecimal(2).pow(10 * i) -> UnitNames(i))
            .collectFirst { case (n, u) if n.isWhole => s"${n.toBigInt}$u" }
          invalid(s"fractions are not supported${exact.fold("")(e => s" (write $e)")}")
        } else if (bytes > BigDecimal(Long.MaxValue)) {
          invalid(s"too large: the largest size is 8191p" +
            (if (s.allowUnlimited) s"; write $Unlimited for no limit" else ""))
        } else if (bytes < BigDecimal(s.minimum)) {
          invalid(if (s.minimum == 1) "must be positive" else s"must be at least ${s.minimum}")
        } else Right(bytes.toLongExact)
      case SizePattern(_, unit) => invalid(s"unknown unit '$unit'")
      case _ => invalid("not a size")
    }
  }
}
