package spillway

import java.io.{BufferedReader, InputStreamReader}
import java.nio.ByteBuffer

/**
 * A child JVM for NativeSpillContractSuite: holds a 320 MiB heap ByteBuffer, prints READY, waits
 * for a line on stdin (the parent lowers its address-space limit meanwhile), then writes the buffer
 * to a spill file and adds it to a native sort, printing what each call did. It must survive both.
 * Argument: the local dir.
 */
class HeapWriteChild
object HeapWriteChild {
  val Size: Int = 320 << 20

  def main(args: Array[String]): Unit = {
    NativeLoader.load()
    val plan = NativeSpill.createPlan(Array(args(0)), Long.MaxValue)
    val file = NativeSpill.createTmpFile(plan)
    val sort = NativeSpill.createSort(plan, 64L << 20)
    val buf = ByteBuffer.allocate(Size)
    var i = 0
    while (i < Size) { buf.put(i, (i >>> 12).toByte); i += 4096 } // touched, and not all zeros
    // Every code path once while memory is plentiful, so the limit meets only the large copies.
    NativeSpill.write(file, ByteBuffer.allocate(2 << 20), 0, 2 << 20)
    NativeSpill.sortAdd(sort, ByteBuffer.allocate(8), 0, 8, Long.MaxValue, null)
    println("READY")
    new BufferedReader(new InputStreamReader(System.in)).readLine()
    report("write") { NativeSpill.write(file, buf, 0, Size); s"wrote $Size" }
    report("sortAdd") { NativeSpill.sortAdd(sort, buf, 0, Size, Long.MaxValue, null); "added" }
    NativeSpill.releasePlan(plan)
    println("released")
  }

  private def report(what: String)(call: => String): Unit = {
    val outcome =
      try call
      catch { case t: Throwable => s"threw ${t.getClass.getName}: ${t.getMessage}" }
    println(s"$what: $outcome")
  }
}
