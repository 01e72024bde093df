package spillway

import org.apache.spark.unsafe.Platform
import org.scalatest.funsuite.AnyFunSuite

/** How records get into a native batch: the copy that goes by words for short lengths. */
class SortBatchSuite extends AnyFunSuite {

  /** `body` with `bytes` of native memory, freed after. */
  private def withNative[T](bytes: Int)(body: Long => T): T = {
    val address = Platform.allocateMemory(bytes.toLong)
    try body(address) finally Platform.freeMemory(address)
  }

  private def nativeBytes(address: Long, length: Int): Array[Byte] = {
    val out = new Array[Byte](length)
    Platform.copyMemory(null, address, out, Platform.BYTE_ARRAY_OFFSET, length.toLong)
    out
  }

  test("copyTo copies every length, from any offset of an array or of native memory, and nothing past it") {
    val source = Array.tabulate[Byte](200)(i => (i * 7 + 1).toByte)
    withNative(512) { dst =>
      withNative(source.length) { native =>
        Platform.copyMemory(source, Platform.BYTE_ARRAY_OFFSET, null, native, source.length.toLong)
        for (length <- 0 to 100; from <- 0 to 9; to <- Seq(0, 1, 3, 8); fromNative <- Seq(false, true)) {
          Platform.setMemory(dst, 0x55.toByte, 512L)
          if (fromNative) SortBatch.copyTo(null, native + from, dst + to, length)
          else SortBatch.copyTo(source, Platform.BYTE_ARRAY_OFFSET + from, dst + to, length)
          val got = nativeBytes(dst, 512)
          val where = s"length $length from $from to $to${if (fromNative) " (native source)" else ""}"
          assert(got.slice(to, to + length).toSeq == source.slice(from, from + length).toSeq, where)
          assert(got.take(to).forall(_ == 0x55.toByte), s"$where: a byte before the destination written")
          assert(got.drop(to + length).forall(_ == 0x55.toByte), s"$where: a byte past the length written")
        }
      }
    }
  }

  test("put writes a record that the batch format reads back") {
    val key = Array[Byte](1, 2, 3, 4, 5, 6, 7, 8, 9)
    val value = Array.tabulate[Byte](24)(i => (100 + i).toByte)
    withNative(64) { at =>
      SortBatch.put(at, key, value)
      assert(SortBatch.keyLength(at) == 9 && SortBatch.valueLength(at) == 24)
      assert(nativeBytes(at + SortBatch.HeaderBytes, 9).toSeq == key.toSeq)
      assert(nativeBytes(at + SortBatch.HeaderBytes + 9, 24).toSeq == value.toSeq)
    }
  }
}
