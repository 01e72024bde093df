package spillway

import java.io.{InputStream, IOException, OutputStream}
import java.nio.ByteBuffer
import java.nio.channels.{ClosedChannelException, WritableByteChannel}
import java.util.Objects
import java.util.concurrent.atomic.{AtomicBoolean, AtomicLong}

import scala.util.control.NonFatal

/**
 * A spill file of a [[SpillPlan]], in the executor's spill format: what is written is cut into
 * chunks, compressed (`spark.spillway.compression.codec`) and, with `spark.io.encryption.enabled`,
 * encrypted by the library, and [[inputStream]] decodes it; the operator only writes and reads
 * bytes. Every chunk goes through the native library as it fills, so the plan's limit holds over
 * the bytes on disk: a chunk that would exceed it fails the write (or the [[finishWrite]] that
 * writes the last chunk) with [[SpillLimitExceededException]], and the file then takes no more
 * writes and cannot be read: release it. The file keeps its whole chunks until then.
 */
final class SpillFile private[spillway] (plan: SpillPlan, handle: Long, val path: String) {
  private val released = new AtomicBoolean(false)
  private val written = new AtomicLong
  private val diskCounted = new AtomicBoolean(false)

  /** Bytes written to this file: its logical size, before compression and framing. */
  def bytesWritten: Long = written.get

  /**
   * Bytes this file takes on disk, compressed and framed: what the plan's limit and
   * [[SpillPlan.usedDiskSpace]] count. Bytes still in the current, unfilled chunk are not on disk
   * yet: after [[finishWrite]] this is the file's size.
   */
  def bytesOnDisk: Long = plan.withOpenPlan { () =>
    val sizes = new Array[Long](2)
    NativeSpill.fileSizes(handle, sizes)
    sizes(1)
  }

  /**
   * Ends the file's writing: its last chunk is written, and it takes no more writes. The output
   * stream's and the channel's `close` and [[inputStream]] call it. Idempotent (a second call
   * gives the first one's outcome).
   *
   * @throws SpillLimitExceededException if the last chunk would pass a limit (release the file)
   */
  def finishWrite(): Unit = plan.withOpenPlan { () =>
    if (released.get) throw new IllegalStateException(s"spill file $path is released")
    NativeSpill.finishWrite(handle)
    countOnDisk()
  }

  // The plan's PlanSpills gets the file's size on disk once: when it is first finished, or at its
  // release if it never was.
  private def countOnDisk(): Unit =
    if (diskCounted.compareAndSet(false, true)) plan.spills.fileOnDisk(bytesOnDisk)

  /**
   * Appends `length` bytes of `buf` from the absolute index `offset` (the buffer's position is
   * neither used nor changed). Whole chunks are written as they fill; one that would pass the
   * plan's limit fails with [[SpillLimitExceededException]], and the file takes no more writes.
   */
  def write(buf: ByteBuffer, offset: Int, length: Int): Unit = plan.withOpenPlan { () =>
    if (released.get) throw new IllegalStateException(s"spill file $path is released")
    NativeSpill.write(handle, buf, offset, length) // all or nothing: it returns length or throws
    written.addAndGet(length)
    plan.spills.fileWritten(length)
  }

  /**
   * A buffered stream appending to this file, with a buffer of `bufferSize` bytes. `close` flushes
   * it and finishes the file ([[finishWrite]]), so it can be read; the file itself stays until
   * [[release]] or the plan's release.
   */
  def outputStream(bufferSize: Int): OutputStream = new SpillOutputStream(this, bufferSize)

  // Overloads, not default arguments: Java callers see Scala defaults only as synthetic methods.
  /** [[outputStream(bufferSize:Int)*]] with [[SpillFile.DefaultBufferSize]] (64 KiB). */
  def outputStream(): OutputStream = outputStream(SpillFile.DefaultBufferSize)

  /**
   * An unbuffered channel appending to this file; each `write` is one native write. `close`
   * finishes the file ([[finishWrite]]).
   */
  def channel(): WritableByteChannel = new SpillChannel(this)

  /**
   * Reads the file from the start. Operators read spilled data back through here, so the encoding
   * stays invisible to them: the file is finished first ([[finishWrite]]: no more writes), then
   * decoded by the library, chunk by chunk with read-ahead; a chunk that was changed, cut or
   * spliced fails the read with an IOException naming the file and the chunk, never wrong bytes.
   */
  def inputStream(): InputStream = plan.withOpenPlan { () =>
    if (released.get) throw new IllegalStateException(s"spill file $path is released")
    NativeSpill.finishWrite(handle)
    countOnDisk()
    new FramedInputStream(plan, NativeSpill.openReader(handle), path)
  }

