package spillway

import java.util.Locale
import java.util.concurrent.ConcurrentHashMap

import scala.collection.mutable.ListBuffer

import org.apache.spark.{SparkConf, TaskContext}
import org.apache.spark.network.util.JavaUtils
import org.apache.spark.spillway.SparkInternals
import org.apache.spark.sql.SparkSession

/**
 * Spillway's settings, each declared once (as Spark's ConfigBuilder declares Spark's): its key,
 * its type and check, its default, its scope (when and from where it is read) and its doc. Every
 * other use derives from the declarations: [[KnownKeys]] and the unknown-key warnings, the
 * driver's check ([[validate]]), the SQLConf registration of the settings a session may set, the
 * readers, and the configuration page (docs/user-guide/configuration.md, generated from
 * [[Settings]] and [[SparkKeys]]).
 *
 * Every value is checked with the same rules and messages wherever it is met: on the driver at
 * startup ([[validate]], called by the plugin's driver side, so spark-submit fails before any
 * executor starts), when a session sets a per-plan or per-sort setting (`spark.conf.set`/`SET`:
 * those keys are registered with SQLConf, which runs the same check), and when it is read (a job
 * local property set with `sc.setLocalProperty` reaches only the task). A bad value is an error,
 * never a silent default.
 */
object SpillwayConf {
  val Prefix: String = "spark.spillway."

  /** Written for a limit that must never be reached. */
  val Unlimited: String = "unlimited"

  // ---- Scopes: when a setting is read, and from where. ----

  /**
   * When and from where a setting is read: `name` for the configuration page's scope column,
   * `meaning` for its legend.
   */
  sealed abstract class Scope(val name: String, val meaning: String) {
    /**
     * Whether the setting is read in a task from its local properties (where SQL and Dataset
     * actions put a session's values) and so is registered with SQLConf: a session may set it,
     * and setting it runs the check.
     */
    def perTask: Boolean = false
  }

  object Scope {
    private def FromTask: String = "from the task's local property (where SQL and Dataset actions put the session's value, " +
      "set with `spark.conf.set` or `SET`, and `sc.setLocalProperty` a job's), else the Spark conf. A session value " +
      "is checked when it is set; it reaches SQL and Dataset actions only, not RDD actions"

    case object PerPlan extends Scope("per plan",
      s"Read when a task's plan is created (at its first native sort or spill file), $FromTask. Fixed for that plan.") {
      override def perTask: Boolean = true
    }

    case object PerSort extends Scope("per sort", s"Read when a native sort starts, $FromTask.") {
      override def perTask: Boolean = true
    }

    case object Executor extends Scope("executor",
      "Read once per executor, from the Spark conf (`--conf`), when its first plan is created; a session value " +
        "does not change it.")

    case object Driver extends Scope("driver",
      "Read once by the driver, from the Spark conf (`--conf`), when the application starts.")

    case object Session extends Scope("per session",
      "Read from the session's conf (`spark.conf.set`, `SET`, else the Spark conf) when a query is planned.")

    /** In the order of the configuration page's legend. */
    def All: Seq[Scope] = Seq(PerPlan, PerSort, Executor, Driver, Session)
  }

  // ---- Types: how a value is written, parsed and checked. ----

  /** How the values of a setting are written, and their one parser. */
  sealed abstract class ValueType[T] {
    /** What an error calls the value: "Invalid <noun> '<value>' for <key>: ...". */
    def noun: String = "value"

    /** The value written as `raw`, or what is wrong with it and what to write instead. */
    def parse(raw: String): Either[String, T]

    /** How a value is written, for the configuration page (Markdown). */
    def describe: String
  }

