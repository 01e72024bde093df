package spillway

import java.nio.{ByteBuffer, ByteOrder}

/**
 * The batch encoding of the sort natives ([[NativeSpill]]'s sortAdd and sortNext): per record,
 * u32 key length | u32 value length | key | value, little-endian, records back to back.
 */
object SortBatch {
  /** Bytes of a record's header: its key and value lengths. */
  val HeaderBytes: Int = 8

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
}
