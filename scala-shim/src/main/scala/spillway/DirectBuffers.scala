package spillway

import java.nio.{Buffer, ByteBuffer}

import org.apache.spark.unsafe.Platform

/**
 * The native address of a direct `ByteBuffer`, so that rows can be copied into a batch, and read
 * out of one, with `Platform.copyMemory` / `UnsafeRow.pointTo(null, address, size)` and no
 * intermediate array. The address is read from `java.nio.Buffer.address` through Unsafe's field
 * offset, found once by reflection (as Spark's `Platform` finds Unsafe itself), so no JVM module
 * needs to be opened.
 */
object DirectBuffers {
  private lazy val addressOffset: Long = {
    val unsafeField = Class.forName("sun.misc.Unsafe").getDeclaredField("theUnsafe")
    unsafeField.setAccessible(true)
    val unsafe = unsafeField.get(null)
    unsafe.getClass.getMethod("objectFieldOffset", classOf[java.lang.reflect.Field])
      .invoke(unsafe, classOf[Buffer].getDeclaredField("address")).asInstanceOf[Long]
  }

  /**
   * The address of `buffer`'s first byte. Valid only while `buffer` is reachable: the JVM frees a
   * direct buffer's memory once the buffer is collected.
   */
  def address(buffer: ByteBuffer): Long = {
    require(buffer.isDirect, "a direct ByteBuffer is needed (ByteBuffer.allocateDirect)")
    Platform.getLong(buffer, addressOffset)
  }
}
