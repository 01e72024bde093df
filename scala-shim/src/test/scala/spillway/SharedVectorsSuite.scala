package spillway

import java.nio.{ByteBuffer, ByteOrder}
import java.nio.file.{Files, Path, Paths}

import org.scalatest.funsuite.AnyFunSuite

/**
 * The golden batches of testdata/sort, shared with the Go sort's tests: the JVM side must encode
 * records into, and decode them from, exactly the bytes the Go side reads and writes. Each input is
 * sorted by NativeSort in a real Spark task, with a budget that spills and one that does not, and
 * the result, encoded, must equal the .out file byte for byte.
 */
class SharedVectorsSuite extends AnyFunSuite with LocalSpark {
  private val vectors: Path = Paths.get(sys.props("user.dir"), "testdata", "sort")
  override protected def master: String = "local[1]"

  test("the vectors are there") {
    assert(Files.isDirectory(vectors), s"$vectors is missing: tests run from the repository root")
    assert(names.nonEmpty)
  }

  for (name <- Seq("edges", "ties", "random"); budget <- Seq("1k", "64m")) {
    test(s"$name: NativeSort with a $budget budget gives $name.out byte for byte") {
      val input = Files.readAllBytes(vectors.resolve(s"$name.in"))
      val want = Files.readAllBytes(vectors.resolve(s"$name.out"))
      val records = SharedVectorsSuite.decode(input)
      assert(SortBatch.encode(records).sameElements(input), "SortBatch.encode and this decoder round-trip")

      val sorted = withLocalProperty(SpillwayConf.SortMemoryBudgetKey, budget) {
        sc.parallelize(records, 1).mapPartitions(NativeSort.sort).collect().toSeq
      }
      val got = SortBatch.encode(sorted)
      assert(got.sameElements(want), s"$name sorted by the JVM side differs from $name.out")
    }
  }

  private def names: Seq[String] =
    Option(vectors.toFile.list()).toSeq.flatten.filter(_.endsWith(".in"))
}

object SharedVectorsSuite {
  /** Decodes a batch (u32 keyLen | u32 valueLen | key | value, little-endian), independently of the shim. */
  def decode(batch: Array[Byte]): Seq[(Array[Byte], Array[Byte])] = {
    val buf = ByteBuffer.wrap(batch).order(ByteOrder.LITTLE_ENDIAN)
    val out = Seq.newBuilder[(Array[Byte], Array[Byte])]
    while (buf.hasRemaining) {
      val key = new Array[Byte](buf.getInt())
      val value = new Array[Byte](buf.getInt())
      buf.get(key).get(value)
      out += key -> value
    }
    out.result()
  }
}
