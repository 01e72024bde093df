package spillway

import org.scalatest.funsuite.AnyFunSuite

/**
 * Runs NativeSpillContractSuite and NativeSortContractSuite (bad inputs included) in a child JVM under -Xcheck:jni, which makes
 * the JVM validate every JNI call of the library: fatal misuse aborts the child, other misuse
 * (e.g. a JNI call with an exception pending, local reference overflow) is printed as a warning with
 * the native method's frame. Either fails this test when it comes from spillway's natives.
 */
class XcheckJniSuite extends AnyFunSuite {
  test("the JNI contract suite passes under -Xcheck:jni without JNI warnings from spillway's natives") {
    val options = Seq("-Xcheck:jni", "-Xmx512m") ++ ChildJvm.libraryOption
    val result = ChildJvm.run(classOf[ContractSuiteMain].getName.stripSuffix("$"), options)
    val output = result.output
    withClue(s"child JVM output:\n$output\n") {
      assert(result.exitCode == 0)
      assert(output.contains("NativeSpillContractSuite"))
      assert(output.contains("NativeSortContractSuite"))
      assert(output.contains("JniBadInputMatrixSuite"))
      assert(output.contains("All tests passed"))
      // The cases that once overflowed or skipped JNI local references ran under the check.
      assert(output.contains("more than 32 createPlan calls with freshly built dir strings"))
      assert(output.contains("65,600 dirs"))
      assert(output.contains("many dirs in one call (4096)"))
      assert(XcheckJniSuite.spillwayJniWarnings(output).isEmpty)
    }
  }

  test("warnings are attributed to spillway only when the reporting frame is one of its natives") {
    val report =
      """WARNING in native method: JNI call made without checking exceptions when required to from CallObjectMethod
        |	at spillway.NativeSpill.createPlan(Native Method)
        |	at spillway.Foo.bar(Foo.java:1)
        |WARNING in native method: JNI call made without checking exceptions when required to from CallStaticVoidMethod
        |	at java.util.zip.Inflater.inflateBytesBytes(Native Method)
        |Warning: SIGSEGV handler modified!
        |""".stripMargin
    assert(XcheckJniSuite.spillwayJniWarnings(report) ==
      Seq("WARNING in native method: JNI call made without checking exceptions when required to from CallObjectMethod"))
  }
}

object XcheckJniSuite {
  /** -Xcheck:jni reports (warnings and fatal errors) whose first stack frame is a spillway native. */
  def spillwayJniWarnings(output: String): Seq[String] = {
    val lines = output.linesIterator.toVector
    lines.indices.collect {
      case i if lines(i).startsWith("WARNING") || lines(i).startsWith("FATAL ERROR in native method") =>
        val frame = lines.drop(i + 1).find(_.trim.nonEmpty).getOrElse("").trim
        (lines(i), frame)
    }.collect { case (report, frame) if frame.startsWith("at spillway.") => report }
  }
}

/** Entry point of the child JVM: runs the contract suite, exits 0 only if every test passed. */
class ContractSuiteMain
object ContractSuiteMain {
  def main(args: Array[String]): Unit = {
    val passed = org.scalatest.tools.Runner.run(Array("-oW", "-s", classOf[NativeSpillContractSuite].getName, "-s", classOf[NativeSortContractSuite].getName, "-s", classOf[JniBadInputMatrixSuite].getName))
    sys.exit(if (passed) 0 else 1)
  }
}
