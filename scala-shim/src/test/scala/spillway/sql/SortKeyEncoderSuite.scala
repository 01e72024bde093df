package spillway.sql

import java.math.{BigDecimal => JBigDecimal, BigInteger}
import java.util.Arrays

import scala.util.Random

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Ascending, BoundReference, Descending, InterpretedOrdering, NullsFirst, NullsLast, SortOrder, UnsafeProjection}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/**
 * The key encoding against Spark's own ordering (`InterpretedOrdering` over the same `SortOrder`s):
 * for every supported type, both directions and both null orderings, the unsigned byte order of
 * the encoded keys must agree with Spark's comparison on every pair of values, equal included.
 */
class SortKeyEncoderSuite extends AnyFunSuite {
  import SortKeyEncoderSuite._

  private val directions = for (asc <- Seq(true, false); nullsFirst <- Seq(true, false)) yield (asc, nullsFirst)

  private def sortOrder(ordinal: Int, dt: DataType, asc: Boolean, nullsFirst: Boolean): SortOrder =
    SortOrder(BoundReference(ordinal, dt, nullable = true), if (asc) Ascending else Descending,
      if (nullsFirst) NullsFirst else NullsLast, Seq.empty)

  /** Every pair of `rows`: sign of the byte comparison == sign of Spark's. */
  private def assertAgrees(rows: IndexedSeq[InternalRow], orders: Seq[SortOrder]): Unit = {
    val spark = new InterpretedOrdering(orders)
    val encoder = new SortKeyEncoder(orders.map(SortKeyEncoder.Key(_)))
    val keys = rows.map(encoder.encode)
    var checked = 0
    for (a <- rows.indices; b <- rows.indices) {
      val expected = Integer.signum(spark.compare(rows(a), rows(b)))
      val actual = Integer.signum(Arrays.compareUnsigned(keys(a), keys(b)))
      if (expected != actual) {
        fail(s"${orders.map(_.sql).mkString(", ")}: Spark compares ${show(rows(a), orders)} to ${show(rows(b), orders)} " +
          s"as $expected, the encoded keys ${hex(keys(a))} and ${hex(keys(b))} as $actual")
      }
      checked += 1
    }
    assert(checked == rows.size * rows.size)
    // Sorting by the encoded bytes gives Spark's order.
    val byBytes = rows.indices.sortWith((a, b) => Arrays.compareUnsigned(keys(a), keys(b)) < 0).map(rows)
    byBytes.sliding(2).foreach { case Seq(x, y) => assert(spark.compare(x, y) <= 0); case _ => }
  }

  for ((name, dt, values) <- typedValues) {
    test(s"$name: the byte order of the encoded keys is Spark's, in every direction and null ordering") {
      assert(SortKeyEncoder.isSupported(dt) && SortKeyEncoder.unsupportedReason(dt).isEmpty)
      val rows = (values :+ null).map(v => InternalRow(v)).toIndexedSeq
      assert(rows.size > 10 || dt == BooleanType || dt == NullType)
      for ((asc, nullsFirst) <- directions) assertAgrees(rows, Seq(sortOrder(0, dt, asc, nullsFirst)))
    }
  }

  test("a null of a fixed-width type is as long as a value: its flag, then the encoding of the type's zero") {
    val fixedWidth = typedValues.filter {
      case (_, _: StringType | BinaryType | NullType, _) => false
      case _ => true
    }
    assert(fixedWidth.size > 15)
    for ((name, dt, values) <- fixedWidth; (asc, nullsFirst) <- directions) {
      val encoder = new SortKeyEncoder(Seq(SortKeyEncoder.Key(dt, asc, nullsFirst)))
      val nullKey = encoder.encode(InternalRow(null))
      val zeroKey = encoder.encode(InternalRow(zeroOf(dt)))
      val what = s"$name ${if (asc) "ASC" else "DESC"} NULLS ${if (nullsFirst) "FIRST" else "LAST"}"
      assert(nullKey.head == (if (nullsFirst) 0 else 2), s"$what: ${hex(nullKey)}")
      assert(hex(nullKey.tail) == hex(zeroKey.tail), s"$what: null ${hex(nullKey)}, zero ${hex(zeroKey)}")
      values.foreach(v => assert(encoder.encode(InternalRow(v)).length == nullKey.length, s"$what: $v"))
    }
  }

