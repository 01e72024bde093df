package spillway

import java.nio.ByteBuffer
import java.nio.charset.StandardCharsets
import java.util.zip.CRC32C

import javax.crypto.{AEADBadTagException, Cipher, Mac}
import javax.crypto.spec.{GCMParameterSpec, SecretKeySpec}

import com.github.luben.zstd.Zstd
import net.jpountz.lz4.LZ4Factory

/**
 * A decoder of the spill file format written from docs/design/spill-file-format.md alone, in test code:
 * the product reads its files only through the library. SpillFileVectorsSuite reads the shared
 * vectors with it, so that the spec and the vectors are shown to be enough for a reader that
 * shares no code with the library's (lz4 and zstd from the JVM's own libraries, AES-GCM, HKDF and
 * CRC-32C from the JDK's).
 */
object SpillFileDecoder {
  /** The header is refused: `field` names what is wrong with it. */
  final class HeaderError(val field: String, message: String) extends Exception(s"header: $message")

  /** What is wrong with a chunk. */
  sealed trait Fault
  object Fault {
    /** The file ends inside the chunk, or before it while no chunk so far was marked last. */
    case object Cut extends Fault
    /** Bytes follow the chunk marked last, which the error names. */
    case object Trailing extends Fault
    case object CrcMismatch extends Fault
    case object AuthenticationFailed extends Fault
    /** A chunk header or payload that breaks the format's rules. */
    case object Malformed extends Fault
  }

  /** Chunk `index`, whose header starts at byte `offset`, is refused. */
  final class ChunkError(val index: Long, val offset: Long, val fault: Fault, detail: String)
      extends Exception(s"chunk $index (at byte $offset): $fault: $detail")

  val HeaderSize = 32
  private val ChunkHeaderSize = 9
  private val TagSize = 16
  private val CrcSize = 4
  private val Magic = "SPILLWAY".getBytes(StandardCharsets.US_ASCII)
  private val HkdfInfo = "spillway chunk file v1 AES-GCM key".getBytes(StandardCharsets.US_ASCII)
  private val Last = 1 // chunk flags
  private val Compressed = 2
  private val CodecNone = 0
  private val CodecLz4 = 1
  private val CodecZstd = 2

  /** Whether the header says sealed; the key size in bytes (byte 11) if so. */
  def sealedKeySize(file: Array[Byte]): Option[Int] =
    if (file.length >= HeaderSize && file(10) == 1) Some(file(11) & 0xff) else None

