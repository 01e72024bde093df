package spillway.sql

import java.math.{BigInteger, RoundingMode}

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{SortOrder, UnsafeRow}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.Platform

import spillway.SortBatch

/**
 * Encodes the sort keys of a row as bytes whose unsigned lexicographic order is Spark's order of
 * the keys (`SortOrder` with its direction and null ordering), so that the native sort stays a
 * byte sort that knows nothing of Spark's types. The format is described in
 * docs/design/sql-sort-key-encoding.md; in short, per key: a null-flag byte, then for a non-null value an
 * order-preserving, prefix-free encoding of it, with every byte inverted when descending, and for a
 * null of a fixed-width type the encoding of zero, so that such keys all have one length.
 *
 * @param keys the data type, direction and null ordering of each key, in sort order
 * @param ordinals where each key is in the rows given to [[encode]] and [[encodeAt]]: 0 until keys.size (a row of
 *     the key values) by default; a sort whose keys are plain columns reads them from the input
 *     row itself and needs no projection of the keys
 */
final class SortKeyEncoder(keys: Seq[SortKeyEncoder.Key], ordinals: Array[Int]) extends Serializable {
  require(ordinals.length == keys.size, s"${ordinals.length} ordinals for ${keys.size} keys")

  def this(keys: Seq[SortKeyEncoder.Key]) = this(keys, keys.indices.toArray)

  import SortKeyEncoder._

  private val fields: Array[FieldEncoder] = keys.map(k => fieldEncoder(k.dataType)).toArray
  private val descending: Array[Boolean] = keys.map(!_.ascending).toArray
  // A null's whole encoding: its flag, then for a fixed-width type the encoding of the type's zero
  // (inverted when descending), so that every key of fixed-width types has one length, nulls
  // included. The native sort's fast paths (an index sort on the bytes that vary, by one word a
  // row) need keys of one length; a flag alone made a sort with a few nulls take the slow path
  // (a sixth of the speed, BenchmarkSortedIndex/joinkey-nulls-*). Zero's encoding shares its high
  // bytes with the small values most columns hold, so those bytes still do not vary.
  private val nullEncodings: Array[Array[Byte]] = keys.indices.map { i =>
    val out = new KeyBuffer(17)
    out.put(if (keys(i).nullsFirst) NullFirst else NullLast)
    fields(i).writeZero(out)
    if (descending(i)) out.invert(1)
    java.util.Arrays.copyOf(out.bytes, out.length)
  }.toArray

  /** Appends the encoding of `keyRow`'s key fields (at the ordinals) to `out`. */
  def encode(keyRow: InternalRow, out: KeyBuffer): Unit = {
    var i = 0
    while (i < fields.length) {
      val ordinal = ordinals(i)
      if (keyRow.isNullAt(ordinal)) out.put(nullEncodings(i), 0, nullEncodings(i).length)
      else {
        out.put(NotNull)
        val start = out.length
        fields(i).write(keyRow, ordinal, out)
        if (descending(i)) out.invert(start)
      }
      i += 1
    }
  }

  /**
   * The length of every key when every key is of a fixed-width type that [[encodeAt]] writes in
   * place (all but decimals over 18 digits; nulls are padded to the width), else -1.
   */
  @transient lazy val fixedLength: Int = // where it runs: the machine decides Unaligned
    if (Unaligned && fields.forall(_.width >= 0)) fields.map(1 + _.width).sum else -1

  /**
   * Writes the bytes [[encode]] would append for `keyRow`, [[fixedLength]] of them, at the native
   * `address`, with no buffer between: the SQL sort writes a row's key straight into the sort's
   * input batch. Only when `fixedLength >= 0`.
   */
  def encodeAt(keyRow: InternalRow, address: Long): Unit = {
    var at = address
    var i = 0
    while (i < fields.length) {
      val ordinal = ordinals(i)
      if (keyRow.isNullAt(ordinal)) {
        val n = nullEncodings(i)
        SortBatch.copyTo(n, Platform.BYTE_ARRAY_OFFSET, at, n.length)
      } else {
        Platform.putByte(null, at, NotNull)
        fields(i).writeAt(keyRow, ordinal, at + 1, descending(i))
      }
      at += 1 + fields(i).width
      i += 1
    }
  }

