package spillway

import java.nio.{Buffer, ByteBuffer, ByteOrder}
import java.util.concurrent.atomic.{AtomicLong, AtomicReferenceArray}

import org.apache.spark.unsafe.Platform

/**
 * A small pool of direct buffers shared by the native sorts of a JVM (their [[NativeSortSession]]s
 * take their batches from it), so that a task running dozens of sorts (a query's sort-merge
 * joins) does not allocate fresh direct memory for each:
 * `allocateDirect` zeroes it, and only the garbage collector frees it, outside Spark's accounting.
 *
 * Buffers come in power-of-two sizes from 16 KiB to 1 MiB, at most [[SlotsPerSize]] of each and
 * [[MaxPooledBytes]] in all; a larger one is allocated for its caller alone and never pooled, and
 * a buffer given back past these bounds is left to the garbage collector. Lock-free: a take or a
 * give visits at most [[SlotsPerSize]] slots, and a sort does a few per batch size, none per row.
 *
 * Ownership: a buffer taken belongs to its taker alone, who gives it back only once nothing can
 * read or write it any more (a buffer in the pool may be handed to another thread at once). Its
 * bytes are whatever its last owner left: the taker reads only what it wrote.
 */
private[spillway] object DirectBufferPool {
  val MinBytes: Int = 16 << 10
  val MaxBytes: Int = 1 << 20
  val SlotsPerSize = 4
  val MaxPooledBytes: Long = 8L << 20

  private val MinShift = Integer.numberOfTrailingZeros(MinBytes)
  private val Sizes = Integer.numberOfTrailingZeros(MaxBytes) - MinShift + 1
  private val slots = new AtomicReferenceArray[ByteBuffer](Sizes * SlotsPerSize)
  // Bytes of the buffers in the pool: reserved before a buffer is put in, so it never passes the cap.
  private val pooled = new AtomicLong

  /**
   * A direct buffer of at least `bytes` bytes, position 0, limit its capacity, big-endian (as
   * `allocateDirect` gives): a pooled one if there is one of its size. Up to [[MaxBytes]] the
   * capacity is `bytes` rounded up to a power of two (at least [[MinBytes]]); above, `bytes`.
   */
  def take(bytes: Int): ByteBuffer = {
    require(bytes > 0, s"a buffer of $bytes bytes")
    if (bytes > MaxBytes) return ByteBuffer.allocateDirect(bytes)
    val size = sizeFor(bytes)
    val first = slotOf(size)
    var i = first
    while (i < first + SlotsPerSize) {
      val buffer = slots.get(i)
      if (buffer != null && slots.compareAndSet(i, buffer, null)) {
        pooled.addAndGet(-size)
        buffer.clear().order(ByteOrder.BIG_ENDIAN)
        return buffer
      }
      i += 1
    }
    ByteBuffer.allocateDirect(size)
  }

  /**
   * Gives back `buffer`, which nothing may read or write any more: kept if it is of a pooled
   * size and the pool has room, else left to the garbage collector.
   */
  def give(buffer: ByteBuffer): Unit = {
    val size = buffer.capacity()
    if (!buffer.isDirect || size < MinBytes || size > MaxBytes || Integer.bitCount(size) != 1) return
    if (pooled.addAndGet(size) > MaxPooledBytes) {
      pooled.addAndGet(-size)
      return
    }
    val first = slotOf(size)
    var i = first
    while (i < first + SlotsPerSize) {
      if (slots.compareAndSet(i, null, buffer)) return
      i += 1
    }
    pooled.addAndGet(-size) // every slot of its size is taken
  }

  /** Bytes of the buffers in the pool now, at most [[MaxPooledBytes]]. */
  def pooledBytes: Long = pooled.get

  /**
   * The native address of `buffer`'s first byte, so that records can be copied into a batch, and
   * read out of one, with `Platform.copyMemory` / `UnsafeRow.pointTo(null, address, size)` and no
   * intermediate array. Valid only while `buffer` is reachable: the JVM frees a direct buffer's
   * memory once the buffer is collected.
   */
  def address(buffer: ByteBuffer): Long = {
    require(buffer.isDirect, "a direct ByteBuffer is needed (ByteBuffer.allocateDirect)")
    Platform.getLong(buffer, addressOffset)
  }

  // java.nio.Buffer.address, read through Unsafe's field offset, found once by reflection (as
  // Spark's Platform finds Unsafe itself), so that no JVM module needs to be opened.
  private lazy val addressOffset: Long = {
    val unsafeField = Class.forName("sun.misc.Unsafe").getDeclaredField("theUnsafe")
    unsafeField.setAccessible(true)
    val unsafe = unsafeField.get(null)
    unsafe.getClass.getMethod("objectFieldOffset", classOf[java.lang.reflect.Field])
      .invoke(unsafe, classOf[Buffer].getDeclaredField("address")).asInstanceOf[Long]
  }

  private def sizeFor(bytes: Int): Int = math.max(MinBytes, Integer.highestOneBit(bytes - 1) << 1)

  private def slotOf(size: Int): Int = (Integer.numberOfTrailingZeros(size) - MinShift) * SlotsPerSize
}