  /** What `encodeAt` writes for `row`, read back from native memory; asserts it wrote no byte outside the key. */
  private def encodedAt(encoder: SortKeyEncoder, row: InternalRow): Array[Byte] = {
    val guard = 8
    val mem = Platform.allocateMemory(encoder.fixedLength + 2L * guard)
    try {
      Platform.setMemory(mem, 0x55.toByte, encoder.fixedLength + 2L * guard)
      encoder.encodeAt(row, mem + guard)
      val all = new Array[Byte](encoder.fixedLength + 2 * guard)
      Platform.copyMemory(null, mem, all, Platform.BYTE_ARRAY_OFFSET, all.length.toLong)
      assert(all.take(guard).forall(_ == 0x55) && all.takeRight(guard).forall(_ == 0x55), "a byte outside the key was written")
      all.slice(guard, guard + encoder.fixedLength)
    } finally Platform.freeMemory(mem)
  }

  test("encodeAt writes in place the bytes encode appends, for every type of fixed width") {
    val inPlace = typedValues.filter { case (_, dt, _) => new SortKeyEncoder(Seq(SortKeyEncoder.Key(dt, true, true))).fixedLength >= 0 }
    assert(inPlace.map(_._1).toSet == typedValues.map(_._1).toSet -- Seq("string", "binary", "decimal(19,4)", "decimal(38,0)",
      "decimal(38,10)", "decimal(38,38)"), "every type of fixed width but the wide decimals")
    for ((name, dt, values) <- inPlace; (asc, nullsFirst) <- directions) {
      val encoder = new SortKeyEncoder(Seq(SortKeyEncoder.Key(dt, asc, nullsFirst)))
      val toUnsafe = UnsafeProjection.create(Array[DataType](dt))
      for (v <- values :+ null) {
        val row = InternalRow(v)
        val expected = encoder.encode(row)
        assert(expected.length == encoder.fixedLength, s"$name: $v")
        assert(hex(encodedAt(encoder, row)) == hex(expected), s"$name ${if (asc) "ASC" else "DESC"}: $v")
        // The same value in an UnsafeRow, as the sort reads it (a compact decimal is read as its long there).
        val unsafe = toUnsafe(row)
        assert(hex(encoder.encode(unsafe)) == hex(expected), s"$name ${if (asc) "ASC" else "DESC"}, UnsafeRow: $v")
        assert(hex(encodedAt(encoder, unsafe)) == hex(expected), s"$name ${if (asc) "ASC" else "DESC"}, UnsafeRow: $v")
      }
    }
    // Several keys, from columns of a wider row (at ordinals), nulls among them.
    val random = new Random(11)
    val keys = Seq(SortKeyEncoder.Key(IntegerType, true, false), SortKeyEncoder.Key(LongType, false, true),
      SortKeyEncoder.Key(DoubleType, false, false), SortKeyEncoder.Key(ShortType, true, true))
    val encoder = new SortKeyEncoder(keys, Array(3, 0, 2, 1))
    assert(encoder.fixedLength == 5 + 9 + 9 + 3)
    for (_ <- 0 until 200) {
      def orNull(v: Any): Any = if (random.nextInt(5) == 0) null else v
      val row = InternalRow(orNull(random.nextLong()), orNull(random.nextInt().toShort), orNull(random.nextGaussian()),
        orNull(random.nextInt()))
      assert(hex(encodedAt(encoder, row)) == hex(encoder.encode(row)))
    }
    // A string or a wide decimal among the keys: no fixed length.
    assert(new SortKeyEncoder(keys :+ SortKeyEncoder.Key(StringType, true, true)).fixedLength == -1)
    assert(new SortKeyEncoder(keys :+ SortKeyEncoder.Key(DecimalType(20, 2), true, true)).fixedLength == -1)
  }

  test("several keys of mixed types and directions: the byte order is Spark's (ties go to the next key)") {
    val random = new Random(7)
    val ints = Seq[Any](null, 0, -1, 1, Int.MinValue)
    val strings = Seq[Any](null, "", "a", "a\u0000", "ab", "\u0000").map(s => if (s == null) null else UTF8String.fromString(s.toString))
    val doubles = Seq[Any](null, Double.NaN, -0.0d, 0.0d, Double.NegativeInfinity, 1.5d)
    val decimals = Seq[Any](null, Decimal(new JBigDecimal("-99999999999999999999999999999.999999999")), Decimal(0), Decimal(1))
    val types = Seq(IntegerType, StringType, DoubleType, DecimalType(38, 9))
    val rows = IndexedSeq.fill(250) {
      InternalRow(ints(random.nextInt(ints.size)), strings(random.nextInt(strings.size)),
        doubles(random.nextInt(doubles.size)), decimal38(decimals(random.nextInt(decimals.size))))
    }
    for (round <- 0 until 6) {
      val orders = types.indices.map(i => sortOrder(i, types(i), random.nextBoolean(), random.nextBoolean()))
      withClue(s"round $round: ") { assertAgrees(rows, orders) }
    }
  }

