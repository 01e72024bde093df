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
 * eager baseline ({@link EagerPlan}), with an empty JNI call as the floor ({@link NativeFloor}, in
 * the library's test build). Two ways to name the
 * local dirs: a registration made once ({@link NativeSpill#registerLocalDirs}, then {@link
 * NativeSpill#createPlanIn} per plan: what the Spark shim does), and the String[] passed on every
 * call ({@link NativeSpill#createPlan}: recognised in Java by its content after its first call,
 * then made by createPlanIn).
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

  /** 1, 4 or 8 local dirs, and their registration with the library. */
  @State(Scope.Benchmark)
  public static class Dirs {
    @Param({"1", "4", "8"})
    public int dirs;

    LocalDirs local;
    long registered;

    @Setup(Level.Trial)
    public void setUp() {
      local = LocalDirs.create("lifecycle", dirs);
      registered = NativeSpill.registerLocalDirs(local.paths);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
      NativeSpill.releaseLocalDirs(registered);
      local.checkEmpty();
      local.delete();
    }
  }

  /** The executor's path: every plan from the dirs registered once. No path is read per plan. */
  @Benchmark
  public long lazyDirsHandle(Dirs d) throws IOException {
    long plan = NativeSpill.createPlanIn(d.registered, LocalDirs.LIMIT, Long.MAX_VALUE);
    NativeSpill.releasePlan(plan);
    return plan;
  }

  /**
   * A caller that has only the array: the same String[] for every plan, which NativeSpill copies
   * and compares with the lists the library accepted before, then creates the plan in their
   * registration (the first call reads, converts and validates it in the library).
   */
  @Benchmark
  public long lazySameDirs(Dirs d) throws IOException {
    long plan = NativeSpill.createPlan(d.local.paths, LocalDirs.LIMIT);
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

  /**
   * The floor: one empty call into the library (its test build, which only adds that call). A
   * plan is two calls (create, release).
   */
  @Benchmark
  public void floorNoop() {
    NativeFloor.emptyCall();
  }
}
