package spillway.bench;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import spillway.SpillFile;
import spillway.SpillPlan;

/**
 * Spill write throughput: one operation appends one direct buffer (64 KiB or 1 MiB) to a spill
 * file of a {@link SpillPlan} through {@link SpillFile#write} — the framed file the product
 * writes, in the executor's default format ({@link DefaultSpillFormat}: cut into 256 KiB chunks,
 * each offered to lz4 and checked by CRC-32C) — against a plain {@link FileChannel#write} of the
 * same buffer to a file in the same directory (the plan's own spill directory). Bytes per second
 * are operations per second times the buffer size. The buffer holds random bytes, which lz4 cannot
 * shrink: every chunk is tried and then stored as it is, the most bytes a chunk can put on disk.
 *
 * <p>Each file is replaced after {@value #FILE_BYTES} bytes, by both implementations the same way
 * (release or delete, then create), so the disk never holds more than one such file per thread.
 * The file is deleted long before the kernel writes it back, so this measures the write path down
 * to the page cache (framing, syscall, copy, accounting): the part where the two can differ.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@State(Scope.Thread)
public class WriteThroughputBench {
  static final long FILE_BYTES = 64L << 20;

  @Param({"65536", "1048576"})
  public int bufferSize;

  private LocalDirs local;
  private ByteBuffer buf;
  private SpillPlan plan;
  private SpillFile spillFile; // the current spill file
  private Path spillDir; // the plan's directory, where the FileChannel files go too
  private FileChannel channel; // the current plain file
  private Path channelPath;
  private long channelBytes;
  private int channelFiles;

  @Setup(Level.Trial)
  public void setUp() throws IOException {
    local = LocalDirs.create("write", 1);
    buf = ByteBuffer.allocateDirect(bufferSize);
    byte[] random = new byte[bufferSize];
    new Random(1).nextBytes(random);
    buf.put(random).clear();
    DefaultSpillFormat.configure();
    plan = SpillPlan.create(local.paths, LocalDirs.LIMIT);
    spillFile = plan.createSpillFile();
    spillDir = Paths.get(spillFile.path()).getParent();
    openChannel();
  }

  private void openChannel() throws IOException {
    channelPath = spillDir.resolve("filechannel-" + channelFiles++);
    channel = FileChannel.open(channelPath, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
    channelBytes = 0;
  }

  @TearDown(Level.Trial)
  public void tearDown() throws IOException {
    channel.close();
    Files.delete(channelPath); // first: the plan's release leaves a directory with foreign files
    plan.close();
    local.checkEmpty();
    local.delete();
  }

  @Benchmark
  public int spillFileWrite() throws IOException {
    if (spillFile.bytesWritten() >= FILE_BYTES) {
      spillFile.release();
      spillFile = plan.createSpillFile();
    }
    spillFile.write(buf, 0, bufferSize);
    return bufferSize;
  }

  @Benchmark
  public int fileChannelWrite() throws IOException {
    if (channelBytes >= FILE_BYTES) {
      channel.close();
      Files.delete(channelPath);
      openChannel();
    }
    buf.clear();
    int n = 0;
    while (buf.hasRemaining()) {
      n += channel.write(buf);
    }
    channelBytes += n;
    return n;
  }
}
