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

  // Every vector in the folder, none by a hard-coded name: a new one is checked, never skipped.
  private val files: Seq[String] = Option(vectors.toFile.list()).toSeq.flatten.sorted
  private val names: Seq[String] = files.filter(_.endsWith(".in")).map(_.stripSuffix(".in"))

  test("the vectors are there, each NAME.in with its NAME.out and nothing else") {
    assert(Files.isDirectory(vectors), s"$vectors is missing: tests run from the repository root")
    assert(names.nonEmpty)
    assert(files.toSet == names.flatMap(n => Seq(s"$n.in", s"$n.out")).toSet,
      s"every file of $vectors is a NAME.in or NAME.out of a pair: $files")
  }

  for (name <- names; budget <- Seq("1k", "64m")) {
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
