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

  /** The executor-wide limit for a plan created now in `task`; see [[read]]. Unlimited by default. */
  def maxExecutorTempDirectorySize(task: TaskContext, conf: SparkConf): Long =
    read(MAX_EXECUTOR_TEMP_DIRECTORY_SIZE, "a non-negative byte size such as 50g", task, conf)

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

  /** The memory budget of a native sort started now in `task`; see [[read]]. */
  def sortMemoryBudget(task: TaskContext, conf: SparkConf): Long =
    read(SORT_MEMORY_BUDGET, "a positive byte size such as 64m", task, conf)

  /** The limit for a plan created now in `task`; see [[read]]. */
  def maxTempDirectorySize(task: TaskContext, conf: SparkConf): Long =
    read(MAX_TEMP_DIRECTORY_SIZE, "a non-negative byte size such as 10g", task, conf)

  /**
   * The value of `entry` for something created now in `task`: the task's local property (where
   * SQL and Dataset actions put the session conf) first, then `conf`, then the default.
   *
   * @throws IllegalArgumentException naming the key and the value as given if it is not
   *     `expected`; never falls back to the default silently
   */
  private def read(entry: ConfigEntry[Long], expected: String, task: TaskContext, conf: SparkConf): Long =
    Option(task.getLocalProperty(entry.key)).orElse(conf.getOption(entry.key)) match {
      case Some(value) =>
        try entry.valueConverter(value)
        catch {
          // Spark's own message shows a negative value converted ("-1073741824b"): name it as given.
          case e: IllegalArgumentException =>
            throw new IllegalArgumentException(
              s"Invalid value '$value' for ${entry.key}: expected $expected (${e.getMessage})", e)
        }
      case None => entry.defaultValue.get
    }
}