  /**
   * A byte size as Spark writes them (`512m`, `10g`, `100` for bytes; binary units), at least
   * `minimum`; `unlimited` (Long.MaxValue) where `allowUnlimited`.
   */
  final case class ByteSize(minimum: Long, allowUnlimited: Boolean) extends ValueType[Long] {
    private def expected: String =
      (if (minimum > 0) "a positive byte size" else "a byte size") +
        " such as 512m or 10g (units b, k, m, g, t, p; binary, 1k = 1024)" +
        (if (allowUnlimited) s", or $Unlimited" else "")

    def describe: String =
      (if (minimum > 0) "a positive byte size" else "a byte size") +
        " (`512m`, `10g`; binary units `b`, `k`, `m`, `g`, `t`, `p`; no fractions; at most `8191p`)" +
        (if (allowUnlimited) s", or `$Unlimited`" else "")

    def parse(raw: String): Either[String, Long] = {
      def invalid(why: String) = Left(s"$why; expected $expected")
      raw.trim.toLowerCase(Locale.ROOT) match {
        case Unlimited if allowUnlimited => Right(Long.MaxValue)
        case Unlimited => invalid("this setting cannot be unlimited")
        case v if v.startsWith("-") => invalid("must not be negative")
        case ByteSize.Pattern(number, unit) if ByteSize.Units.contains(unit) =>
          val bytes = BigDecimal(number) * BigDecimal(2).pow(10 * ByteSize.Units(unit))
          if (number.contains('.')) { // as in Spark's byte strings
            val exact = ByteSize.UnitNames.indices.reverse.map(i => bytes / BigDecimal(2).pow(10 * i) -> ByteSize.UnitNames(i))
              .collectFirst { case (n, u) if n.isWhole => s"${n.toBigInt}$u" }
            invalid(s"fractions are not supported${exact.fold("")(e => s" (write $e)")}")
          } else if (bytes > BigDecimal(Long.MaxValue)) {
            invalid(s"too large: the largest size is 8191p" + (if (allowUnlimited) s"; write $Unlimited for no limit" else ""))
          } else if (bytes < BigDecimal(minimum)) {
            invalid(if (minimum == 1) "must be positive" else s"must be at least $minimum")
          } else Right(bytes.toLongExact)
        case ByteSize.Pattern(_, unit) => invalid(s"unknown unit '$unit'")
        case _ => invalid("not a size")
      }
    }
  }

  object ByteSize {
    private val Units: Map[String, Int] = Map(
      "" -> 0, "b" -> 0, "k" -> 1, "kb" -> 1, "m" -> 2, "mb" -> 2, "g" -> 3, "gb" -> 3, "t" -> 4, "tb" -> 4,
      "p" -> 5, "pb" -> 5)
    private val UnitNames = Seq("b", "k", "m", "g", "t", "p")
    private val Pattern = """([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)""".r
  }

  /**
   * A duration as Spark writes them (`60s`, `2min`, `500ms`; a bare number is milliseconds), not
   * negative, in milliseconds; `expected` says what to write instead of a bad value.
   */
  final case class Time(expected: String, minimum: Long = 0) extends ValueType[Long] {
    def describe: String =
      s"a ${if (minimum > 0) "positive " else ""}time as Spark writes them (`60s`, `2min`, `500ms`; a bare number is milliseconds)"

    def parse(raw: String): Either[String, Long] =
      scala.util.Try(JavaUtils.timeStringAsMs(raw.trim)).toOption.filter(_ >= minimum).toRight(s"expected $expected")
  }

  /** A switch: `true` or `false`, in any case, spaces around. */
  case object Switch extends ValueType[Boolean] {
    def describe: String = "`true` or `false`"

    def parse(raw: String): Either[String, Boolean] = raw.trim.toLowerCase(Locale.ROOT) match {
      case "true" => Right(true)
      case "false" => Right(false)
      case _ => Left("expected true or false")
    }
  }

  /**
   * One of `values`, as written (spaces around), or in any case where `ignoreCase` (then read in
   * lower case); `listed` is how an error names them.
   */
  final case class OneOf(values: Seq[String], ignoreCase: Boolean, listed: String) extends ValueType[String] {
    def describe: String = values.map(v => s"`$v`").mkString("one of ", ", ", "")

    def parse(raw: String): Either[String, String] = {
      val v = if (ignoreCase) raw.trim.toLowerCase(Locale.ROOT) else raw.trim
      if (values.contains(v)) Right(v) else Left(s"expected $listed")
    }
  }

