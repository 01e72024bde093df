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
