package org.apache.spark.spillway

import org.apache.spark.{SparkConf, TaskContext}
import org.apache.spark.internal.config.ConfigEntry
import org.apache.spark.network.util.ByteUnit
import org.apache.spark.sql.internal.SQLConf

/** Spillway's configuration keys, parsed by Spark's config machinery. */
object SpillwayConf {
  val MaxTempDirectorySizeKey: String = "spark.spillway.maxTempDirectorySize"

  // Registered through SQLConf.buildConf (a ConfigBuilder that also registers with SQLConf) so that
  // `spark.conf.set`/`SET` accept the key per session: Spark rejects session-level changes of keys
  // registered only as core configs. Session values reach tasks as local properties.
  private[spark] val MAX_TEMP_DIRECTORY_SIZE: ConfigEntry[Long] =
    SQLConf
      .buildConf(MaxTempDirectorySizeKey)
      .doc("Limit on the bytes held in the live spill files of one native plan (one per task). " +
        "A write that would exceed it fails with SpillLimitExceededException. Read when a plan " +
        "is created: the session value first, then the Spark conf.")
      .version("0.1.0")
      .bytesConf(ByteUnit.BYTE)
      .checkValue(_ >= 0, "must not be negative")
      .createWithDefaultString("100g")

  val MaxExecutorTempDirectorySizeKey: String = "spark.spillway.maxExecutorTempDirectorySize"

  // Opt-in (unlimited by default). Registered like the per-plan key so sessions may set it; each
  // plan keeps the value read at its creation, so no session changes another's running plans.
  private[spark] val MAX_EXECUTOR_TEMP_DIRECTORY_SIZE: ConfigEntry[Long] =
    SQLConf
      .buildConf(MaxExecutorTempDirectorySizeKey)
      .doc("Limit on the bytes held in the live spill files of all native plans of one executor " +
        "together, on top of each plan's own spark.spillway.maxTempDirectorySize. A write that " +
        "would exceed it fails with SpillLimitExceededException naming this key. Read when a plan " +
        "is created (the session value first, then the Spark conf) and fixed for that plan. " +
        "Unlimited by default.")
      .version("0.1.0")
      .bytesConf(ByteUnit.BYTE)
      .checkValue(_ >= 0, "must not be negative")
      .createWithDefault(Long.MaxValue)

  /**
   * The executor-wide limit for a plan created now in `task`, read like [[maxTempDirectorySize]]:
   * the task's local property first, then `conf`, then the default (`Long.MaxValue`, unlimited).
   *
   * @throws IllegalArgumentException naming the key and the value if the value is not a valid
   *     byte size
   */
  def maxExecutorTempDirectorySize(task: TaskContext, conf: SparkConf): Long =
    Option(task.getLocalProperty(MaxExecutorTempDirectorySizeKey))
      .orElse(conf.getOption(MaxExecutorTempDirectorySizeKey)) match {
      case Some(value) =>
        try MAX_EXECUTOR_TEMP_DIRECTORY_SIZE.valueConverter(value)
        catch {
          case e: IllegalArgumentException =>
            throw new IllegalArgumentException(
              s"Invalid value '$value' for $MaxExecutorTempDirectorySizeKey: expected a " +
                s"non-negative byte size such as 50g (${e.getMessage})",
              e)
        }
      case None => MAX_EXECUTOR_TEMP_DIRECTORY_SIZE.defaultValue.get
    }

  val SortMemoryBudgetKey: String = "spark.spillway.sort.memoryBudget"

  private[spark] val SORT_MEMORY_BUDGET: ConfigEntry[Long] =
    SQLConf
      .buildConf(SortMemoryBudgetKey)
      .doc("Most bytes of records one native sort holds in memory before it writes a sorted run " +
        "to disk. The sort also takes its memory from the task's Spark execution memory, so it " +
        "spills earlier when Spark grants less. Read when a sort starts: the session value " +
        "first, then the Spark conf.")
      .version("0.1.0")
      .bytesConf(ByteUnit.BYTE)
      .checkValue(_ > 0, "must be positive")
      .createWithDefaultString("64m")

  /**
   * The memory budget of a native sort started now in `task`: the task's local property first,
   * then `conf`, then the default.
   *
   * @throws IllegalArgumentException naming the key and the value if the value is not a positive
   *     byte size
   */
  def sortMemoryBudget(task: TaskContext, conf: SparkConf): Long =
    Option(task.getLocalProperty(SortMemoryBudgetKey)).orElse(conf.getOption(SortMemoryBudgetKey)) match {
      case Some(value) =>
        try SORT_MEMORY_BUDGET.valueConverter(value)
        catch {
          case e: IllegalArgumentException =>
            throw new IllegalArgumentException(
              s"Invalid value '$value' for $SortMemoryBudgetKey: expected a positive byte size " +
                s"such as 64m (${e.getMessage})",
              e)
        }
      case None => SORT_MEMORY_BUDGET.defaultValue.get
    }

  /**
   * The limit for a plan created now in `task`: the task's local property (where SQL and Dataset
   * actions put the session conf) first, then `conf`, then the default.
   *
   * @throws IllegalArgumentException naming the key and the value if the value is not a valid
   *     byte size; never falls back to the default silently
   */
  def maxTempDirectorySize(task: TaskContext, conf: SparkConf): Long =
    Option(task.getLocalProperty(MaxTempDirectorySizeKey)).orElse(conf.getOption(MaxTempDirectorySizeKey)) match {
      case Some(value) => parseMaxTempDirectorySize(value)
      case None => MAX_TEMP_DIRECTORY_SIZE.defaultValue.get
    }

  /** Parses a byte size such as `10g` with Spark's config machinery. */
  def parseMaxTempDirectorySize(value: String): Long =
    try MAX_TEMP_DIRECTORY_SIZE.valueConverter(value)
    catch {
      // Spark's own message shows a negative value converted ("-1073741824b"): name it as given.
      case e: IllegalArgumentException =>
        throw new IllegalArgumentException(
          s"Invalid value '$value' for $MaxTempDirectorySizeKey: expected a non-negative byte size " +
            s"such as 10g (${e.getMessage})",
          e)
    }
}
