package spillway

import scala.collection.immutable.ListMap

/**
 * One read of the library's process-wide counters, by name: the one reader of
 * [[NativeSpill.stats]] in the JVM (the plugin's metrics read through it too). They are
 * Spillway's only counters: they count every plan, file and sort of the JVM, whoever made it
 * (tasks, native sorts, direct users of [[NativeSpill]]). The library owns the list, its names,
 * kinds and meanings (`StatsLayout` in plan/stats.go); nothing here writes it down.
 */
final case class NativeStats(values: ListMap[String, Long]) { // in the library's order (ListMap: Scala 2.12 has no VectorMap)
  /** @throws IllegalArgumentException if the library has no counter of that name */
  def apply(name: String): Long =
    values.getOrElse(name, throw new IllegalArgumentException(s"no native counter named $name; there are ${values.keys.mkString(", ")}"))

  /** What changed since `earlier` (for counts; a level's difference is its change too). */
  def -(earlier: NativeStats): NativeStats = NativeStats(values.map { case (n, v) => n -> (v - earlier(n)) })

  /** `name=value` for each counter, in the library's order. */
  override def toString: String = values.map { case (n, v) => s"$n=$v" }.mkString(", ")
}

object NativeStats {
  /** The counters' names, in the library's order ([[NativeSpill.statsNames]]). Loads the library. */
  lazy val names: IndexedSeq[String] = {
    NativeLoader.load() // the descriptive load error, rather than NativeSpill's class init failure
    NativeSpill.statsNames().toIndexedSeq
  }

  /**
   * The names of the counters that only grow while the process lives ([[NativeSpill.statsKinds]]
   * `count`: report their rate); the others (`level`) go up and down. Loads the library.
   */
  lazy val countNames: Set[String] = {
    NativeLoader.load()
    names.iterator.zip(NativeSpill.statsKinds().iterator).collect { case (name, "count") => name }.toSet
  }

  /** The counters now, read at one moment (one JNI call). Loads the library. */
  def read(): NativeStats = {
    val out = new Array[Long](names.size)
    NativeSpill.stats(out)
    NativeStats(ListMap(names.zip(out): _*))
  }
}
