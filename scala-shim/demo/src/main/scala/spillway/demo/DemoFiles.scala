package spillway.demo

import java.io.{File, OutputStream}

/** What both demos write through a plan and look for on disk afterwards. */
object DemoFiles {
  /** Writes `bytes` bytes of a repeating pattern (seeded, so tasks write different bytes) to `out`. */
  def writePattern(out: OutputStream, bytes: Long, seed: Int): Unit = {
    val chunk = Array.tabulate[Byte](64 * 1024)(i => (i * 31 + seed).toByte)
    var left = bytes
    while (left > 0) {
      val n = math.min(left, chunk.length.toLong).toInt
      out.write(chunk, 0, n)
      left -= n
    }
  }

  /**
   * Spillway's entries directly inside `dirs`, where plans create their dirs: plan dirs
   * (`spillway-*`), and with `ownerLocks` their owner locks (`.spillway-*.owner`) too.
   */
  def spillwayEntries(dirs: Seq[String], ownerLocks: Boolean): Seq[String] =
    dirs.flatMap { dir =>
      Option(new File(dir).listFiles()).toSeq.flatten
        .filter(f => f.getName.startsWith("spillway-") || (ownerLocks && f.getName.startsWith(".spillway-")))
        .map(_.getPath)
    }
}
