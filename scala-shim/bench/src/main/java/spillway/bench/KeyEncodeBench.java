package spillway.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.unsafe.Platform;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import scala.jdk.javaapi.CollectionConverters;

import spillway.SortBatch;
import spillway.sql.KeyBuffer;
import spillway.sql.SortKeyEncoder;

/**
 * The SQL sort's key encoding, per row, its two ways side by side: into a reused buffer and then
 * copied into the sort's batch ({@code viaBuffer}, what keys of variable length take), and written
 * in place at the batch's address ({@code inPlace}, what keys of fixed-width types take). Keys as
 * the narrow shape's ({@code l_orderkey}, a long) and the two-key shape's (a date and a
 * decimal(15,2)), read from UnsafeRows as the sort reads them.
 *
 * <p>Spark is needed on the classpath: run with {@code project/sbt "bench/runMain
 * org.openjdk.jmh.Main KeyEncodeBench"} (bench/runMain forks with the full classpath), not
 * through project/bench.sh.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(2)
public class KeyEncodeBench {
  private static final int ROWS = 4096;

  @Param({"long", "date,decimal"})
  public String keys;

  private UnsafeRow[] rows;
  private SortKeyEncoder encoder;
  private KeyBuffer buffer;
  private long batch;

  @Setup
  public void setUp() {
    Random random = new Random(42);
    boolean twoKeys = keys.equals("date,decimal");
    List<SortKeyEncoder.Key> keyList = new ArrayList<>();
    if (twoKeys) {
      keyList.add(new SortKeyEncoder.Key(DataTypes.DateType, true, true));
      keyList.add(new SortKeyEncoder.Key(DataTypes.createDecimalType(15, 2), true, true));
    } else {
      keyList.add(new SortKeyEncoder.Key(DataTypes.LongType, true, true));
    }
    encoder = new SortKeyEncoder(CollectionConverters.asScala(keyList).toSeq(), twoKeys ? new int[] {0, 1} : new int[] {0});
    if (encoder.fixedLength() < 0) throw new IllegalStateException("the keys have no fixed length");
    rows = new UnsafeRow[ROWS];
    for (int i = 0; i < ROWS; i++) {
      UnsafeRow row = new UnsafeRow(2);
      byte[] bytes = new byte[8 + 2 * 8];
      row.pointTo(bytes, bytes.length);
      if (twoKeys) {
        row.setInt(0, 8000 + random.nextInt(2500));
        row.setDecimal(1, Decimal.apply(random.nextInt(10_000_000), 15, 2), 15);
      } else {
        row.setLong(0, 1 + random.nextInt(6_000_000));
        row.setLong(1, random.nextLong());
      }
      rows[i] = row;
    }
    buffer = new KeyBuffer(64);
    batch = Platform.allocateMemory((long) ROWS * encoder.fixedLength());
  }

  @TearDown
  public void tearDown() {
    Platform.freeMemory(batch);
  }

  @Benchmark
  @OperationsPerInvocation(ROWS)
  public long viaBuffer() {
    long at = batch;
    for (UnsafeRow row : rows) {
      buffer.reset();
      encoder.encode(row, buffer);
      SortBatch.copyTo(buffer.bytes(), Platform.BYTE_ARRAY_OFFSET, at, buffer.length());
      at += buffer.length();
    }
    return at;
  }

  @Benchmark
  @OperationsPerInvocation(ROWS)
  public long inPlace() {
    long at = batch;
    int length = encoder.fixedLength();
    for (UnsafeRow row : rows) {
      encoder.encodeAt(row, at);
      at += length;
    }
    return at;
  }
}