  /** The encoding of `keyRow` as a fresh array (for tests and tools). */
  def encode(keyRow: InternalRow): Array[Byte] = {
    val out = new KeyBuffer(16)
    encode(keyRow, out)
    java.util.Arrays.copyOf(out.bytes, out.length)
  }
}

object SortKeyEncoder {

  /** One sort key: its type and how it sorts. */
  final case class Key(dataType: DataType, ascending: Boolean, nullsFirst: Boolean)

  object Key {
    def apply(order: SortOrder): Key =
      Key(order.dataType, order.isAscending, order.nullOrdering == org.apache.spark.sql.catalyst.expressions.NullsFirst)
  }

  // Null flags: a null sorts before every value (0x00 < 0x01) or after it (0x02 > 0x01), whatever
  // the direction, as SortOrder's null ordering is independent of it.
  private val NullFirst: Byte = 0x00
  private val NotNull: Byte = 0x01
  private val NullLast: Byte = 0x02

  /**
   * Why a key of type `dataType` cannot be encoded, or None if it can. The encodable types are the
   * atomic ones whose Spark ordering is a total order on a fixed representation.
   */
  def unsupportedReason(dataType: DataType): Option[String] = dataType match {
    case st: StringType if SparkLineTypes.stringOrderProblem(st).isDefined => SparkLineTypes.stringOrderProblem(st)
    case _ if isSupported(dataType) => None
    case _: ArrayType | _: StructType | _: MapType =>
      Some(s"nested type ${dataType.catalogString} (only atomic types are encoded)")
    case other => Some(s"type ${other.catalogString} is not encoded")
  }

  def isSupported(dataType: DataType): Boolean = dataType match {
    case BooleanType | ByteType | ShortType | IntegerType | LongType | FloatType | DoubleType => true
    case _: DecimalType => true
    case st: StringType => SparkLineTypes.stringOrderProblem(st).isEmpty
    case BinaryType | DateType | TimestampType | TimestampNTZType | NullType => true
    case _: YearMonthIntervalType | _: DayTimeIntervalType => true
    case other => SparkLineTypes.isTime(other)
  }

  private def fieldEncoder(dataType: DataType): FieldEncoder = dataType match {
    case BooleanType => BooleanEncoder
    case ByteType => ByteEncoder
    case ShortType => ShortEncoder
    // Dates and year-month intervals are ints, times, timestamps and day-time intervals longs,
    // ordered as such by Spark.
    case IntegerType | DateType | _: YearMonthIntervalType => IntEncoder
    case LongType | TimestampType | TimestampNTZType | _: DayTimeIntervalType => LongEncoder
    case time if SparkLineTypes.isTime(time) => LongEncoder
    case FloatType => FloatEncoder
    case DoubleType => DoubleEncoder
    case d: DecimalType if d.precision <= Decimal.MAX_LONG_DIGITS => new CompactDecimalEncoder(d.precision, d.scale)
    case d: DecimalType => new WideDecimalEncoder(d.precision, d.scale)
    case st: StringType if SparkLineTypes.stringOrderProblem(st).isEmpty => StringEncoder
    case BinaryType => BinaryEncoder
    case NullType => NullEncoder // always null: only the flag is written
    case other => throw new IllegalArgumentException(s"cannot encode a sort key: ${unsupportedReason(other).getOrElse(other.sql)}")
  }

  private sealed abstract class FieldEncoder extends Serializable {
    def write(row: InternalRow, ordinal: Int, out: KeyBuffer): Unit

    /** Writes the encoding of the type's zero if the type is fixed-width, else nothing: a null's padding. */
    def writeZero(out: KeyBuffer): Unit = ()

    /** The bytes of every value's encoding, if [[writeAt]] writes them in place; else -1. */
    def width: Int = -1

