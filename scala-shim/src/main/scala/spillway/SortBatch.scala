package spillway

import java.nio.{ByteBuffer, ByteOrder}

import org.apache.spark.unsafe.Platform

/**
 * The batch encoding of the sort natives ([[NativeSpill]]'s sortAdd and sortNext): per record,
 * u32 key length | u32 value length | key | value, little-endian, records back to back. Records
 * are written and read in place, at native addresses in a direct buffer (a [[NativeSortSession]]'s
 * batches), or through a little-endian `ByteBuffer`.
 */
object SortBatch {
  /** Bytes of a record's header: its key and value lengths. */
  val HeaderBytes: Int = 8

  /** The largest record a batch takes (a `ByteBuffer` holds at most 2 GiB). */
  val MaxRecordBytes: Long = Int.MaxValue - 16

  /** The encoded size of a record of `key` and `value`. */
  def recordBytes(key: Array[Byte], value: Array[Byte]): Long = HeaderBytes.toLong + key.length + value.length

  /** Appends the record of `key` and `value` to `batch`, a little-endian buffer with room for it. */
  def put(batch: ByteBuffer, key: Array[Byte], value: Array[Byte]): ByteBuffer =
    batch.putInt(key.length).putInt(value.length).put(key).put(value)

  /** `records` as one batch. */
  def encode(records: Seq[(Array[Byte], Array[Byte])]): Array[Byte] = {
    val batch = ByteBuffer.allocate(Math.toIntExact(records.map { case (k, v) => recordBytes(k, v) }.sum))
      .order(ByteOrder.LITTLE_ENDIAN)
    records.foreach { case (k, v) => put(batch, k, v) }
    batch.array()
  }

  /** Writes the record of `key` and `value` at `address`, which has room for it. */
  def put(address: Long, key: Array[Byte], value: Array[Byte]): Unit = {
    putHeader(address, key.length, value.length)
    copyTo(key, Platform.BYTE_ARRAY_OFFSET, address + HeaderBytes, key.length)
    copyTo(value, Platform.BYTE_ARRAY_OFFSET, address + HeaderBytes + key.length, value.length)
  }

  /**
   * Copies `length` bytes from `src` at `srcOffset` (an array and an offset in it, or null and an
   * address) to the native `address`. A short copy (a key, a narrow row) goes by 8-byte words:
   * Unsafe's copyMemory checks its arguments on every call (the array's class, its component
   * type), which in a sort of narrow rows cost more than the copies.
   */
  def copyTo(src: AnyRef, srcOffset: Long, address: Long, length: Int): Unit =
    if (length > ShortCopyBytes || !Unaligned) Platform.copyMemory(src, srcOffset, null, address, length.toLong)
    else {
      var i = 0
      while (i + 8 <= length) {
        Platform.putLong(null, address + i, Platform.getLong(src, srcOffset + i))
        i += 8
      }
      while (i < length) {
        Platform.putByte(null, address + i, Platform.getByte(src, srcOffset + i))
        i += 1
      }
    }

  // Copies up to this long go by words (machines that allow unaligned words: x86-64, arm64).
  private val ShortCopyBytes = 64
  private val Unaligned = Platform.unaligned()

  /** Writes the header of a record at `address`. */
  def putHeader(address: Long, keyLength: Int, valueLength: Int): Unit = {
    putIntLE(address, keyLength)
    putIntLE(address + 4, valueLength)
  }

  /** The key length of the record at `address`. */
  def keyLength(address: Long): Int = getIntLE(address)

  /** The value length of the record at `address`. */
  def valueLength(address: Long): Int = getIntLE(address + 4)

  // The batch format is little-endian; Platform reads and writes the machine's order.
  private val BigEndian = ByteOrder.nativeOrder() == ByteOrder.BIG_ENDIAN

  private def putIntLE(address: Long, v: Int): Unit =
    Platform.putInt(null, address, if (BigEndian) Integer.reverseBytes(v) else v)

  private def getIntLE(address: Long): Int = {
    val v = Platform.getInt(null, address)
    if (BigEndian) Integer.reverseBytes(v) else v
  }
}