  /** An integer from `min` to `max`; an error calls the value a `noun`. */
  final case class IntRange(min: Int, max: Int, override val noun: String) extends ValueType[Int] {
    def describe: String = s"an integer from $min to $max"

    // String.toIntOption is Scala 2.13's.
    def parse(raw: String): Either[String, Int] =
      scala.util.Try(raw.trim.toInt).toOption.filter(l => l >= min && l <= max).toRight(s"expected an integer from $min to $max")
  }

  /** Text as written (spaces around dropped); any value is valid. */
  final case class Text(describe: String) extends ValueType[String] {
    def parse(raw: String): Either[String, String] = Right(raw.trim)
  }

  /** The remote tier's store: `s3a://bucket/prefix` or `s3://bucket/prefix`, or empty for none. */
  case object StoreUri extends ValueType[String] {
    private val Pattern = """s3a?://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^?#]*)?""".r
    override def noun: String = "URI"
    def describe: String = "`s3a://bucket/prefix` or `s3://bucket/prefix` (the prefix optional), or empty for no remote tier"
    def parse(raw: String): Either[String, String] = raw.trim match {
      case "" => Right("")
      case v @ Pattern(_) => Right(v)
      case _ => Left("expected s3a://bucket/prefix or s3://bucket/prefix (a bucket name of lower-case letters, digits, dots and hyphens)")
    }
  }

  // ---- The declaration. ----

  /**
   * One setting: `key`, its `valueType` (the parser and check), its `default` as written, its
   * `scope`, its `doc` (Markdown, one paragraph) and, for a setting whose default is a Spark key's
   * value, the Spark key it `follows`. `checked` is false for a Spark key that Spillway reads as
   * Spark does, leaving its check to Spark.
   */
  final class Setting[T] private[SpillwayConf] (val key: String, val valueType: ValueType[T], val default: String,
      val scope: Scope, val doc: String, val follows: Option[String], val checked: Boolean) {
    /** The default, parsed: a declaration with a bad default fails at once. */
    val defaultValue: T = valueOf(default)

    /** The default for the configuration page (Markdown). */
    def defaultDoc: String = follows.fold(s"`$default`")(spark => s"Spark's `$spark` (`$default`)")

    /** The value written as `raw`, or the error naming the key, the value as given and what to write instead. */
    def check(raw: String): Either[String, T] =
      valueType.parse(raw).left.map(why => s"Invalid ${valueType.noun} '$raw' for $key: $why")

    /** @throws IllegalArgumentException with [[check]]'s message if `raw` is not valid */
    def valueOf(raw: String): T = check(raw).fold(e => throw new IllegalArgumentException(e), identity)

    /** The value as set in `conf`: this key, else the Spark key it follows. */
    def setIn(conf: SparkConf): Option[String] = conf.getOption(key).orElse(follows.flatMap(conf.getOption))

    /** The error for the value set in `conf`, if it is not valid. */
    def error(conf: SparkConf): Option[String] = setIn(conf).flatMap(check(_).left.toOption)

    /**
     * The value in `conf` (an executor's, for [[Scope.Executor]]), else the default.
     *
     * @throws IllegalArgumentException naming the key and the value as given if it is not valid
     */
    def in(conf: SparkConf): T = valueOf(setIn(conf).getOrElse(default))

    /**
     * The value for something created now in `task` ([[Scope.PerPlan]], [[Scope.PerSort]]): the
     * task's local property (where SQL and Dataset actions put the session conf) first, then
     * `conf`, then the default.
     *
     * @throws IllegalArgumentException naming the key and the value as given if it is not valid;
     *     never falls back to the default silently
     */
    def in(task: TaskContext, conf: SparkConf): T =
      valueOf(Option(task.getLocalProperty(key)).orElse(setIn(conf)).getOrElse(default))

    /**
     * The value in `session` ([[Scope.Session]]), else the default.
     *
     * @throws IllegalArgumentException naming the key and the value as given if it is not valid
     */
    def in(session: SparkSession): T = valueOf(session.conf.getOption(key).getOrElse(default))

    override def toString: String = key
  }