  /**
   * The plain bytes of a whole file. `key` is the secret a sealed file was sealed under (its size
   * is the header's); an unsealed file takes none.
   *
   * @throws HeaderError if the header is refused
   * @throws ChunkError naming the first chunk that is refused
   */
  def decode(file: Array[Byte], key: Option[Array[Byte]]): Array[Byte] = {
    if (file.length < HeaderSize) throw new HeaderError("length", s"${file.length} bytes, shorter than the header")
    if (!file.take(Magic.length).sameElements(Magic)) throw new HeaderError("magic", "not SPILLWAY")
    if (file(8) != 1) throw new HeaderError("version", s"format version ${file(8) & 0xff}")
    val codec = file(9) & 0xff
    if (codec > CodecZstd) throw new HeaderError("codec", s"codec $codec")
    val sealing = file(10) & 0xff
    val keyBytes = file(11) & 0xff
    val chunkShift = file(12) & 0xff
    if (sealing > 1) throw new HeaderError("sealing", s"sealing $sealing")
    if (sealing == 0 && keyBytes != 0 || sealing == 1 && !Set(16, 24, 32)(keyBytes))
      throw new HeaderError("key size", s"key size $keyBytes with sealing $sealing")
    if (chunkShift < 10 || chunkShift > 22) throw new HeaderError("chunk size", s"log2 chunk size $chunkShift")
    // Bytes 13-15: the record size of the shuffle, 0 for none, else 2 to the chunk size.
    val shuffle = (file(13) & 0xff) << 16 | (file(14) & 0xff) << 8 | (file(15) & 0xff)
    if (shuffle == 1 || shuffle > (1 << chunkShift)) throw new HeaderError("shuffle", s"shuffled in records of $shuffle bytes")
    val aead = (sealing, key) match {
      case (1, Some(k)) if k.length == keyBytes => Some(fileKey(k, file.slice(16, 32)))
      case (1, Some(k)) => throw new HeaderError("key size", s"sealed with a ${keyBytes * 8}-bit key, given ${k.length * 8} bits")
      case (1, None) => throw new HeaderError("key", s"sealed with a ${keyBytes * 8}-bit key and no key was given")
      case (_, Some(_)) => throw new HeaderError("sealing", "not sealed, and a key was given")
      case _ => None
    }
    val chunkSize = 1 << chunkShift
    val checkSize = if (aead.isDefined) TagSize else CrcSize

    val out = new java.io.ByteArrayOutputStream
    var offset = HeaderSize
    var index = 0L
    var last = false
    def fail(fault: Fault, detail: String) = throw new ChunkError(index, offset, fault, detail)
    while (!last) {
      if (offset == file.length) fail(Fault.Cut, "the file ends before this chunk, and no chunk was marked last")
      if (file.length - offset < ChunkHeaderSize) fail(Fault.Cut, "the file ends inside the chunk's header")
      val chunkHeader = file.slice(offset, offset + ChunkHeaderSize)
      val head = ByteBuffer.wrap(chunkHeader)
      val flags = head.get() & 0xff
      val rawLen = head.getInt() & 0xffffffffL
      val storedLen = head.getInt() & 0xffffffffL
      last = (flags & Last) != 0
      val compressed = (flags & Compressed) != 0
      if ((flags & ~(Last | Compressed)) != 0) fail(Fault.Malformed, s"flags $flags")
      if (rawLen > chunkSize || !last && rawLen != chunkSize) fail(Fault.Malformed, s"raw length $rawLen, chunk size $chunkSize")
      if (rawLen == 0 && index != 0) fail(Fault.Malformed, "an empty chunk in a file that is not empty")
      if (storedLen < checkSize) fail(Fault.Malformed, s"stored length $storedLen")
      val payloadLen = storedLen - checkSize
      if (compressed && (codec == CodecNone || payloadLen >= rawLen) || !compressed && payloadLen != rawLen)
        fail(Fault.Malformed, s"payload of $payloadLen bytes for $rawLen raw bytes, compressed $compressed")
      val body = offset + ChunkHeaderSize
      if (file.length - body < storedLen) fail(Fault.Cut, s"the file ends ${file.length - body} bytes into the chunk's $storedLen stored bytes")
      if (last && file.length - body > storedLen) fail(Fault.Trailing, s"${file.length - body - storedLen} bytes past this last chunk")
      val associated = file.take(HeaderSize) ++ ByteBuffer.allocate(8).putLong(index).array() ++ chunkHeader
      val payload = aead match {
        case Some(fileKey) =>
          val gcm = Cipher.getInstance("AES/GCM/NoPadding")
          val nonce = ByteBuffer.allocate(12).putLong(4, index).array()
          gcm.init(Cipher.DECRYPT_MODE, fileKey, new GCMParameterSpec(TagSize * 8, nonce))
          gcm.updateAAD(associated)
          try gcm.doFinal(file, body, storedLen.toInt)
          catch { case e: AEADBadTagException => fail(Fault.AuthenticationFailed, e.getMessage) }
        case None =>
          val crc = new CRC32C
          crc.update(associated)
          crc.update(file, body, payloadLen.toInt)
          val stored = ByteBuffer.wrap(file, body + payloadLen.toInt, CrcSize).getInt() & 0xffffffffL
          if (crc.getValue != stored) fail(Fault.CrcMismatch, f"stored $stored%08x, computed ${crc.getValue}%08x")
          file.slice(body, body + payloadLen.toInt)
      }
      val plain =
        if (!compressed) payload
        else {
          val raw = new Array[Byte](rawLen.toInt)
          val n =
            try {
              if (codec == CodecLz4) LZ4Factory.safeInstance().safeDecompressor().decompress(payload, 0, payload.length, raw, 0).toLong
              else Zstd.decompressByteArray(raw, 0, raw.length, payload, 0, payload.length)
            } catch { case e: Exception => fail(Fault.Malformed, s"cannot decompress: $e") }
          if (codec == CodecZstd && Zstd.isError(n)) fail(Fault.Malformed, s"zstd: ${Zstd.getErrorName(n)}")
          if (n != rawLen) fail(Fault.Malformed, s"decompresses to $n bytes, not $rawLen")
          raw
        }
      out.write(if (shuffle == 0) plain else unshuffle(plain, shuffle))
      offset = body + storedLen.toInt
      index += 1
    }
    out.toByteArray
  }

  /** A shuffled chunk's bytes in their order: plane c holds byte c of each whole row of `stride` bytes; the rest follows as is. */
  private def unshuffle(planes: Array[Byte], stride: Int): Array[Byte] = {
    val rows = planes.length / stride
    val out = planes.clone() // the bytes past the last whole row stay where they are
    for (r <- 0 until rows; c <- 0 until stride) out(r * stride + c) = planes(c * rows + r)
    out
  }

  /** HKDF-SHA256 (RFC 5869) of the secret, salted with the file id: the file's AES key. */
  private def fileKey(secret: Array[Byte], fileId: Array[Byte]): SecretKeySpec = {
    def hmac(key: Array[Byte], data: Array[Byte]): Array[Byte] = {
      val mac = Mac.getInstance("HmacSHA256")
      mac.init(new SecretKeySpec(key, "HmacSHA256"))
      mac.doFinal(data)
    }
    val prk = hmac(fileId, secret)
    val okm = hmac(prk, HkdfInfo :+ 1.toByte) // one block: the key is at most the hash's 32 bytes
    new SecretKeySpec(okm.take(secret.length), "AES")
  }
}
