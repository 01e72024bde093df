package spillway

import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Path, Paths}

import scala.jdk.CollectionConverters._

import org.scalatest.funsuite.AnyFunSuite

import spillway.SpillFileDecoder.{ChunkError, Fault, HeaderError}

/**
 * The shared vectors of the spill file format (testdata/spillfile, its README), read on the JVM by
 * [[SpillFileDecoder]], a reader written from docs/design/spill-file-format.md that shares no code with
 * the library's; the Go test (spill/chunkfile TestVectors) reads them with the library's reader
 * and checks each `.error` message exactly. Every file in the folder is checked, none by a
 * hard-coded name, so a new vector cannot be skipped silently:
 *
 *  - a `NAME.chunk` with `NAME.plain` decodes to exactly those bytes; a sealed one (header byte 10
 *    is 1) under the README's test key of the size in byte 11, and is refused at its header
 *    without a key;
 *  - one with `NAME.error` is refused where that message says: at the header, or at the chunk and
 *    byte offset it names, for the fault it names.
 */
class SpillFileVectorsSuite extends AnyFunSuite {
  private val dir: Path = {
    val root = sys.props.getOrElse("spillway.testdata", "testdata")
    Paths.get(root, "spillfile")
  }

  private def files: Seq[Path] = {
    assert(Files.isDirectory(dir), s"$dir is missing: the build passes -Dspillway.testdata")
    val s = Files.list(dir)
    try s.iterator().asScala.toList.sortBy(_.getFileName.toString)
    finally s.close()
  }

  /** The README's test key of `size` bytes: 00 01 02 ... */
  private def testKey(size: Int): Array[Byte] = Array.tabulate(size)(_.toByte)

  private val ChunkMessage = """spill chunk file: chunk (\d+) \(at byte (\d+)\): (.*)""".r

  /** The words of the library's message for each fault (spill/chunkfile/reader.go). */
  private def saysFault(message: String, fault: Fault): Boolean = fault match {
    case Fault.Cut => message.contains("it was cut")
    case Fault.Trailing => message.contains("past its last chunk")
    case Fault.CrcMismatch => message.startsWith("CRC-32C mismatch")
    case Fault.AuthenticationFailed => message.startsWith("AES-GCM authentication failed")
    case Fault.Malformed => false // no vector has one: the Go tests cover malformed chunk headers
  }

  test("every vector in testdata/spillfile decodes to its .plain or is refused where its .error says") {
    val names = files.map(_.getFileName.toString).toSet
    val checked = scala.collection.mutable.Set("README.md")
    var unsealedCount, sealedCount = 0
    for (name <- names.toSeq.sorted if name.endsWith(".chunk")) {
      val base = name.stripSuffix(".chunk")
      val (plainName, errorName) = (s"$base.plain", s"$base.error")
      assert(names(plainName) != names(errorName), s"$name needs exactly one of $plainName and $errorName")
      val file = Files.readAllBytes(dir.resolve(name))
      val keySize = SpillFileDecoder.sealedKeySize(file)
      if (keySize.isDefined) sealedCount += 1 else unsealedCount += 1
      val key = keySize.map(testKey)
      withClue(name) {
        if (names(plainName)) {
          val expected = Files.readAllBytes(dir.resolve(plainName))
          val got = SpillFileDecoder.decode(file, key)
          assert(got.sameElements(expected), s"$name decodes to ${got.length} bytes that are not $plainName (${expected.length} bytes)")
          for (bytes <- keySize) {
            val e = intercept[HeaderError](SpillFileDecoder.decode(file, None))
            assert(e.field == "key" && e.getMessage.contains(s"sealed with a ${bytes * 8}-bit key and no key was given"))
          }
        } else {
          val want = new String(Files.readAllBytes(dir.resolve(errorName)), StandardCharsets.UTF_8).trim
          want match {
            case ChunkMessage(index, offset, message) =>
              val e = intercept[ChunkError](SpillFileDecoder.decode(file, key))
              assert((e.index, e.offset) == ((index.toLong, offset.toLong)), s"$e, where $errorName says: $want")
              assert(saysFault(message, e.fault), s"$e, where $errorName says: $want")
            case _ =>
              assert(want.startsWith("spill chunk file header: "), s"$errorName names neither the header nor a chunk: $want")
              val e = intercept[HeaderError](SpillFileDecoder.decode(file, key))
              assert(want.contains(e.field), s"$e, where $errorName says: $want")
          }
        }
      }
      checked ++= Seq(name, if (names(plainName)) plainName else errorName)
    }
    val unchecked = names -- checked
    assert(unchecked.isEmpty, s"$unchecked in $dir belong to no vector: name them NAME.chunk with NAME.plain or NAME.error")
    // The folder holds both kinds (README): a loss of either would leave a path untested here.
    assert(unsealedCount >= 10, s"$unsealedCount unsealed vectors")
    assert(sealedCount >= 4, s"$sealedCount sealed vectors")
  }
}
