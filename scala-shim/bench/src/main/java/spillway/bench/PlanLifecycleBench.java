package spillway.bench;

import java.io.IOException;
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
import spillway.NativeSpill;

/**
 * A plan that never spills, from build to release: Spillway through the JNI library against the
 * eager baseline ({@link EagerPlan}), with an empty JNI call as the floor.
 *
 * <p>The local dirs are shared by all benchmark threads ({@link Scope#Benchmark}), as an
 * executor's task threads share its local dirs: with two threads the eager baseline creates and
 * removes its directories in the same parents concurrently, which is the contention a real
 * executor sees; the lazy plans share the roots too but never touch them.
 *
 * <p>Each method returns what it made so that nothing can be optimised away (JNI calls cannot be
 * anyway); JMH consumes return values with a Blackhole.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class PlanLifecycleBench {

  /** 1, 4 or 8 local dirs. */
  @State(Scope.Benchmark)
  public static class Dirs {
    @Param({"1", "4", "8"})
    public int dirs;

    LocalDirs local;

    @Setup(Level.Trial)
    public void setUp() {
      local = LocalDirs.create("lifecycle", dirs);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
      local.checkEmpty();
      local.delete();
    }
  }

  /** Always 8 local dirs, for the uncached variant only. */
  @State(Scope.Benchmark)
  public static class EightDirs {
    LocalDirs local;

    @Setup(Level.Trial)
    public void setUp() {
      local = LocalDirs.create("lifecycle-fresh", 8);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
      local.checkEmpty();
      local.delete();
    }
  }

  /**
   * The usual case: the same String[] of the same String objects for every plan, as the shim
   * passes the executor's local dirs. The library recognises the set by the identity of its
   * elements and skips converting and validating the paths.
   */
  @Benchmark
  public long lazySameDirs(Dirs d) {
    long plan = NativeSpill.createPlan(d.local.paths, LocalDirs.LIMIT);
    NativeSpill.releasePlan(plan);
    return plan;
  }

  /**
   * The uncached path, for honesty: a new String[] of new String objects for every plan, so the
   * library converts the UTF-16 strings and parses the paths on every call. The allocation of
   * the array and strings is included; it is what a caller that builds them per plan pays.
   */
  @Benchmark
  public long lazyFreshDirs(EightDirs d) {
    String[] shared = d.local.paths;
    String[] fresh = new String[shared.length];
    for (int i = 0; i < shared.length; i++) {
      fresh[i] = new String(shared[i]); // equal contents, a different object
    }
    long plan = NativeSpill.createPlan(fresh, LocalDirs.LIMIT);
    NativeSpill.releasePlan(plan);
    return plan;
  }

  /** DataFusion's Directories mode: a temp dir created in every root and removed, per plan. */
  @Benchmark
  public int eager(Dirs d) throws IOException {
    EagerPlan plan = EagerPlan.create(d.local.roots);
    plan.release();
    return plan.dirCount();
  }

  /** The floor: one empty call into the same library. A plan is two calls (create, release). */
  @Benchmark
  public void floorNoop() {
    NativeSpill.noop();
  }
}
