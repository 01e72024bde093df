package spillway.bench;

import java.io.IOException;
import java.nio.ByteBuffer;
import spillway.NativeSpill;
import spillway.SpillFile;
import spillway.SpillPlan;

/**
 * A plain program for counting system calls per plan with {@code strace -c -f}: it builds 8
 * local dirs, runs {@value #WARMUP} warm-up plans, then the requested number of plans of one
 * kind. project/bench.sh runs it twice per kind, with 0 and with N plans, and divides the
 * difference by N, so that everything the JVM does on its own (startup, class loading, the
 * warm-up) cancels out.
 *
 * <p>Usage: {@code SyscallDriver <kind> <plans>}, kind one of {@code lazy-nospill},
 * {@code eager-nospill}, {@code lazy-firstspill}, {@code eager-firstspill}; the same plans as
 * {@link PlanLifecycleBench} and {@link FirstSpillBench} with 8 dirs.
 */
public final class SyscallDriver {
  static final int DIRS = 8;
  static final int WARMUP = 200;

  private SyscallDriver() {}

  public static void main(String[] args) throws IOException {
    if (args.length != 2) {
      System.err.println("usage: SyscallDriver lazy-nospill|eager-nospill|lazy-firstspill|eager-firstspill <plans>");
      System.exit(2);
    }
    String kind = args[0];
    int plans = Integer.parseInt(args[1]);
    LocalDirs local = LocalDirs.create("strace-" + kind, DIRS);
    DefaultSpillFormat.configure();
    ByteBuffer oneByte = ByteBuffer.allocateDirect(1).put(0, (byte) 42);
    long sink = 0;
    try {
      for (int i = 0; i < WARMUP + plans; i++) {
        sink += plan(kind, local, oneByte);
      }
      local.checkEmpty();
    } finally {
      local.delete();
    }
    // Printed so the loop's results are used; also a check that the kind ran.
    System.out.println(kind + ": " + plans + " plans after " + WARMUP + " warm-up, checksum " + sink);
  }

  private static long plan(String kind, LocalDirs local, ByteBuffer oneByte) throws IOException {
    switch (kind) {
      case "lazy-nospill": {
        long plan = NativeSpill.createPlan(local.paths, LocalDirs.LIMIT);
        NativeSpill.releasePlan(plan);
        return plan & 1;
      }
      case "eager-nospill": {
        EagerPlan plan = EagerPlan.create(local.roots);
        plan.release();
        return plan.dirCount();
      }
      case "lazy-firstspill": {
        try (SpillPlan plan = SpillPlan.create(local.paths, LocalDirs.LIMIT)) {
          SpillFile file = plan.createSpillFile();
          file.write(oneByte, 0, 1);
          file.finishWrite();
          return file.bytesWritten();
        }
      }
      case "eager-firstspill": {
        EagerPlan plan = EagerPlan.create(local.roots);
        try {
          oneByte.clear();
          return plan.spill(oneByte).getNameCount();
        } finally {
          plan.release();
        }
      }
      default:
        throw new IllegalArgumentException("unknown kind " + kind);
    }
  }
}
