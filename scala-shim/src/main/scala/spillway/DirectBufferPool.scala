package spillway

import java.nio.{ByteBuffer, ByteOrder}
import java.util.concurrent.atomic.{AtomicLong, AtomicReferenceArray}

/**
 * A small pool of direct buffers shared by the native sorts of a JVM, so that a task running
 * dozens of sorts (a query's sort-merge joins) does not allocate fresh direct memory for each:
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
  private val reused = new AtomicLong
  private val kept = new AtomicLong

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
        reused.incrementAndGet()
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
      if (slots.compareAndSet(i, null, buffer)) {
        kept.incrementAndGet()
        return
      }
      i += 1
    }
    pooled.addAndGet(-size) // every slot of its size is taken
  }

  /** Buffers handed out from the pool rather than allocated, since the JVM started (for tests). */
  private[spillway] def reusedCount: Long = reused.get

  /** Buffers given back and kept, since the JVM started (for tests). */
  private[spillway] def keptCount: Long = kept.get

  /** Bytes of the buffers in the pool now (for tests). */
  private[spillway] def pooledBytes: Long = pooled.get

  private def sizeFor(bytes: Int): Int = math.max(MinBytes, Integer.highestOneBit(bytes - 1) << 1)

  private def slotOf(size: Int): Int = (Integer.numberOfTrailingZeros(size) - MinShift) * SlotsPerSize
}
