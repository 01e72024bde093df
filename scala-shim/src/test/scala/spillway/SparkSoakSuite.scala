package spillway

import org.scalatest.funsuite.AnyFunSuite

/**
 * The Spark soak of docs/reliability.md: runs SparkSoak in a child JVM (its own Spark in local mode, its
 * own resident memory to measure) and passes only if the child's checks all hold: nothing left
 * under the local dirs, no live plan or byte in the library, no leak-like growth of VmRSS or the Go
 * heap.
 *
 * About two minutes by default; SOAK_SECONDS (environment) or -Dspillway.soak.seconds sets how long
 * the loop runs (`make soak` runs 600 s), SOAK_SEED / -Dspillway.soak.seed the seed.
 */
class SparkSoakSuite extends AnyFunSuite {
  private def setting(env: String, prop: String): Option[String] =
    sys.env.get(env).filter(_.nonEmpty).orElse(sys.props.get(prop))

  test("Spark tasks that spill, sort, fail and get cancelled for a bounded time leave nothing behind and leak nothing") {
    val seconds = setting("SOAK_SECONDS", "spillway.soak.seconds").getOrElse("90").toLong
    val options = Seq("-Xms1g", "-Xmx1g", "-XX:+AlwaysPreTouch", s"-Dspillway.soak.seconds=$seconds") ++
      setting("SOAK_SEED", "spillway.soak.seed").map(s => s"-Dspillway.soak.seed=$s")
    val child = ChildJvm.start(SparkSoak.getClass.getName.stripSuffix("$"), options,
      echo = line => line.startsWith("soak:") || line.startsWith("SOAK") || line.contains("Exception"))
    try {
      // Generous: start-up, warm-up, the loop, the leak check's top-up and Spark's stop.
      val exit = child.waitFor(seconds + 600)
      // The soak's own lines and the last of the rest (Spark logs every planned task failure).
      val output = child.output.linesIterator.toVector
      val shown = (output.filter(_.startsWith("soak:")) ++ Seq("...") ++ output.takeRight(200)).mkString("\n")
      withClue(s"soak output:\n$shown\n") {
        assert(child.output.contains("SOAK PASSED"))
        assert(exit == 0)
      }
    } finally child.destroy()
  }
}
