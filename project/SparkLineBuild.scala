import java.io.File

import sbt.io.IO

/** One Spark line of project/spark-lines: its jar is spillway-spark<line>_<scalaBinary>. */
final case class SparkLineBuild(line: String, scalaBinary: String, spark: String, scala: String) {
  /** The sbt project id: spark35_212. */
  def id: String = s"spark${line.replace(".", "")}_${scalaBinary.replace(".", "")}"
  /** The artifact name before its Scala suffix: spillway-spark3.5 (published as spillway-spark3.5_2.12). */
  def name: String = s"spillway-spark$line"
  def artifact: String = s"${name}_$scalaBinary"
}

object SparkLineBuild {
  /** The lines of `file`, in order; the last is the primary line. */
  def all(file: File): Seq[SparkLineBuild] = IO.readLines(file)
    .map(_.trim).filter(l => l.nonEmpty && !l.startsWith("#"))
    .map(_.split("\\s+") match {
      case Array(line, scalaBinary, spark, scala) => SparkLineBuild(line, scalaBinary, spark, scala)
      case other => sys.error(s"$file: expected `line scala-binary spark scala`, got `${other.mkString(" ")}`")
    })
}