    /** Writes the value's encoding, [[width]] bytes, at the native `address`, inverted if `descending`. */
    def writeAt(row: InternalRow, ordinal: Int, address: Long, descending: Boolean): Unit =
      throw new UnsupportedOperationException(s"${getClass.getSimpleName} is not written in place")
  }

  // In-place writes store words at any address, as SortBatch's copies do where the machine allows it.
  private val Unaligned = Platform.unaligned()
  private val LittleEndian = java.nio.ByteOrder.nativeOrder() == java.nio.ByteOrder.LITTLE_ENDIAN

  private def putLongBE(address: Long, v: Long, descending: Boolean): Unit = {
    val w = if (descending) ~v else v
    Platform.putLong(null, address, if (LittleEndian) java.lang.Long.reverseBytes(w) else w)
  }

  private def putIntBE(address: Long, v: Int, descending: Boolean): Unit = {
    val w = if (descending) ~v else v
    Platform.putInt(null, address, if (LittleEndian) Integer.reverseBytes(w) else w)
  }

  private def putByte(address: Long, v: Int, descending: Boolean): Unit =
    Platform.putByte(null, address, (if (descending) ~v else v).toByte)

  private object BooleanEncoder extends FieldEncoder {
    def write(row: InternalRow, i: Int, out: KeyBuffer): Unit = out.put(if (row.getBoolean(i)) 1.toByte else 0.toByte)
    override def writeZero(out: KeyBuffer): Unit = out.put(0.toByte)
    override def width: Int = 1
    override def writeAt(row: InternalRow, i: Int, address: Long, descending: Boolean): Unit =
      putByte(address, if (row.getBoolean(i)) 1 else 0, descending)
  }

  // Two's complement with the sign bit flipped, big-endian: negative values first.
  private object ByteEncoder extends FieldEncoder {
    def write(row: InternalRow, i: Int, out: KeyBuffer): Unit = out.put((row.getByte(i) ^ 0x80).toByte)
    override def writeZero(out: KeyBuffer): Unit = out.put(0x80.toByte)
    override def width: Int = 1
    override def writeAt(row: InternalRow, i: Int, address: Long, descending: Boolean): Unit =
      putByte(address, row.getByte(i) ^ 0x80, descending)
  }

  private object ShortEncoder extends FieldEncoder {
    def write(row: InternalRow, i: Int, out: KeyBuffer): Unit = {
      val v = row.getShort(i) ^ 0x8000
      out.put((v >>> 8).toByte)
      out.put(v.toByte)
    }
    override def writeZero(out: KeyBuffer): Unit = {
      out.put(0x80.toByte)
      out.put(0.toByte)
    }
    override def width: Int = 2
    override def writeAt(row: InternalRow, i: Int, address: Long, descending: Boolean): Unit = {
      val v = row.getShort(i) ^ 0x8000
      putByte(address, v >>> 8, descending)
      putByte(address + 1, v, descending)
    }
  }

  private object IntEncoder extends FieldEncoder {
    def write(row: InternalRow, i: Int, out: KeyBuffer): Unit = out.putInt(row.getInt(i) ^ Int.MinValue)
    override def writeZero(out: KeyBuffer): Unit = out.putInt(Int.MinValue)
    override def width: Int = 4
    override def writeAt(row: InternalRow, i: Int, address: Long, descending: Boolean): Unit =
      putIntBE(address, row.getInt(i) ^ Int.MinValue, descending)
  }

  private object LongEncoder extends FieldEncoder {
    def write(row: InternalRow, i: Int, out: KeyBuffer): Unit = out.putLong(row.getLong(i) ^ Long.MinValue)
    override def writeZero(out: KeyBuffer): Unit = out.putLong(Long.MinValue)
    override def width: Int = 8
    override def writeAt(row: InternalRow, i: Int, address: Long, descending: Boolean): Unit =
      putLongBE(address, row.getLong(i) ^ Long.MinValue, descending)
  }