  private val declaredSettings = ListBuffer.empty[Setting[_]]
  private val declaredSparkKeys = ListBuffer.empty[Setting[_]]

  /** Declares the setting `key` (under [[Prefix]]): its scope and doc, then its type, then its default. */
  private def setting(key: String, scope: Scope): Declaration = {
    require(key.startsWith(Prefix), key)
    new Declaration(key, scope, declaredSettings, checked = true)
  }

  /** Declares a Spark key Spillway reads (an executor's, from the Spark conf); `checked` if Spillway checks it. */
  private def sparkKey(key: String, checked: Boolean): Declaration = {
    require(!key.startsWith(Prefix), key)
    new Declaration(key, Scope.Executor, declaredSparkKeys, checked)
  }

  private final class Declaration(key: String, scope: Scope, into: ListBuffer[Setting[_]], checked: Boolean,
      docText: String = "", follows: Option[String] = None) {
    /** The doc, one paragraph of Markdown: the text's white space is collapsed. */
    def doc(text: String): Declaration =
      new Declaration(key, scope, into, checked, text.trim.replaceAll("\\s+", " "), follows)

    /** The default is `spark`'s value where that Spark key is set. */
    def followingSpark(spark: String): Declaration = new Declaration(key, scope, into, checked, docText, Some(spark))

    def bytes(minimum: Long = 0, allowUnlimited: Boolean = false): Typed[Long] = typed(ByteSize(minimum, allowUnlimited))
    def time(expected: String, minimum: Long = 0): Typed[Long] = typed(Time(expected, minimum))
    def switch: Typed[Boolean] = typed(Switch)
    def oneOf(values: Seq[String], ignoreCase: Boolean, listed: String): Typed[String] = typed(OneOf(values, ignoreCase, listed))
    def intRange(min: Int, max: Int, noun: String = "value"): Typed[Int] = typed(IntRange(min, max, noun))
    def text(describe: String): Typed[String] = typed(Text(describe))
    def storeUri: Typed[String] = typed(StoreUri)

    private def typed[T](t: ValueType[T]): Typed[T] = new Typed[T] {
      def withDefault(default: String): Setting[T] = {
        require(docText.nonEmpty, s"$key has no doc")
        val s = new Setting[T](key, t, default, scope, docText, follows, checked)
        into += s
        s
      }
    }
  }

  private sealed trait Typed[T] {
    def withDefault(default: String): Setting[T]
  }

  // ---- Spillway's settings, in the order of the configuration page. ----

  val MaxTempDirectorySize: Setting[Long] = setting("spark.spillway.maxTempDirectorySize", Scope.PerPlan)
    .doc("""Bytes one plan (one task) may hold in its live spill files. A write that would pass it fails with
      `SpillLimitExceededException`, which names this key. `unlimited` sets no limit; `0` refuses every write to a
      spill file (a way to make a job that must never spill fail loudly).""")
    .bytes(allowUnlimited = true)
    .withDefault("100g")

  // Opt-in (unlimited by default). Each plan keeps the value read at its creation, so no session
  // changes another's running plans.
  val MaxExecutorTempDirectorySize: Setting[Long] = setting("spark.spillway.maxExecutorTempDirectorySize", Scope.PerPlan)
    .doc("""Bytes all plans of one executor may hold together in their live spill files, on top of each plan's own
      `spark.spillway.maxTempDirectorySize`. A write that would pass it fails with `SpillLimitExceededException`,
      which names this key. `unlimited` and `0` as for the plan's limit. Each plan keeps the value read at its
      creation: a session that sets another value changes only the plans it creates afterwards, never one already
      running in another session.""")
    .bytes(allowUnlimited = true)
    .withDefault(Unlimited)

