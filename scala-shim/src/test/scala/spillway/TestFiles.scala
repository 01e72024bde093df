package spillway

import java.io.File
import java.nio.file.{Files, Path, Paths}
import java.nio.file.attribute.PosixFilePermissions
import java.util.Comparator
import java.util.concurrent.TimeUnit

import scala.util.Using

/** Filesystem and process helpers shared by the suites; also used inside Spark tasks. */
object TestFiles {
  val SpillDirPrefix = "spillway-"

  /**
   * Every `spillway-*` directory anywhere under `roots`. Tolerates entries disappearing while it
   * looks (Spark writes and deletes its own files in the same dirs).
   */
  def spillDirsUnder(roots: Seq[String]): Seq[String] = {
    def walk(dir: File): Seq[File] = {
      val children = Option(dir.listFiles()).toSeq.flatten.filter(_.isDirectory)
      children.filter(_.getName.startsWith(SpillDirPrefix)) ++
        children.filterNot(_.getName.startsWith(SpillDirPrefix)).flatMap(walk)
    }
    roots.flatMap(r => walk(new File(r))).map(_.getPath).sorted
  }

  /** All entries under `root` (recursively), relative to it. */
  def entriesUnder(root: Path): Seq[String] =
    if (!Files.exists(root)) Seq.empty
    else Using.resource(Files.walk(root)) { s =>
      s.filter(_ != root).map[String](p => root.relativize(p).toString).toArray(n => new Array[String](n)).toSeq.sorted
    }

  def permissions(path: String): String =
    PosixFilePermissions.toString(Files.getPosixFilePermissions(Paths.get(path)))

  def parentOf(path: String): String = new File(path).getParent

  def exists(path: String): Boolean = Files.exists(Paths.get(path))

  def size(path: String): Long = Files.size(Paths.get(path))

  /**
   * Deletes `path` and everything below it. Spark's threads may still create or delete entries
   * below it for a moment after `SparkSession.stop()`, so a pass that meets a change is tried
   * again, for up to 5 s; what is still there then is an error naming it.
   */
  def deleteRecursively(path: Path): Unit = {
    val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5)
    var last: Throwable = null
    while (Files.exists(path, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
      try {
        Using.resource(Files.walk(path)) { paths =>
          paths.sorted(Comparator.reverseOrder[Path]()).forEach(p => Files.deleteIfExists(p))
        }
      } catch {
        case e @ (_: java.io.IOException | _: java.io.UncheckedIOException) =>
          last = e
          if (System.nanoTime() > deadline) {
            throw new java.io.IOException(s"could not delete $path within 5 s", last)
          }
          Thread.sleep(50)
      }
    }
  }

  /** `n` bytes of a pattern that differs per `seed`, so misplaced or reordered bytes show. */
  def pattern(n: Int, seed: Int = 0): Array[Byte] = Array.tabulate[Byte](n)(i => ((i * 31 + seed * 7) ^ (i >>> 8)).toByte)

  /** A throwable and its causes (and their suppressed exceptions), outermost first. */
  def causeChain(t: Throwable): Seq[Throwable] =
    Iterator.iterate(t)(_.getCause).takeWhile(_ != null).take(50).toSeq

  /** How a child JVM ended ([[ChildJvm.run]]): its exit code, its stdout and stderr together. */
  final case class ProcessResult(exitCode: Int, output: String)
}
