package spillway

import java.io.IOException
import java.nio.ByteBuffer
import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Path, Paths}

import scala.jdk.CollectionConverters._

import org.scalatest.funsuite.AnyFunSuite

/**
 * The shared vectors of the spill file format (testdata/spillfile, its README), read by the JVM
 * through the real library's reader (`NativeSpill.decodeUnsealed`), as the Go test
 * (spill/chunkfile TestVectors) reads them. Every file in the folder is checked, none by a
 * hard-coded name, so a new vector cannot be skipped silently:
 *
 *  - an unsealed `NAME.chunk` decodes to exactly `NAME.plain`, or fails with an IOException whose
 *    message is exactly `NAME.error`;
 *  - a sealed one (header byte 10 is 1) is sealed under the README's test key, which the JVM cannot
 *    give: no native takes a key (the library's key is made in its memory and never leaves it), so
 *    a sealed vector must be refused at its header, naming the key size. Its plaintext, and the
 *    chunk its `.error` names, are checked by the Go test only.
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

  private def direct(bytes: Array[Byte]): ByteBuffer = {
    val b = ByteBuffer.allocateDirect(math.max(1, bytes.length))
    b.put(bytes)
    b
  }

  private def sealedBits(file: Array[Byte]): Option[Int] =
    if (file.length >= 12 && file(10) == 1) Some((file(11) & 0xff) * 8) else None

  test("every vector in testdata/spillfile decodes to its .plain or fails with its .error") {
    NativeLoader.load()
    val names = files.map(_.getFileName.toString).toSet
    val checked = scala.collection.mutable.Set("README.md")
    var unsealedCount, sealedCount = 0
    for (name <- names.toSeq.sorted if name.endsWith(".chunk")) {
      val base = name.stripSuffix(".chunk")
      val (plainName, errorName) = (s"$base.plain", s"$base.error")
      assert(names(plainName) != names(errorName), s"$name needs exactly one of $plainName and $errorName")
      val file = Files.readAllBytes(dir.resolve(name))
      val src = direct(file)
      val expected = if (names(plainName)) Files.readAllBytes(dir.resolve(plainName)) else Array.emptyByteArray
      // Room for the plain bytes and a little more (a vector that decodes to more fails, not fits);
      // for an .error vector, room for all that decodes before its bad chunk (the vectors are KiBs).
      val dst = ByteBuffer.allocateDirect(if (names(plainName)) expected.length + 64 else 1 << 20)
      sealedBits(file) match {
        case Some(bits) =>
          sealedCount += 1
          val e = intercept[IOException](NativeSpill.decodeUnsealed(src, 0, file.length, dst, 0, dst.capacity()))
          assert(e.getMessage == s"spill chunk file header: the file is sealed with a $bits-bit key and no key was given", name)
        case None if names(plainName) =>
          unsealedCount += 1
          val n = NativeSpill.decodeUnsealed(src, 0, file.length, dst, 0, dst.capacity())
          val got = new Array[Byte](n)
          dst.get(0, got)
          assert(got.sameElements(expected), s"$name decodes to $n bytes that are not $plainName (${expected.length} bytes)")
        case None =>
          unsealedCount += 1
          val want = new String(Files.readAllBytes(dir.resolve(errorName)), StandardCharsets.UTF_8).trim
          val e = intercept[IOException](NativeSpill.decodeUnsealed(src, 0, file.length, dst, 0, dst.capacity()))
          assert(e.getMessage == want, name)
      }
      checked ++= Seq(name, if (names(plainName)) plainName else errorName)
    }
    val unchecked = names -- checked
    assert(unchecked.isEmpty, s"$unchecked in $dir belong to no vector: name them NAME.chunk with NAME.plain or NAME.error")
    // The folder holds both kinds (README): a loss of either would leave a path untested here.
    assert(unsealedCount >= 10, s"$unsealedCount unsealed vectors")
    assert(sealedCount >= 4, s"$sealedCount sealed vectors")
  }

  test("decodeUnsealed refuses heap and read-only buffers and a dst too small, naming the argument") {
    NativeLoader.load()
    val name = "none-multi"
    val file = Files.readAllBytes(dir.resolve(s"$name.chunk"))
    val plain = Files.readAllBytes(dir.resolve(s"$name.plain"))
    val src = direct(file)
    val e1 = intercept[IllegalArgumentException](
      NativeSpill.decodeUnsealed(ByteBuffer.wrap(file), 0, file.length, ByteBuffer.allocateDirect(plain.length), 0, plain.length))
    assert(e1.getMessage.contains("src must be a direct ByteBuffer"))
    val e2 = intercept[IllegalArgumentException](
      NativeSpill.decodeUnsealed(src, 0, file.length, ByteBuffer.allocateDirect(plain.length).asReadOnlyBuffer(), 0, plain.length))
    assert(e2.getMessage.contains("dst is read-only"))
    val e3 = intercept[IllegalArgumentException](
      NativeSpill.decodeUnsealed(src, 0, file.length, ByteBuffer.allocateDirect(plain.length), 0, plain.length - 1))
    assert(e3.getMessage.contains("pass a larger buffer"))
    val e4 = intercept[IllegalArgumentException](
      NativeSpill.decodeUnsealed(src, 0, file.length + 1, ByteBuffer.allocateDirect(plain.length), 0, plain.length))
    assert(e4.getMessage.contains("past the limit"))
    intercept[IllegalArgumentException](NativeSpill.decodeUnsealed(null, 0, 0, ByteBuffer.allocateDirect(1), 0, 1))
  }
}