  // No cap by default, in either memory mode: the sort spills where Spark's own sort in the same
  // memory would (a cap made TPC-H queries spill that Spark's sort ran in memory). Its bytes are
  // native and granted by Spark before use: docs/user-guide/memory.md says what to size.
  val SortMemoryBudget: Setting[Long] = setting("spark.spillway.sort.memoryBudget", Scope.PerSort)
    .doc("""A cap on the bytes of records one native sort holds in memory before it writes a sorted run. Below it
      the sort holds what Spark's memory manager grants it (it acquires execution memory as it grows, as Spark's own
      sorter does) and spills when Spark grants no more or asks for memory back; `unlimited`, the default in both
      memory modes, leaves it to Spark's grant alone, so the sort spills where Spark's own would. A cap makes it
      spill earlier, and bounds what each sort holds natively (for sizing executors in on-heap mode).""")
    .bytes(minimum = 1, allowUnlimited = true)
    .withDefault(Unlimited)

  /**
   * How long the memory a native sort gave back stays mapped, unused, for the next sorts of the
   * executor (NativeSpill.configureMemoryCache). Off (`0`) by default: freed memory goes back to
   * the OS at once, so a sort's memory ends with its task; the cache is an opt-in.
   */
  val SortMemoryCacheIdle: Setting[Long] = setting("spark.spillway.sort.memoryCacheIdle", Scope.Executor)
    .doc("""How long memory a native sort freed stays mapped, unused, for the executor's next sorts to take (the
      `nativeCachedBytes` gauge). `0`, the default, turns the cache off: freed native sort memory goes back to the
      OS at once, so a sort's memory ends with its task. The cache is an opt-in for executors whose sorts follow
      one another closely: it spares the next sort the kernel's clearing of fresh pages on first touch, which in a
      virtual machine whose host reclaims freed guest memory cost a sort up to hundreds of milliseconds of system
      time. What it costs an executor's sizing when on: the memory it keeps, up to what the executor's sorts held
      at their peak, stays mapped outside Spark's memory accounting for up to this idle time after the sorts free
      it (advised `MADV_FREE`, so the kernel takes it back first when memory is short); count it in the
      container's memory overhead.""")
    .time("a time such as 60s, 2min or 500ms, or 0 for no cache")
    .withDefault("0")

  /** The codecs of native spill files. */
  val Codecs: Seq[String] = Seq("none", "lz4", "zstd")

  val CompressionCodec: Setting[String] = setting("spark.spillway.compression.codec", Scope.Executor)
    .doc("""Codec of native spill files (the native sort's runs, framed `SpillFile`s), as Spark compresses its own
      spills: each chunk compressed, then checked by CRC-32C or sealed with AES-GCM. `none` when Spark's
      `spark.shuffle.spill.compress` is `false`.""")
    .oneOf(Codecs, ignoreCase = true, listed = s"one of ${Codecs.mkString(", ")}")
    .withDefault("lz4")

  val ZstdLevel: Setting[Int] = setting("spark.spillway.compression.zstd.level", Scope.Executor)
    .doc("""The zstd level of native spill files written with the `zstd` codec.""")
    .followingSpark("spark.io.compression.zstd.level")
    .intRange(1, 22, noun = "zstd level")
    .withDefault("1")

  val SqlSortEnabled: Setting[Boolean] = setting("spark.spillway.sql.sort.enabled", Scope.Session)
    .doc("""With `spark.sql.extensions=spillway.SpillwayExtensions`: run eligible SQL sorts as the native sort;
      `false` leaves every sort of the session to Spark's own sort.""")
    .switch
    .withDefault("true")

  val SqlSortLogFallbacks: Setting[Boolean] = setting("spark.spillway.sql.sort.logFallbacks", Scope.Session)
    .doc("""With the extension: log each SQL sort left to Spark's sort (keys the native sort cannot encode), with
      its keys and why, at WARN, where PySpark's default log level shows it, instead of INFO; once per sort of a
      query.""")
    .switch
    .withDefault("false")

  val UiUpdateInterval: Setting[Long] = setting("spark.spillway.ui.updateInterval", Scope.Executor)
    .doc("""With the plugin: how often each executor sends its state (local dirs and their free space, bytes in live
      spill files and their peak, the library's counters) to the driver, which posts it to the event log and the
      Spillway tab when it changed; once more when the executor stops. `0` sends it at the stop only.""")
    .time("a time such as 10s, 1min or 500ms, or 0 for the update at executor stop only")
    .withDefault("10s")

