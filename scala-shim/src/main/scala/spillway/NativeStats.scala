package spillway

import scala.collection.immutable.VectorMap

/**
 * One read of the library's process-wide counters ([[NativeSpill.stats]]), by name
 * ([[NativeSpill.statsNames]]). They are Spillway's only counters: they count every plan, file
 * and sort of the JVM, whoever made it (tasks, native sorts, direct users of [[NativeSpill]]),
 * and the plugin exports exactly them as metrics.
 */
final case class NativeStats(values: VectorMap[String, Long]) { // in the library's order
  /** @throws IllegalArgumentException if the library has no counter of that name */
  def apply(name: String): Long =
    values.getOrElse(name, throw new IllegalArgumentException(s"no native counter named $name; there are ${values.keys.mkString(", ")}"))

  /** What changed since `earlier` (for counts; a level's difference is its change too). */
  def -(earlier: NativeStats): NativeStats = NativeStats(values.map { case (n, v) => n -> (v - earlier(n)) })
}

object NativeStats {
  /** The counters now. Loads the library. */
  def read(): NativeStats = {
    NativeLoader.load() // the descriptive load error, rather than NativeSpill's class init failure
    val out = new Array[Long](NativeSpill.STATS_LENGTH)
    NativeSpill.stats(out)
    NativeStats(NativeSpill.statsNames().iterator.zip(out).to(VectorMap))
  }
}
