package spillway

import java.io.{BufferedReader, InputStreamReader}
import java.nio.ByteBuffer
import java.nio.charset.StandardCharsets
import java.util.concurrent.atomic.{AtomicBoolean, AtomicLong}

/**
 * A second executor-like JVM for OrphanSweepSuite. It talks over stdin/stdout, one line each way.
 *
 *   hold <dir>        a plan over <dir> that spills without pause on a writer thread (files of up
 *                     to 4 MiB, released and replaced), printing `ready <plan dir> <file>` once it
 *                     is writing; then on stdin: `spill` creates one more file and prints
 *                     `spilled <path>`; `release` stops, releases the plan, prints `released`
 *                     and exits 0. It is meant to be killed with SIGKILL at any point.
 *   churn <dir> <n>   n plan lifecycles (create, one file, 4 KiB, release) as fast as it can,
 *                     then prints `churned <n> failures <k> unowned <u> <first failure>` and
 *                     exits (u: plan dirs seen without their owner lock file on disk).
 */
object SpillChild {
  def main(args: Array[String]): Unit = {
    NativeLoader.load()
    args.toSeq match {
      case Seq("hold", dir) => hold(dir)
      case Seq("churn", dir, n) => churn(dir, n.toInt)
      case other =>
        System.err.println(s"usage: hold <dir> | churn <dir> <n>; got: ${other.mkString(" ")}")
        sys.exit(2)
    }
  }

  private def hold(dir: String): Unit = {
    val plan = NativeSpill.createPlan(Array(dir), 1L << 30)
    // The first file is kept for the plan's life, so a kill at any instant leaves a spill file,
    // even between the writer's release of one rotating file and the creation of the next.
    val first = NativeSpill.createTmpFile(plan)
    val firstPath = NativeSpill.path(first)
    NativeSpill.write(first, ByteBuffer.allocateDirect(4096), 0, 4096)
    val planDir = new java.io.File(firstPath).getParent
    val stop = new AtomicBoolean(false)
    val writes = new AtomicLong
    val writer = new Thread(() => {
      val chunk = ByteBuffer.allocateDirect(64 * 1024)
      var file = NativeSpill.createTmpFile(plan)
      var size = 0L
      try {
        while (!stop.get) {
          NativeSpill.write(file, chunk, 0, chunk.capacity)
          size += chunk.capacity
          writes.incrementAndGet()
          if (size >= 4L * 1024 * 1024) {
            NativeSpill.releaseTmpFile(file)
            file = NativeSpill.createTmpFile(plan)
            size = 0
          }
        }
      } catch {
        case t: Throwable => println(s"writer failed: $t") // the test waits for `ready` and sees this instead
      }
    }, "spill-writer")
    writer.start()
    while (writes.get < 20) Thread.sleep(1)
    println(s"ready $planDir $firstPath")
    val in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))
    var line = in.readLine()
    while (line != null && line != "release") {
      if (line == "spill") {
        val f = NativeSpill.createTmpFile(plan)
        NativeSpill.write(f, ByteBuffer.allocate(1000), 0, 1000)
        println(s"spilled ${NativeSpill.path(f)}")
      }
      line = in.readLine()
    }
    // `release`, or the test's end of stdin: leave nothing behind either way.
    stop.set(true)
    writer.join()
    NativeSpill.releasePlan(plan)
    println("released")
  }

  private def churn(dir: String, n: Int): Unit = {
    var failures = 0
    var unowned = 0
    var firstFailure = ""
    val buf = ByteBuffer.allocateDirect(4096)
    for (_ <- 1 to n) {
      val plan = NativeSpill.createPlan(Array(dir), 1L << 30)
      try {
        val file = NativeSpill.createTmpFile(plan)
        NativeSpill.write(file, buf, 0, buf.capacity)
        // The plan dir's owner lock must be on disk while the plan lives, or a sweep after a
        // crash could never find the dir.
        val planDir = java.nio.file.Paths.get(NativeSpill.path(file)).getParent
        if (!java.nio.file.Files.exists(planDir.resolveSibling(s".${planDir.getFileName}.owner"))) unowned += 1
      } catch {
        case e: java.io.IOException =>
          failures += 1
          if (firstFailure.isEmpty) firstFailure = e.toString.replace('\n', ' ')
      } finally NativeSpill.releasePlan(plan)
    }
    println(s"churned $n failures $failures unowned $unowned $firstFailure")
  }
}