  val RemoteUri: Setting[String] = setting("spark.spillway.remote.uri", Scope.Executor)
    .doc("""An object store behind the local dirs ([remote spill](remote-spill.md)): a native spill file that no
      local dir can take (every dir full, given up or out of the rotation) goes there, sealed with AES-GCM, and is
      deleted with its plan. Endpoint, region and credentials are the application's `spark.hadoop.fs.s3a.*` keys.
      The executor's plugin probes the store at start (one small object written and removed) and fails the
      executor, naming the key to fix, if it cannot. Empty: no remote tier.""")
    .storeUri
    .withDefault("")

  val RemoteMaxSize: Setting[Long] = setting("spark.spillway.remote.maxSize", Scope.Executor)
    .doc("""Bytes all plans of one executor may hold together in remote spill files, on top of the plan's and
      the executor's limits. A write that would pass it fails with `SpillLimitExceededException`, which names this
      key.""")
    .bytes(allowUnlimited = true)
    .withDefault(Unlimited)

  /**
   * The age past which the driver's sweep takes another application's remote prefix for a killed
   * one's. The driver marks its own prefix alive every quarter of it (RemoteMarksPerAge).
   */
  val RemoteOrphanAge: Setting[Long] = setting("spark.spillway.remote.orphanAge", Scope.Driver)
    .doc("""With `spark.spillway.remote.uri`: at its start, the driver removes what killed applications left in the
      store, every application prefix of Spillway's under the URI whose newest object is older than this (by the
      store's clock), and it marks its own prefix alive every quarter of it. Applications that share a URI must
      share this age; give it well above the longest pause of a driver. At its end the driver removes its own
      prefix.""")
    .time("a positive time such as 1h or 30min", minimum = 1)
    .withDefault("1h")

  // ---- The Spark keys Spillway follows: executor-wide, read once per executor (SparkEnv). ----

  val ShuffleSpillCompress: Setting[Boolean] = sparkKey("spark.shuffle.spill.compress", checked = false)
    .doc("""When `false`, native spill files are not compressed (`spark.spillway.compression.codec` reads as
      `none`), as Spark's own spills.""")
    .switch
    .withDefault("true")

  val SparkZstdLevel: Setting[Int] = sparkKey("spark.io.compression.zstd.level", checked = false)
    .doc("""The zstd level of native spill files where `spark.spillway.compression.zstd.level` is not set;
      checked by Spillway as that key, on the driver and the executor (1 to 22).""")
    .intRange(1, 22, noun = "zstd level")
    .withDefault("1")

  val EncryptionEnabled: Setting[Boolean] = sparkKey("spark.io.encryption.enabled", checked = false)
    .doc("""When `true`, native spill files are sealed with AES-GCM under a key made in the executor's memory and
      never written anywhere.""")
    .switch
    .withDefault("false")

  val EncryptionKeySizeBits: Setting[String] = sparkKey("spark.io.encryption.keySizeBits", checked = true)
    .doc("""The size of the AES key of encrypted native spill files, in bits; checked by Spillway on the driver and
      the executor (128, 192 or 256).""")
    .oneOf(Seq("128", "192", "256"), ignoreCase = false, listed = "128, 192 or 256")
    .withDefault("128")

  // Hadoop's S3A keys, as an application gives them to Spark (spark.hadoop.*): read for the remote
  // tier, per bucket first (fs.s3a.bucket.<bucket>.<key>) as S3A does, and checked by nobody but S3A.
  val S3AEndpoint: Setting[String] = sparkKey("spark.hadoop.fs.s3a.endpoint", checked = false)
    .doc("""The remote tier's endpoint (`host:port` or a URL); empty for AWS S3.""")
    .text("an endpoint")
    .withDefault("")