  test("unsupported key types are named with the reason") {
    val cases = Seq(
      ArrayType(IntegerType) -> "array<int>",
      new StructType().add("a", IntegerType) -> "struct<a:int>",
      MapType(StringType, IntegerType) -> "map<string,int>",
      CalendarIntervalType -> "interval") ++ SparkLineTestTypes.variant.map(_ -> "variant")
    for ((dt, name) <- cases) {
      assert(!SortKeyEncoder.isSupported(dt))
      val reason = SortKeyEncoder.unsupportedReason(dt)
      assert(reason.exists(_.toLowerCase.contains(name)), s"$dt: $reason")
    }
  }

  // Collations came with Spark 4.0: strings under one sort by their bytes only under UTF8_BINARY.
  for (lcase <- SparkLineTestTypes.collated("UTF8_LCASE"); binary <- SparkLineTestTypes.collated("UTF8_BINARY")) {
    test("strings under a collation other than UTF8_BINARY are named with the reason") {
      assert(!SortKeyEncoder.isSupported(lcase))
      assert(SortKeyEncoder.unsupportedReason(lcase).exists(_.contains("UTF8_LCASE")))
      assert(SortKeyEncoder.isSupported(binary))
    }
  }
}

object SortKeyEncoderSuite {
  private def decimal38(d: Any): Any = d match {
    case null => null
    case d => Decimal(d.asInstanceOf[Decimal].toJavaBigDecimal.setScale(9), 38, 9)
  }

  private def hex(b: Array[Byte]): String = b.map(x => f"${x & 0xff}%02x").mkString

  private def show(row: InternalRow, orders: Seq[SortOrder]): String =
    orders.indices.map(i => if (row.isNullAt(i)) "null" else row.get(i, orders(i).dataType) match {
      case b: Array[Byte] => "0x" + hex(b)
      case v => String.valueOf(v)
    }).mkString("(", ", ", ")")

  private val random = new Random(12)

  private def integral(min: Long, max: Long, n: Int): Seq[Long] =
    Seq(min, max, 0L, -1L, 1L, min + 1, max - 1) ++ Seq.fill(n)(min + (BigInt(random.nextLong()).abs % (BigInt(max) - BigInt(min) + 1)).toLong)

  private val floatSpecials = Seq(Float.NaN, java.lang.Float.intBitsToFloat(0xffc00001), Float.PositiveInfinity,
    Float.NegativeInfinity, 0.0f, -0.0f, Float.MinPositiveValue, -Float.MinPositiveValue, Float.MaxValue, Float.MinValue,
    1.0f, -1.0f, 1.0000001f)
  private val doubleSpecials = Seq(Double.NaN, java.lang.Double.longBitsToDouble(0xfff8000000000001L), Double.PositiveInfinity,
    Double.NegativeInfinity, 0.0d, -0.0d, Double.MinPositiveValue, -Double.MinPositiveValue, Double.MaxValue, Double.MinValue,
    1.0d, -1.0d, java.lang.Math.nextUp(1.0d))

  private def decimals(precision: Int, scale: Int, n: Int): Seq[Any] = {
    val max = BigInteger.TEN.pow(precision).subtract(BigInteger.ONE)
    val unscaled = Seq(max, max.negate, BigInteger.ZERO, BigInteger.ONE, BigInteger.ONE.negate, max.subtract(BigInteger.ONE)) ++
      Seq.fill(n) {
        val digits = 1 + random.nextInt(precision)
        val v = new BigInteger(BigInteger.TEN.pow(digits).bitLength + 2, new java.util.Random(random.nextLong())).mod(BigInteger.TEN.pow(digits))
        if (random.nextBoolean()) v.negate else v
      }
    unscaled.map(u => Decimal(new JBigDecimal(u, scale), precision, scale))
  }