  /**
   * Deletes the file and returns its bytes to the plan. Idempotent; does nothing once the plan is
   * closed (the plan's release deleted the file).
   */
  def release(): Unit = {
    plan.ifOpen { () =>
      if (released.compareAndSet(false, true)) {
        try countOnDisk() catch { case NonFatal(_) => } // a report's figure; the release matters
        NativeSpill.releaseSpillFile(handle)
      }
    }
  }

  override def toString: String = s"SpillFile($path)"
}

object SpillFile {
  /** The buffer of [[SpillFile.outputStream()*]]: 64 KiB. */
  val DefaultBufferSize: Int = 64 * 1024
}

/**
 * Buffers in a direct buffer (the native side reads it in place, no copy across JNI); writes at
 * least as large as the buffer go straight from the caller's array.
 */
private final class SpillOutputStream(file: SpillFile, bufferSize: Int) extends OutputStream {
  require(bufferSize > 0, s"bufferSize must be positive: $bufferSize")
  private val buffer = ByteBuffer.allocateDirect(bufferSize)
  private var closed = false

  override def write(b: Int): Unit = {
    ensureOpen()
    if (!buffer.hasRemaining) flushBuffer()
    buffer.put(b.toByte)
  }

  override def write(b: Array[Byte], off: Int, len: Int): Unit = {
    ensureOpen()
    Objects.checkFromIndexSize(off, len, b.length)
    if (len >= buffer.capacity) {
      flushBuffer()
      file.write(ByteBuffer.wrap(b), off, len)
    } else {
      if (len > buffer.remaining) flushBuffer()
      buffer.put(b, off, len)
    }
  }

  override def flush(): Unit = {
    ensureOpen()
    flushBuffer()
  }

  override def close(): Unit = {
    if (!closed) {
      try {
        flushBuffer()
        file.finishWrite()
      } finally closed = true
    }
  }

  // A failed write (e.g. over the limit) leaves the file with its whole chunks and taking no more
  // writes; the buffered bytes are dropped, since no later flush could add them.
  private def flushBuffer(): Unit = {
    if (buffer.position() > 0) {
      try file.write(buffer, 0, buffer.position())
      finally buffer.clear()
    }
  }

  private def ensureOpen(): Unit = if (closed) throw new IOException(s"stream to $file is closed")
}

/** Reads a framed file through the library into a direct buffer (read in place, no JNI copy). */
private final class FramedInputStream(plan: SpillPlan, reader: Long, path: String) extends InputStream {
  private val buffer = ByteBuffer.allocateDirect(SpillFile.DefaultBufferSize)
  private var pos, end = 0
  private var eof, closed = false

  override def read(): Int = if (!fill()) -1 else { pos += 1; buffer.get(pos - 1) & 0xff }

  override def read(b: Array[Byte], off: Int, len: Int): Int = {
    Objects.checkFromIndexSize(off, len, b.length)
    if (len == 0) 0
    else if (!fill()) -1
    else {
      val n = math.min(len, end - pos)
      buffer.get(pos, b, off, n)
      pos += n
      n
    }
  }

  override def available(): Int = end - pos

  /** True when buffer[pos, end) holds bytes, reading more if needed; false at the end. */
  private def fill(): Boolean = {
    if (closed) throw new IOException(s"stream of $path is closed")
    if (pos < end) return true
    if (eof) return false
    val n = plan.withOpenPlan(() => NativeSpill.read(reader, buffer, 0, buffer.capacity()))
    if (n < 0) { eof = true; false }
    else { pos = 0; end = n; true }
  }

  override def close(): Unit = if (!closed) {
    closed = true
    plan.ifOpen(() => NativeSpill.closeReader(reader)) // a closed plan closed its readers
  }
}

private final class SpillChannel(file: SpillFile) extends WritableByteChannel {
  @volatile private var open = true

  override def write(src: ByteBuffer): Int = {
    if (!open) throw new ClosedChannelException
    val n = src.remaining()
    if (n > 0) {
      file.write(src, src.position(), n)
      src.position(src.position() + n)
    }
    n
  }

  override def isOpen: Boolean = open

  override def close(): Unit = if (open) {
    open = false
    file.finishWrite()
  }
}