  val S3ARegion: Setting[String] = sparkKey("spark.hadoop.fs.s3a.endpoint.region", checked = false)
    .doc("""The remote tier's region; empty lets the client ask the store.""")
    .text("a region")
    .withDefault("")

  val S3AAccessKey: Setting[String] = sparkKey("spark.hadoop.fs.s3a.access.key", checked = false)
    .doc("""The remote tier's access key, with `spark.hadoop.fs.s3a.secret.key`; both empty take the standard
      credential chain (the `AWS_*` environment, the shared credentials file, web identity, the container's or the
      instance's role). Never logged.""")
    .text("an access key")
    .withDefault("")

  val S3ASecretKey: Setting[String] = sparkKey("spark.hadoop.fs.s3a.secret.key", checked = false)
    .doc("""The remote tier's secret key, with `spark.hadoop.fs.s3a.access.key`. Never logged.""")
    .text("a secret key")
    .withDefault("")

  val S3APathStyle: Setting[Boolean] = sparkKey("spark.hadoop.fs.s3a.path.style.access", checked = false)
    .doc("""`true`: path-style requests to the remote tier (most S3-compatible stores want them); `false` lets the
      client choose by the endpoint's host.""")
    .switch
    .withDefault("false")

  val S3ASsl: Setting[Boolean] = sparkKey("spark.hadoop.fs.s3a.connection.ssl.enabled", checked = false)
    .doc("""TLS to a remote tier endpoint given without a scheme.""")
    .switch
    .withDefault("true")

  /** Every `spark.spillway.*` setting, in declaration order. */
  val Settings: Seq[Setting[_]] = declaredSettings.toList

  /** The Spark keys Spillway reads, in declaration order. */
  val SparkKeys: Seq[Setting[_]] = declaredSparkKeys.toList

  // ---- The keys and the accessors other code uses. ----

  val MaxTempDirectorySizeKey: String = MaxTempDirectorySize.key
  val MaxExecutorTempDirectorySizeKey: String = MaxExecutorTempDirectorySize.key
  val SortMemoryBudgetKey: String = SortMemoryBudget.key
  val SortMemoryCacheIdleKey: String = SortMemoryCacheIdle.key
  val CompressionCodecKey: String = CompressionCodec.key
  val ZstdLevelKey: String = ZstdLevel.key

  /** Whether SQL sorts run as the native sort (`spillway.SpillwayExtensions`); read per session. */
  val SqlSortEnabledKey: String = SqlSortEnabled.key

  /**
   * Whether each SQL sort left to Spark's sort (keys the native sort cannot encode) is logged at
   * WARN rather than INFO, where PySpark's default log level shows it; read per session.
   */
  val SqlSortLogFallbacksKey: String = SqlSortLogFallbacks.key

  /** Every `spark.spillway.*` key Spillway reads; any other key under the prefix is a typo. */
  val KnownKeys: Seq[String] = Settings.map(_.key)

  /** The limit for a plan created now in `task` (a task's read: see [[Setting]]). */
  def maxTempDirectorySize(task: TaskContext, conf: SparkConf): Long = MaxTempDirectorySize.in(task, conf)

  /** The executor-wide limit for a plan created now in `task`. Unlimited by default. */
  def maxExecutorTempDirectorySize(task: TaskContext, conf: SparkConf): Long = MaxExecutorTempDirectorySize.in(task, conf)

  /** The cap on the memory of a native sort started now in `task` (Long.MaxValue: none, the default). */
  def sortMemoryBudget(task: TaskContext, conf: SparkConf): Long = SortMemoryBudget.in(task, conf)

  /**
   * How native spill files are written: `codec` (none, lz4, zstd), `zstdLevel`, and whether they
   * are encrypted, with a key of `keyBits`.
   */
  final case class SpillFormat(codec: String, zstdLevel: Int, encrypt: Boolean, keyBits: Int)

