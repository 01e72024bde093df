package spillway

import java.io.IOException
import java.nio.file.{DirectoryIteratorException, Files, LinkOption, Path, Paths}

import scala.jdk.CollectionConverters._
import scala.util.Using
import scala.util.control.NonFatal

/**
 * The executor's sweep of orphaned plan dirs, the dirs that executors killed without releasing
 * their plans left on this host ([[SpillwayExecutorPlugin]] runs it at start): which block
 * manager dirs to look in, and the sweep of each through [[NativeSpill.sweepOrphans]].
 */
object OrphanSweep {
  /**
   * The executor's block manager dirs and their siblings: every `blockmgr-*` directory (a real
   * one, not a symlink) directly inside the parent of one of `localDirs`, the `localDirs`
   * themselves included. Cluster managers give each application its own parent (standalone's
   * `executor-*` app dirs, YARN's `appcache/<app>`), so the siblings are the dirs of this
   * application's earlier executors on this host, which is where a killed executor's orphans are.
   * With `spark.local.dir` used directly (local mode, no cluster manager dirs) they are those of
   * every Spark JVM on the host using the same dir. Dirs this process cannot list (another user's)
   * are skipped.
   *
   * @return the dirs, and the parents that could not be listed (with why)
   */
  def blockManagerDirs(localDirs: Seq[String]): (Seq[String], Seq[String]) = {
    val own = localDirs.map(d => Paths.get(d).toAbsolutePath.normalize)
    val failures = Seq.newBuilder[String]
    val siblings = own.flatMap(d => Option(d.getParent)).distinct.flatMap { root =>
      try {
        Using.resource(Files.newDirectoryStream(root, "blockmgr-*")) { entries =>
          entries.asScala.filter(isSweepable).toVector
        }
      } catch {
        case e @ (_: IOException | _: DirectoryIteratorException) =>
          failures += s"$root: $e"
          Vector.empty
      }
    }
    ((own ++ siblings).map(_.toString).distinct.sorted, failures.result())
  }

  private def isSweepable(p: Path): Boolean =
    Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS) && Files.isReadable(p) && Files.isExecutable(p)

  /**
   * Removes orphaned plan dirs directly inside each of `dirs` (one call per dir, so that one
   * unusable dir does not hide what was removed in the others).
   *
   * @return how many plan dirs were removed, and the dirs that failed (with why)
   */
  def sweep(dirs: Seq[String]): (Int, Seq[String]) = {
    var removed = 0
    val failures = Seq.newBuilder[String]
    dirs.foreach { dir =>
      try removed += NativeSpill.sweepOrphans(Array(dir))
      catch {
        case NonFatal(e) => failures += s"$dir: ${e.getMessage}"
      }
    }
    (removed, failures.result())
  }
}