  private val stringSpecials = Seq("", "a", "a\u0000", "a\u0000b", "a\u0000\u0000", "ab", "b", "\u0000", "\u0000\u0000",
    "\u0001", "\u007f", "\u0080", "é", "e\u0301", "日本", "日本語", "\ud83d\ude00", "\ud83d\ude00a", "\uffff", "\uFFFD",
    "z" * 300, "z" * 299 + "a", "z" * 300 + "\u0000")

  private def randomString(): String = {
    val alphabet = "a\u0000\u00ffé日\ud83d\ude00z"
    val cps = alphabet.codePoints().toArray
    val n = random.nextInt(8)
    val sb = new java.lang.StringBuilder
    (0 until n).foreach(_ => sb.appendCodePoint(cps(random.nextInt(cps.length))))
    sb.toString
  }

  private val binarySpecials: Seq[Array[Byte]] = Seq(Array.empty, Array(0), Array(0, 0), Array(0, -1), Array(-1), Array(-1, 0),
    Array(1), Array(0, 1), Array(127), Array(-128), Array.fill(100)(7.toByte), Array.fill(100)(7.toByte) :+ 0.toByte)

  /** The zero of a fixed-width type, as an internal value. */
  def zeroOf(dt: DataType): Any = dt match {
    case BooleanType => false
    case ByteType => 0.toByte
    case ShortType => 0.toShort
    case IntegerType | DateType | _: YearMonthIntervalType => 0
    case FloatType => 0.0f
    case DoubleType => 0.0d
    case _: DecimalType => Decimal(0)
    case _ => 0L // long, timestamps, day-time intervals, time
  }

  /** (name, type, internal values without null) for every supported type. */
  val typedValues: Seq[(String, DataType, Seq[Any])] = Seq(
    ("boolean", BooleanType, Seq(true, false)),
    ("byte", ByteType, integral(Byte.MinValue, Byte.MaxValue, 40).map(_.toByte)),
    ("short", ShortType, integral(Short.MinValue, Short.MaxValue, 60).map(_.toShort)),
    ("int", IntegerType, integral(Int.MinValue, Int.MaxValue, 80).map(_.toInt)),
    ("long", LongType, integral(Long.MinValue, Long.MaxValue, 80)),
    ("float", FloatType, floatSpecials ++ Seq.fill(60)((random.nextGaussian() * math.pow(10, random.nextInt(30) - 15)).toFloat)),
    ("double", DoubleType, doubleSpecials ++ Seq.fill(60)(random.nextGaussian() * math.pow(10, random.nextInt(200) - 100))),
    ("decimal(1,0)", DecimalType(1, 0), decimals(1, 0, 20)),
    ("decimal(9,2)", DecimalType(9, 2), decimals(9, 2, 60)),
    ("decimal(18,0)", DecimalType(18, 0), decimals(18, 0, 60)),
    ("decimal(18,18)", DecimalType(18, 18), decimals(18, 18, 60)),
    ("decimal(19,4)", DecimalType(19, 4), decimals(19, 4, 60)),
    ("decimal(38,0)", DecimalType(38, 0), decimals(38, 0, 80)),
    ("decimal(38,10)", DecimalType(38, 10), decimals(38, 10, 80)),
    ("decimal(38,38)", DecimalType(38, 38), decimals(38, 38, 60)),
    ("string", StringType, (stringSpecials ++ Seq.fill(80)(randomString())).map(UTF8String.fromString)),
    ("binary", BinaryType, binarySpecials ++ Seq.fill(60)(Array.fill(random.nextInt(6))(Seq[Byte](0, 1, -1, 127, -128)(random.nextInt(5))))),
    ("date", DateType, integral(Int.MinValue, Int.MaxValue, 20).map(_.toInt) ++ Seq(-719162, -1, 0, 1, 2932896)),
    ("timestamp", TimestampType, integral(Long.MinValue, Long.MaxValue, 40) ++ Seq(-62135596800000000L, -1L, 253402300799999999L)),
    ("timestamp_ntz", TimestampNTZType, integral(Long.MinValue, Long.MaxValue, 40)),
    ("interval year to month", YearMonthIntervalType(), integral(Int.MinValue, Int.MaxValue, 40).map(_.toInt)),
    ("interval day to second", DayTimeIntervalType(), integral(Long.MinValue, Long.MaxValue, 40)),
    ("void", NullType, Seq.empty)) ++
    SparkLineTestTypes.time.map(t => ("time", t, integral(0L, 86399999999999L, 40)))
}