  private val FormatSettings: Seq[Setting[_]] = Seq(CompressionCodec, ZstdLevel, EncryptionKeySizeBits)

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
    FormatSettings.flatMap(_.error(conf)).headOption.foreach(e => throw new IllegalArgumentException(e))
    // Spark's own keys as Spark reads them.
    val codec =
      if (!conf.getBoolean(ShuffleSpillCompress.key, ShuffleSpillCompress.defaultValue)) "none"
      else CompressionCodec.in(conf)
    SpillFormat(codec, ZstdLevel.in(conf), conf.getBoolean(EncryptionEnabled.key, EncryptionEnabled.defaultValue),
      EncryptionKeySizeBits.in(conf).toInt)
  }

  /**
   * The memory cache's idle time, in milliseconds, of an executor with `conf` ([[SortMemoryCacheIdle]]);
   * 0, no cache, by default.
   *
   * @throws IllegalArgumentException naming the key and what to write instead, for a bad value
   */
  def sortMemoryCacheIdleMs(conf: SparkConf): Long = SortMemoryCacheIdle.in(conf)

  /**
   * The remote tier of an executor: its settings for NativeSpill.configureRemote. Its toString
   * shows no credential.
   */
  final class RemoteTier private[SpillwayConf] (val uri: String, val settings: Array[String], val pathStyle: Boolean,
      val ssl: Boolean, val maxSize: Long) {
    override def toString: String = s"$uri (at most ${if (maxSize == Long.MaxValue) Unlimited else s"$maxSize bytes"})"
  }

  /**
   * The remote tier of an application with `conf` ([[RemoteUri]]), or None when the URI is not set;
   * its files go under the prefix of `application` (the name the driver's plugin chose).
   * The S3A keys are read per bucket first, as S3A reads them; a switch that is not `true` or
   * `false` reads as its default, as Hadoop reads it.
   *
   * @throws IllegalArgumentException naming the key, for a bad URI or size
   */
  def remoteTier(conf: SparkConf, application: String): Option[RemoteTier] = {
    val uri = RemoteUri.in(conf)
    if (uri.isEmpty) return None
    val bucket = uri.split("/")(2)
    def s3a(s: Setting[_]): Option[String] = {
      val name = s.key.stripPrefix("spark.hadoop.fs.s3a.")
      conf.getOption(s"spark.hadoop.fs.s3a.bucket.$bucket.$name").orElse(conf.getOption(s.key)).map(_.trim)
    }
    def switch(s: Setting[Boolean]): Boolean = s3a(s).flatMap(Switch.parse(_).toOption).getOrElse(s.defaultValue)
    val settings = Array(uri) ++ Seq(S3AEndpoint, S3ARegion, S3AAccessKey, S3ASecretKey).map(s3a(_).getOrElse("")) :+
      application
    Some(new RemoteTier(uri, settings, switch(S3APathStyle), switch(S3ASsl), RemoteMaxSize.in(conf)))
  }

  /**
   * Checks every Spillway setting in `conf` (the driver's, at startup), and the Spark keys Spillway
   * checks.
   *
   * @return warnings about `spark.spillway.*` keys Spillway does not know, each naming the closest
   *     known key
   * @throws IllegalArgumentException listing every bad value, each with what to write instead
   */
  def validate(conf: SparkConf): Seq[String] = {
    val errors = (Settings ++ SparkKeys.filter(_.checked)).flatMap(_.error(conf))
    if (errors.nonEmpty) throw new IllegalArgumentException(errors.mkString("; "))
    conf.getAll.map(_._1).sorted.toSeq.flatMap(unknownKeyWarning)
  }

  // ---- Unknown keys. ----

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

  // ---- Registration. ----

  // The settings read in a task are registered with SQLConf, so that `spark.conf.set`/`SET` accept
  // them per session (Spark rejects session-level changes of keys registered only as core configs)
  // and check the value there with the setting's own check. Session values reach tasks as local
  // properties, for SQL/Dataset actions only. Each rejection says what to write instead (a
  // checkValue's message would be fixed). The per-session switches are read from the session
  // itself when a query is planned.
  Settings.filter(_.scope.perTask).foreach { s =>
    SparkInternals.registerSessionConf(s.key, s"${s.doc} ${s.scope.meaning}", "0.1.0", s.default)(v => { s.valueOf(v); () })
  }
}