  // Spark's order of floating point values: -0.0 equals 0.0, NaN equals NaN and is greater than
  // every other value (+Inf included). Normalise both, then map the IEEE bits to an unsigned order:
  // negative values have all bits inverted, the others only the sign bit.
  private object FloatEncoder extends FieldEncoder {
    def write(row: InternalRow, i: Int, out: KeyBuffer): Unit = out.putInt(encoded(row.getFloat(i)))
    private def encoded(f: Float): Int = {
      val bits = if (f == 0.0f) 0 else java.lang.Float.floatToIntBits(f) // canonical NaN: 0x7fc00000
      if (bits < 0) ~bits else bits ^ Int.MinValue
    }
    override def writeZero(out: KeyBuffer): Unit = out.putInt(Int.MinValue)
    override def width: Int = 4
    override def writeAt(row: InternalRow, i: Int, address: Long, descending: Boolean): Unit =
      putIntBE(address, encoded(row.getFloat(i)), descending)
  }

  private object DoubleEncoder extends FieldEncoder {
    def write(row: InternalRow, i: Int, out: KeyBuffer): Unit = out.putLong(encoded(row.getDouble(i)))
    private def encoded(d: Double): Long = {
      val bits = if (d == 0.0d) 0L else java.lang.Double.doubleToLongBits(d)
      if (bits < 0) ~bits else bits ^ Long.MinValue
    }
    override def writeZero(out: KeyBuffer): Unit = out.putLong(Long.MinValue)
    override def width: Int = 8
    override def writeAt(row: InternalRow, i: Int, address: Long, descending: Boolean): Unit =
      putLongBE(address, encoded(row.getDouble(i)), descending)
  }

  // All values of a decimal column share the column's scale, so the unscaled values order them.
  // Up to 18 digits the unscaled value is a long.
  private final class CompactDecimalEncoder(precision: Int, scale: Int) extends FieldEncoder {
    def write(row: InternalRow, i: Int, out: KeyBuffer): Unit = out.putLong(encoded(row, i))
    private def encoded(row: InternalRow, i: Int): Long = row match {
      // An UnsafeRow holds a compact decimal as its unscaled long at the column's scale, the key's:
      // read as such, with no Decimal made (its getDecimal makes one, two thirds of a date and
      // decimal key's encoding, KeyEncodeBench).
      case u: UnsafeRow => u.getLong(i) ^ Long.MinValue
      case _ =>
        val d = row.getDecimal(i, precision, scale)
        val v = if (d.scale == scale) d.toUnscaledLong else unscaled(d, scale).longValueExact()
        v ^ Long.MinValue
    }
    override def writeZero(out: KeyBuffer): Unit = out.putLong(Long.MinValue)
    override def width: Int = 8
    override def writeAt(row: InternalRow, i: Int, address: Long, descending: Boolean): Unit =
      putLongBE(address, encoded(row, i), descending)
  }

  // Up to 38 digits (Spark's maximum) the unscaled value fits in 128 bits: written as a 16-byte
  // two's complement, sign bit flipped, like the fixed-width integers.
  private final class WideDecimalEncoder(precision: Int, scale: Int) extends FieldEncoder {
    def write(row: InternalRow, i: Int, out: KeyBuffer): Unit = {
      val bytes = unscaled(row.getDecimal(i, precision, scale), scale).toByteArray // minimal, big-endian
      if (bytes.length > 16) {
        throw new IllegalArgumentException(s"decimal($precision,$scale) value has more than 128 bits")
      }
      val sign = if (bytes(0) < 0) 0xff.toByte else 0.toByte
      var pad = 16 - bytes.length
      val start = out.length
      while (pad > 0) { out.put(sign); pad -= 1 }
      out.put(bytes, 0, bytes.length)
      out.bytes(start) = (out.bytes(start) ^ 0x80).toByte
    }
    override def writeZero(out: KeyBuffer): Unit = {
      out.putLong(Long.MinValue)
      out.putLong(0L)
    }
  }

