package spillway

import java.nio.file.{Files, Path}

import scala.sys.process._

import org.scalatest.Assertions

/** Real filesystems for the suites that need them: a tmpfs of a given size, mounted as root. */
object RealMounts extends Assertions {
  /** A root-only test (mounts) cancels without root, but fails under CI=true, where root is given. */
  def requireRoot(): Unit =
    if (Seq("id", "-u").!!.trim != "0") {
      if (sys.env.get("CI").contains("true")) fail("this test needs root (mount), and CI=true promises it")
      else cancel("needs root to mount a tmpfs")
    }

  /** A fresh tmpfs mounted at a temp dir with `options` (size=16m, noexec, ...), unmounted and removed afterwards. */
  def withTmpfs[T](options: String)(body: Path => T): T = {
    requireRoot()
    val dir = Files.createTempDirectory("spillway-tmpfs-")
    try {
      val mount = Seq("mount", "-t", "tmpfs", "-o", options, "tmpfs", dir.toString)
      assert(mount.! == 0, s"${mount.mkString(" ")} failed")
      try body(dir)
      finally assert(Seq("umount", dir.toString).! == 0, s"umount $dir failed")
    } finally TestFiles.deleteRecursively(dir)
  }

  /** Writes zeros to a new file at `path` until its filesystem is full; returns the bytes written. */
  def fill(path: Path): Long = {
    val out = Files.newOutputStream(path)
    val zeros = new Array[Byte](64 << 10)
    var written = 0L
    try {
      while (true) { out.write(zeros); written += zeros.length }
      written
    } catch {
      case e: java.io.IOException if e.getMessage.contains("No space left on device") => written
    } finally {
      try out.close()
      catch { case _: java.io.IOException => () } // the buffered tail cannot fit either
    }
  }
}
