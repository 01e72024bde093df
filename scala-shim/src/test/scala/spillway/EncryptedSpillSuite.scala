package spillway

import java.io.File
import java.nio.charset.StandardCharsets
import java.nio.file.{Files, NoSuchFileException}

import scala.util.Using

import org.scalatest.funsuite.AnyFunSuite



/** What one task saw while it ran. */
final case class EncryptionObservation(
    spillFiles: Int, // files under the plan dirs while the task held its runs and its framed file
    filesWithMarker: Seq[String], // any file under the local dirs holding the plaintext marker
    sortedRight: Boolean,
    readBackRight: Boolean,
    framedBytesOnDisk: Long,
    framedBytesWritten: Long)

/**
 * With `spark.io.encryption.enabled=true`, what the native sort spills and what a TaskSpill user
 * writes to a framed file never reach the disk in the clear: a known plaintext marker is found in
 * no file under the executor's local dirs while the task runs (runs and file still on disk), and
 * the sort's output and the file read back through the library are right.
 */
class EncryptedSpillSuite extends AnyFunSuite with LocalSpark {
  override protected def sparkConf: Map[String, String] = Map(
    "spark.io.encryption.enabled" -> "true",
    "spark.io.encryption.keySizeBits" -> "256",
    SpillwayConf.SortMemoryBudgetKey -> "256k")

  test("a plaintext marker written through the sort and TaskSpill is in no file under the local dirs") {
    val roots = this.roots
    val seen = sc.parallelize(0 until 2, 2).mapPartitions { it =>
      val p = it.next()
      val marker = EncryptedSpillSuite.Marker.getBytes(StandardCharsets.US_ASCII)
      val records = (0 until 60000).map { i =>
        (f"${(i * 7919 + p) % 60000}%08d".getBytes(StandardCharsets.US_ASCII), marker ++ f"-$i%06d".getBytes(StandardCharsets.US_ASCII))
      }
      val sorted = NativeSort.sort(records.iterator)
      assert(sorted.hasNext) // every record is added now: the runs are on disk until the output is read

      val file = TaskSpill.plan().createSpillFile()
      val payload = Array.fill(20000)(marker).flatten
      Using.resource(file.outputStream())(_.write(payload))
      file.finishWrite()

      val spillFiles = TestFiles.spillDirsUnder(roots).flatMap(d => Option(new File(d).listFiles()).toSeq.flatten)
      val withMarker = roots.flatMap(r => EncryptedSpillSuite.filesUnder(new File(r)))
        .filter(f => EncryptedSpillSuite.bytesIfStillThere(f).exists(EncryptedSpillSuite.contains(_, marker)))
        .map(_.getPath)

      val readBack = Using.resource(file.inputStream())(_.readAllBytes())
      val out = sorted.toIndexedSeq
      val want = records.sortWith((a, b) => java.util.Arrays.compareUnsigned(a._1, b._1) < 0)
      val sortedRight = out.length == want.length && out.zip(want).forall { case (a, b) =>
        java.util.Arrays.equals(a._1, b._1) && java.util.Arrays.equals(a._2, b._2)
      }
      Iterator(EncryptionObservation(spillFiles.size, withMarker, sortedRight, java.util.Arrays.equals(readBack, payload),
        file.bytesOnDisk, file.bytesWritten))
    }.collect().toSeq

    assert(seen.size == 2)
    seen.foreach { o =>
      assert(o.filesWithMarker.isEmpty, s"plaintext on disk: $o")
      assert(o.spillFiles >= 2, s"the runs and the framed file were on disk while the marker was looked for: $o")
      assert(o.sortedRight, o)
      assert(o.readBackRight, o)
      assert(o.framedBytesOnDisk > 0 && o.framedBytesOnDisk < o.framedBytesWritten, s"lz4 by default: $o")
    }
    assert(TestFiles.spillDirsUnder(roots).isEmpty)
    assert(TaskSpill.activePlans == 0)
  }
}

object EncryptedSpillSuite {
  val Marker = "SPILLWAY-PLAINTEXT-MARKER-4f1c"

  def filesUnder(dir: File): Seq[File] = {
    val children = Option(dir.listFiles()).toSeq.flatten
    children.filter(_.isFile) ++ children.filter(_.isDirectory).flatMap(filesUnder)
  }

  /**
   * The file's bytes, or None if it is gone: the other task, running beside this one, removes its
   * runs as its merge goes (seen in CI). It checks its own files; this task's stay until read.
   */
  def bytesIfStillThere(f: File): Option[Array[Byte]] =
    try Some(Files.readAllBytes(f.toPath))
    catch { case _: NoSuchFileException => None }

  def contains(hay: Array[Byte], needle: Array[Byte]): Boolean = {
    var i = 0
    while (i + needle.length <= hay.length) {
      var j = 0
      while (j < needle.length && hay(i + j) == needle(j)) j += 1
      if (j == needle.length) return true
      i += 1
    }
    false
  }
}