  private def unscaled(d: Decimal, scale: Int): BigInteger = {
    val big = d.toJavaBigDecimal
    (if (big.scale == scale) big else big.setScale(scale, RoundingMode.UNNECESSARY)).unscaledValue
  }

  // Strings (UTF-8 bytes: Spark's binary collation compares them unsigned, like binary values):
  // each 0x00 byte is escaped as 0x00 0xFF and the value ends with 0x00 0x01, so that no encoding
  // is a prefix of another, a value sorts before its extensions, and inverting every byte reverses
  // the order exactly (needed for descending keys).
  private object StringEncoder extends FieldEncoder {
    def write(row: InternalRow, i: Int, out: KeyBuffer): Unit = {
      val s = row.getUTF8String(i)
      out.putEscaped(s.getBaseObject, s.getBaseOffset, s.numBytes)
    }
  }

  private object BinaryEncoder extends FieldEncoder {
    def write(row: InternalRow, i: Int, out: KeyBuffer): Unit = {
      val b = row.getBinary(i)
      out.putEscaped(b, Platform.BYTE_ARRAY_OFFSET.toLong, b.length)
    }
  }

  private object NullEncoder extends FieldEncoder {
    def write(row: InternalRow, i: Int, out: KeyBuffer): Unit = ()
    override def width: Int = 0 // the flag alone: every value is null
    override def writeAt(row: InternalRow, i: Int, address: Long, descending: Boolean): Unit = ()
  }
}

/** A growable byte buffer keys are encoded into, reused for every row of a sort whose keys are not written in place. */
final class KeyBuffer(initialCapacity: Int) {
  var bytes: Array[Byte] = new Array[Byte](math.max(initialCapacity, 16))
  var length: Int = 0

  def reset(): Unit = length = 0

  private def ensure(extra: Int): Unit =
    if (length + extra > bytes.length) {
      val needed = length.toLong + extra
      if (needed > Int.MaxValue - 16) throw new IllegalArgumentException(s"a sort key of $needed bytes is too large")
      bytes = java.util.Arrays.copyOf(bytes, math.min(Int.MaxValue - 16L, math.max(needed, bytes.length * 2L)).toInt)
    }

  def put(b: Byte): Unit = {
    ensure(1)
    bytes(length) = b
    length += 1
  }

  def put(src: Array[Byte], offset: Int, n: Int): Unit = {
    ensure(n)
    System.arraycopy(src, offset, bytes, length, n)
    length += n
  }

  def putInt(v: Int): Unit = {
    ensure(4)
    bytes(length) = (v >>> 24).toByte
    bytes(length + 1) = (v >>> 16).toByte
    bytes(length + 2) = (v >>> 8).toByte
    bytes(length + 3) = v.toByte
    length += 4
  }

  def putLong(v: Long): Unit = {
    putInt((v >>> 32).toInt)
    putInt(v.toInt)
  }

  /** `n` bytes at (base, offset) with 0x00 escaped as 0x00 0xFF, then the terminator 0x00 0x01. */
  def putEscaped(base: AnyRef, offset: Long, n: Int): Unit = {
    ensure(n + 2)
    var i = 0
    while (i < n) {
      val b = Platform.getByte(base, offset + i)
      if (b == 0) {
        ensure(2 + (n - i) + 2)
        bytes(length) = 0
        bytes(length + 1) = 0xff.toByte
        length += 2
      } else {
        bytes(length) = b
        length += 1
      }
      i += 1
    }
    bytes(length) = 0
    bytes(length + 1) = 1
    length += 2
  }

  /** Inverts every byte from `start` on: reverses the order of a prefix-free encoding. */
  def invert(start: Int): Unit = {
    var i = start
    while (i + 8 <= length) { // 8 bytes at a time: a descending key is often a long
      val at = Platform.BYTE_ARRAY_OFFSET + i
      Platform.putLong(bytes, at, ~Platform.getLong(bytes, at))
      i += 8
    }
    while (i < length) {
      bytes(i) = (~bytes(i)).toByte
      i += 1
    }
  }
}
