package spillway

import java.io.{BufferedReader, InputStreamReader, PrintWriter}
import java.lang.management.ManagementFactory
import java.nio.charset.StandardCharsets
import java.nio.file.Paths
import java.util.concurrent.{LinkedBlockingQueue, TimeUnit}

import scala.jdk.CollectionConverters._

/**
 * A JVM started from a test, with this JVM's classpath, that the test talks to line by line
 * (stdin/stdout) and may kill. Its output (stdout and stderr together) is kept for failure
 * messages (and the lines `echo` selects are printed as they come). Every wait is bounded so
 * that a wedged child fails the test instead of hanging it.
 */
final class ChildJvm private (val process: Process, command: Seq[String], echo: String => Boolean) {
  private val lines = new LinkedBlockingQueue[String]()
  private val transcript = new StringBuffer
  private val stdin = new PrintWriter(process.getOutputStream, true)

  private val reader = new Thread(() => {
    val in = new BufferedReader(new InputStreamReader(process.getInputStream, StandardCharsets.UTF_8))
    Iterator.continually(in.readLine()).takeWhile(_ != null).foreach { line =>
      transcript.append(line).append('\n')
      if (echo(line)) println(s"[child ${process.pid()}] $line")
      lines.put(line)
    }
  }, s"child-jvm-${process.pid()}-output")
  reader.setDaemon(true)
  reader.start()

  def pid: Long = process.pid()

  /** The command without the classpath, which is too long to help in a failure message. */
  private def shortCommand: String = {
    val i = command.indexOf("-cp")
    (if (i >= 0) command.patch(i, Seq("-cp", "<test classpath>"), 2) else command).mkString(" ")
  }

  /** Everything the child printed so far. */
  def output: String = transcript.toString

  def send(line: String): Unit = stdin.println(line)

  /** The first line from now on that starts with `prefix`, or an AssertionError with the transcript. */
  def awaitLine(prefix: String, timeoutSeconds: Long = 120): String = {
    val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds)
    while (true) {
      val left = deadline - System.nanoTime()
      val line = if (left > 0) lines.poll(left, TimeUnit.NANOSECONDS) else null
      if (line == null) {
        throw new AssertionError(s"no line starting with '$prefix' from child ${pid} (alive=${process.isAlive}) " +
          s"within ${timeoutSeconds}s; command: $shortCommand\noutput:\n$output")
      }
      if (line.startsWith(prefix)) return line
    }
    throw new IllegalStateException("unreachable")
  }

  /** SIGKILL, as `kill -9`: no shutdown hook, no finally, no release runs in the child. Returns the exit code. */
  def kill9(): Int = {
    process.toHandle.destroyForcibly() // SIGKILL on Linux
    waitFor(60)
  }

  /** Waits for the child to exit; its exit code, or an AssertionError if it does not exit in time. */
  def waitFor(timeoutSeconds: Long): Int = {
    if (!process.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
      process.destroyForcibly()
      throw new AssertionError(s"child $pid did not exit within ${timeoutSeconds}s; output:\n$output")
    }
    reader.join(TimeUnit.SECONDS.toMillis(10))
    process.exitValue()
  }

  /** Closes the child's stdin: it reads end of input. */
  def closeInput(): Unit = stdin.close()

  /** Kills the child if it still runs (for finally blocks). */
  def destroy(): Unit = if (process.isAlive) { process.destroyForcibly(); process.waitFor(30, TimeUnit.SECONDS) }
}

object ChildJvm {
  /** The exit code of a JVM killed by SIGKILL, as Process reports it on Linux (128 + 9). */
  val KilledBySigkill = 137

  /** This JVM's options that a child running Spark needs too: the module opens Spark needs on Java 17, logging. */
  def sparkOptions: Seq[String] =
    ManagementFactory.getRuntimeMXBean.getInputArguments.asScala.toSeq.filter { a =>
      a.startsWith("--add-opens") || a.startsWith("-Djdk.reflect") || a.startsWith("-Dio.netty") ||
      a.startsWith("-Dlog4j2.configurationFile")
    }

  /** This JVM's `-Dspillway.library.path`, if set: the child loads the same library. */
  def libraryOption: Seq[String] =
    sys.props.get(NativeLoader.LIBRARY_PATH_PROPERTY).map(p => s"-D${NativeLoader.LIBRARY_PATH_PROPERTY}=$p").toSeq

  /** Starts `mainClass` with [[sparkOptions]], [[libraryOption]] and `jvmOptions`. */
  def start(mainClass: String, jvmOptions: Seq[String], args: Seq[String] = Nil,
      echo: String => Boolean = _ => false): ChildJvm =
    launch(mainClass, sparkOptions ++ libraryOption ++ jvmOptions, args, echo)

  /**
   * Runs `mainClass` with only `jvmOptions` to its end, with no input; its exit code and output.
   * The wait is bounded only so that a hung child fails the test instead of hanging the build.
   */
  def run(mainClass: String, jvmOptions: Seq[String], args: Seq[String] = Nil,
      classpath: String = sys.props("java.class.path")): TestFiles.ProcessResult = {
    val child = launch(mainClass, jvmOptions, args, _ => false, classpath)
    try {
      child.closeInput()
      TestFiles.ProcessResult(child.waitFor(TimeUnit.MINUTES.toSeconds(5)), child.output)
    } finally child.destroy()
  }

  // With this JVM's classpath unless told otherwise; the test run's tmpdir (removed after it)
  // first, so that a child's own -Djava.io.tmpdir wins.
  private def launch(mainClass: String, jvmOptions: Seq[String], args: Seq[String], echo: String => Boolean,
      classpath: String = sys.props("java.class.path")): ChildJvm = {
    val java = Paths.get(sys.props("java.home"), "bin", "java").toString
    val tmpdir = s"-Djava.io.tmpdir=${sys.props("java.io.tmpdir")}"
    val command = Seq(java, tmpdir) ++ jvmOptions ++ Seq("-cp", classpath, mainClass) ++ args
    val process = new ProcessBuilder(command: _*).redirectErrorStream(true).start()
    new ChildJvm(process, command, echo)
  }
}
