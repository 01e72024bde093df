package spillway.bench;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import spillway.SpillFile;
import spillway.SpillPlan;

/**
 * A plan that spills once, with 8 local dirs: build, create one spill file, write 1 byte, close
 * it, release. Spillway's file is the framed file the product writes ({@link SpillPlan}, in the
 * executor's default format: {@link DefaultSpillFormat}), whose header and one chunk reach the
 * disk when the file is finished; it creates one plan directory (in the root the file lands in).
 * The eager baseline has already created 8 when the plan was built. The local dirs are shared by
 * all threads, as in {@link PlanLifecycleBench}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class FirstSpillBench {
  static final int DIRS = 8;

  @State(Scope.Benchmark)
  public static class Dirs {
    LocalDirs local;

    @Setup(Level.Trial)
    public void setUp() {
      local = LocalDirs.create("first-spill", DIRS);
      DefaultSpillFormat.configure();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
      local.checkEmpty();
      local.delete();
    }
  }

  /** The byte each spill writes, in a direct buffer, one per thread (its position is mutable). */
  @State(Scope.Thread)
  public static class OneByte {
    final ByteBuffer buf = ByteBuffer.allocateDirect(1).put(0, (byte) 42);
  }

  @Benchmark
  public long lazy(Dirs d, OneByte b) throws IOException {
    // The plan's close deletes the file and the plan's one directory.
    try (SpillPlan plan = SpillPlan.create(d.local.paths, LocalDirs.LIMIT)) {
      SpillFile file = plan.createSpillFile();
      file.write(b.buf, 0, 1);
      file.finishWrite(); // the header and the one chunk go to disk
      return file.bytesWritten();
    }
  }

  @Benchmark
  public Path eager(Dirs d, OneByte b) throws IOException {
    EagerPlan plan = EagerPlan.create(d.local.roots);
    try {
      b.buf.clear();
      return plan.spill(b.buf);
    } finally {
      plan.release(); // deletes all 8 directories, the file with its directory
    }
  }
}
