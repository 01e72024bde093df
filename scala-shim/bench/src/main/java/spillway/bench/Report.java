package spillway.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.openjdk.jmh.results.BenchmarkResult;
import org.openjdk.jmh.results.IterationResult;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.results.format.ResultFormatType;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.RunnerException;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.Options;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;
import org.openjdk.jmh.util.ListStatistics;
import org.openjdk.jmh.util.Statistics;

/**
 * Runs every JMH benchmark that sets Spillway side by side with its baseline (docs/benchmarks/index.md) in
 * one go and writes the Markdown tables: medians, the spread JMH reports, and the ratios the goals
 * are stated in. project/bench.sh runs it; it can also be run alone:
 *
 * <pre>
 * java -cp CLASSPATH -Dspillway.library.path=build/libspillway.so \
 *     -Dspillway.bench.testhooksLibrary=build/libspillway-testhooks.so spillway.bench.Report \
 *     --out build/bench/jmh.md --json-dir build/bench [--quick]
 * </pre>
 *
 * Each benchmark runs in its own forked JVM (JMH's default), so the library's caches start cold
 * in each and one benchmark's leftovers cannot colour another's. Every fork loads the product
 * library but the floor's ({@link NativeFloor}), which loads its test build. {@code --quick} cuts
 * every iteration count and time, to check that everything runs; its numbers mean nothing.
 */
public final class Report {
  private static final String PKG = "spillway.bench.";
  private static final String LIFECYCLE = PKG + "PlanLifecycleBench.";
  private static final String FIRST_SPILL = PKG + "FirstSpillBench.";
  private static final String WRITE = PKG + "WriteThroughputBench.";
  private static final String[] WRITE_SIZES = {"65536", "1048576"};

  private final boolean quick;
  private final Path jsonDir;
  private final String benchDir;
  private final String testhooksLibrary;
  private final Options base;

  private Report(boolean quick, Path jsonDir) {
    this.quick = quick;
    this.jsonDir = jsonDir;
    String lib = System.getProperty("spillway.library.path");
    if (lib == null) {
      throw new IllegalArgumentException("set -Dspillway.library.path to build/libspillway.so");
    }
    testhooksLibrary = System.getProperty(NativeFloor.LIBRARY_PROPERTY);
    if (testhooksLibrary == null) {
      throw new IllegalArgumentException("set -D" + NativeFloor.LIBRARY_PROPERTY
          + " to build/libspillway-testhooks.so (make lib-testhooks), for the floor");
    }
    benchDir = System.getProperty(LocalDirs.BASE_PROPERTY, System.getProperty("java.io.tmpdir"));
    // Modest by design: the whole `make bench` has to fit in about 15 minutes on 2 cores. The
    // 1-thread lifecycle runs (the headline) get 2 forks, the writes 4 interleaved runs a side.
    this.base = new OptionsBuilder()
        // Replaces JMH's default (this JVM's own options), so each fork gets exactly these.
        .jvmArgs(forkArgs(lib))
        .forks(1)
        .warmupIterations(quick ? 1 : 3)
        .warmupTime(quick ? TimeValue.milliseconds(200) : TimeValue.seconds(1))
        .measurementIterations(quick ? 2 : 5)
        .measurementTime(quick ? TimeValue.milliseconds(200) : TimeValue.seconds(1))
        .shouldFailOnError(true)
        .build();
  }

  public static void main(String[] args) throws Exception {
    boolean quick = false;
    Path out = null;
    Path jsonDir = Paths.get("build", "bench");
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--quick":
          quick = true;
          break;
        case "--out":
          out = Paths.get(args[++i]);
          break;
        case "--json-dir":
          jsonDir = Paths.get(args[++i]);
          break;
        default:
          System.err.println("usage: Report [--quick] [--out FILE] [--json-dir DIR]");
          System.exit(2);
      }
    }
    Files.createDirectories(jsonDir);
    String md = new Report(quick, jsonDir).run();
    if (out != null) {
      Files.write(out, md.getBytes(StandardCharsets.UTF_8));
    }
    System.out.println();
    System.out.println(md);
  }

  private String run() throws RunnerException, IOException {
    StringBuilder md = new StringBuilder();
    // 1. Plan lifecycle, average time per plan: 1 thread with 2 forks (the headline), 2 threads.
    List<RunResult> lifecycle = new ArrayList<>();
    for (int threads : new int[] {1, 2}) {
      lifecycle.addAll(run("lifecycle-avgt-t" + threads, opts()
          .include(quote(LIFECYCLE) + "(lazyDirsHandle|lazySameDirs|eager)$")
          .mode(Mode.AverageTime).timeUnit(TimeUnit.NANOSECONDS)
          .threads(threads)
          .forks(threads == 1 && !quick ? 2 : 1)));
      // The floor, the same way, in forks that load the library's test build (NativeFloor).
      lifecycle.addAll(run("lifecycle-floor-avgt-t" + threads, opts()
          .include(quote(LIFECYCLE) + "floorNoop$")
          .jvmArgs(forkArgs(testhooksLibrary))
          .mode(Mode.AverageTime).timeUnit(TimeUnit.NANOSECONDS)
          .threads(threads)
          .forks(threads == 1 && !quick ? 2 : 1)));
    }
    // 2. Plans per second from 1 and 2 threads, lazy against eager, 1 and 8 dirs.
    List<RunResult> plansPerSecond = new ArrayList<>();
    for (int threads : new int[] {1, 2}) {
      plansPerSecond.addAll(run("lifecycle-thrpt-t" + threads, opts()
          .include(quote(LIFECYCLE) + "(lazyDirsHandle|eager)$")
          .param("dirs", "1", "8")
          .mode(Mode.Throughput).timeUnit(TimeUnit.SECONDS)
          .threads(threads)));
    }
    // 3. First spill, 8 dirs.
    List<RunResult> firstSpill = new ArrayList<>();
    for (int threads : new int[] {1, 2}) {
      firstSpill.addAll(run("first-spill-t" + threads, opts()
          .include(quote(FIRST_SPILL) + "(lazy|eager)$")
          .threads(threads)));
    }
    // 4. Write throughput, one thread. The goal is a ratio within 5%, while one fork can differ
    // from the next by up to ±10% (page cache state, the other tenants of the disk), so the two
    // sides run as alternating single-fork runs in ABBA order and each side's iterations are
    // pooled: a drift during the run then falls on both alike.
    Map<String, ListStatistics> writes = new LinkedHashMap<>();
    Map<String, List<Double>> writeRuns = new LinkedHashMap<>(); // each run's median, in run order
    int rounds = quick ? 1 : 4;
    for (int round = 0; round < rounds; round++) {
      for (String size : WRITE_SIZES) {
        String[] order = round % 2 == 0
            ? new String[] {"fileChannelWrite", "spillFileWrite"}
            : new String[] {"spillFileWrite", "fileChannelWrite"};
        for (String method : order) {
          List<RunResult> rs = run("write-" + method + "-" + size + "-round" + (round + 1), opts()
              .include(quote(WRITE + method) + "$")
              .param("bufferSize", size)
              .threads(1)
              .warmupIterations(quick ? 1 : 2));
          ListStatistics pooled = writes.computeIfAbsent(method + "/" + size, k -> new ListStatistics());
          ListStatistics thisRun = new ListStatistics();
          for (RunResult r : rs) {
            for (BenchmarkResult b : r.getBenchmarkResults()) {
              for (IterationResult it : b.getIterationResults()) {
                Result<?> score = it.getPrimaryResult();
                double mibs = toPerSecond(score.getScoreUnit(), score.getScore()) * Double.parseDouble(size) / (1 << 20);
                pooled.addValue(mibs);
                thisRun.addValue(mibs);
              }
            }
          }
          writeRuns.computeIfAbsent(method + "/" + size, k -> new ArrayList<>()).add(thisRun.getPercentile(50));
        }
      }
    }

    lifecycleTables(md, lifecycle);
    plansPerSecondTable(md, plansPerSecond);
    firstSpillTable(md, firstSpill);
    writeTable(md, writes, writeRuns, rounds);
    md.append("Spread: `±` is JMH's score error, the half-width of its 99.9% confidence interval over the\n"
        + "measurement iterations (" + (quick ? "QUICK RUN: numbers are meaningless" : "5 one-second iterations per fork after 3 of warm-up, 2 for the writes")
        + "); medians are over the same iterations. Raw results: build/bench/jmh-*.json.\n\n");
    return md.toString();
  }

  /** A fork's JVM options, with {@code library} as the library it loads. */
  private String[] forkArgs(String library) {
    return new String[] {
      "-Dspillway.library.path=" + Paths.get(library).toAbsolutePath(),
      "-D" + LocalDirs.BASE_PROPERTY + "=" + Paths.get(benchDir).toAbsolutePath(),
      "-Xms1g", "-Xmx1g"
    };
  }

  private ChainedOptionsBuilder opts() {
    return new OptionsBuilder().parent(base);
  }

  private List<RunResult> run(String name, ChainedOptionsBuilder options) throws RunnerException {
    Options o = options
        .resultFormat(ResultFormatType.JSON)
        .result(jsonDir.resolve("jmh-" + name + ".json").toString())
        .build();
    Collection<RunResult> results = new Runner(o).run();
    if (results.isEmpty()) {
      throw new IllegalStateException("no benchmark matched " + o.getIncludes());
    }
    return new ArrayList<>(results);
  }

  private static String quote(String s) {
    return s.replace(".", "\\.");
  }

  // --- tables -------------------------------------------------------------------------------

  private static void lifecycleTables(StringBuilder md, List<RunResult> rs) {
    md.append("### A plan that never spills: createPlanIn + releasePlan\n\n");
    md.append("Average time per plan (per thread), median ± error. `floor` is one empty JNI call\n"
        + "(`NativeFloor.emptyCall`, which only the library's test build has); a plan is two calls.\n"
        + "`eager` creates and recursively removes a temp dir in every local dir (DataFusion's\n"
        + "Directories mode). The dirs are shared by the threads, as an executor's are. `lazy` creates\n"
        + "each plan from the local dirs registered once (`registerLocalDirs`, then `createPlanIn`), as\n"
        + "the shim does; `String[] per call` passes the paths to `createPlan`, which recognises\n"
        + "them in Java by their content after the first call and creates the plan in their\n"
        + "registration.\n\n");
    md.append("| threads | local dirs | floor (noop) | lazy | lazy, String[] per call | eager | eager ÷ lazy | lazy ÷ floor |\n");
    md.append("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int threads : new int[] {1, 2}) {
      RunResult floor = find(rs, LIFECYCLE + "floorNoop", threads, null);
      for (String dirs : new String[] {"1", "4", "8"}) {
        RunResult lazy = find(rs, LIFECYCLE + "lazyDirsHandle", threads, dirs);
        RunResult fresh = find(rs, LIFECYCLE + "lazySameDirs", threads, dirs);
        RunResult eager = find(rs, LIFECYCLE + "eager", threads, dirs);
        md.append(row(threads, dirs, time(floor), time(lazy), fresh == null ? "" : time(fresh), time(eager),
            ratio(median(eager), median(lazy)), ratio(median(lazy), median(floor))));
      }
    }
    md.append('\n');

    RunResult lazy8 = find(rs, LIFECYCLE + "lazyDirsHandle", 1, "8");
    RunResult eager8 = find(rs, LIFECYCLE + "eager", 1, "8");
    RunResult floor = find(rs, LIFECYCLE + "floorNoop", 1, null);
    if (lazy8 != null && eager8 != null && floor != null) {
      double l = median(lazy8);
      double e = median(eager8);
      double f = median(floor);
      md.append(String.format(Locale.ROOT,
          "Goals, 8 local dirs, 1 thread: lazy %s per plan (goal ≤ 500 ns: %s); eager ÷ lazy %s (goal ≥ 1000×: %s);\n"
              + "%s above the floor of two empty calls (%s), %s one empty call.\n\n",
          nanos(l), l <= 500 ? "met" : "MISSED", ratio(e, l), e / l >= 1000 ? "met" : "MISSED",
          nanos(l - 2 * f), nanos(2 * f), ratio(l, f)));
    }
  }

  private static void plansPerSecondTable(StringBuilder md, List<RunResult> rs) {
    md.append("### Plans per second, 1 and 2 threads (never spilling)\n\n");
    md.append("Throughput over all threads, median ± error. Scaling is 2 threads ÷ 1 thread (2.0×\n"
        + "would be perfect on 2 cores).\n\n");
    md.append("| local dirs | threads | lazy plans/s | eager plans/s | lazy ÷ eager | lazy scaling | eager scaling |\n");
    md.append("|---:|---:|---:|---:|---:|---:|---:|\n");
    for (String dirs : new String[] {"1", "8"}) {
      RunResult lazy1 = find(rs, LIFECYCLE + "lazyDirsHandle", 1, dirs);
      RunResult eager1 = find(rs, LIFECYCLE + "eager", 1, dirs);
      for (int threads : new int[] {1, 2}) {
        RunResult lazy = find(rs, LIFECYCLE + "lazyDirsHandle", threads, dirs);
        RunResult eager = find(rs, LIFECYCLE + "eager", threads, dirs);
        md.append(row(dirs, threads, rate(lazy), rate(eager), ratio(median(lazy), median(eager)),
            threads == 1 ? "" : ratio(median(lazy), median(lazy1)),
            threads == 1 ? "" : ratio(median(eager), median(eager1))));
      }
    }
    md.append('\n');
  }

  private static void firstSpillTable(StringBuilder md, List<RunResult> rs) {
    md.append("### First spill: SpillPlan.create + createSpillFile + write 1 byte + finishWrite + close, 8 local dirs\n\n");
    md.append("Average time per plan (per thread), median ± error. Lazy creates the one plan dir its file\n"
        + "lands in and writes the framed file the product writes (header and one lz4 chunk); eager\n"
        + "creates 8, puts a plain file in one and removes all 8.\n\n");
    md.append("| threads | lazy | eager | eager ÷ lazy |\n");
    md.append("|---:|---:|---:|---:|\n");
    for (int threads : new int[] {1, 2}) {
      RunResult lazy = find(rs, FIRST_SPILL + "lazy", threads, null);
      RunResult eager = find(rs, FIRST_SPILL + "eager", threads, null);
      md.append(row(threads, time(lazy), time(eager), ratio(median(eager), median(lazy))));
    }
    md.append('\n');
  }

  private static void writeTable(StringBuilder md, Map<String, ListStatistics> writes,
      Map<String, List<Double>> writeRuns, int rounds) {
    md.append("### Spill write throughput, direct buffers, 1 thread\n\n");
    md.append("MiB/s, median ± error, appending one buffer of random bytes per call to a file that is\n"
        + "replaced every 64 MiB; both files in the plan's spill dir. `SpillFile.write` writes the\n"
        + "framed file the product writes (256 KiB chunks, each offered to lz4, which cannot shrink\n"
        + "random bytes, and checked by CRC-32C). Page-cache bound (files are deleted before\n"
        + "writeback), so the ratio is the cost of the framed JNI path against the JDK's plain\n"
        + "write. The two ran as alternating single-fork runs, " + rounds + " per side in ABBA order with\n"
        + "the iterations pooled, so that fork-to-fork and background variation falls on both sides\n"
        + "alike.\n\n");
    md.append("| buffer | SpillFile.write | FileChannel.write | SpillFile ÷ FileChannel | round by round | goal ≥ 95% |\n");
    md.append("|---:|---:|---:|---:|---:|:---|\n");
    for (String size : WRITE_SIZES) {
      ListStatistics framed = writes.get("spillFileWrite/" + size);
      ListStatistics fc = writes.get("fileChannelWrite/" + size);
      double r = framed.getPercentile(50) / fc.getPercentile(50);
      // The ratio of each round's pair of runs: how far one pair can be from the next.
      List<Double> framedRuns = writeRuns.get("spillFileWrite/" + size);
      List<Double> fcRuns = writeRuns.get("fileChannelWrite/" + size);
      double lo = Double.POSITIVE_INFINITY;
      double hi = Double.NEGATIVE_INFINITY;
      for (int i = 0; i < framedRuns.size(); i++) {
        double ri = framedRuns.get(i) / fcRuns.get(i);
        lo = Math.min(lo, ri);
        hi = Math.max(hi, ri);
      }
      md.append(row(size.equals("65536") ? "64 KiB" : "1 MiB", mibs(framed), mibs(fc),
          Double.isNaN(r) ? "n/a" : String.format(Locale.ROOT, "%.1f%%", 100 * r),
          String.format(Locale.ROOT, "%.0f–%.0f%%", 100 * lo, 100 * hi),
          Double.isNaN(r) ? "" : r >= 0.95 ? "met" : "MISSED"));
    }
    md.append('\n');
  }

  // --- helpers ------------------------------------------------------------------------------

  /** The result of benchmark {@code name} with that thread count and, if given, first param. */
  private static RunResult find(List<RunResult> rs, String name, int threads, String param) {
    for (RunResult r : rs) {
      BenchmarkParams p = r.getParams();
      if (!p.getBenchmark().equals(name) || p.getThreads() != threads) {
        continue;
      }
      if (param != null) {
        String key = p.getParamsKeys().isEmpty() ? null : p.getParamsKeys().iterator().next();
        if (key == null || !param.equals(p.getParam(key))) {
          continue;
        }
      }
      return r;
    }
    return null;
  }

  /** Median of the measurement iterations (all forks), in the result's own unit. */
  private static double median(RunResult r) {
    return r == null ? Double.NaN : r.getPrimaryResult().getStatistics().getPercentile(50);
  }

  private static double error(RunResult r) {
    return r == null ? Double.NaN : r.getPrimaryResult().getScoreError();
  }

  /** Nanoseconds per op of an average-time result, whatever its unit. */
  private static double toNanos(RunResult r, double v) {
    String unit = r.getPrimaryResult().getScoreUnit();
    if (unit.startsWith("ns/")) return v;
    if (unit.startsWith("us/")) return v * 1e3;
    if (unit.startsWith("ms/")) return v * 1e6;
    if (unit.startsWith("s/")) return v * 1e9;
    throw new IllegalStateException("not a time per op: " + unit);
  }

  /** Ops per second of a throughput result, whatever its unit. */
  private static double toPerSecond(RunResult r, double v) {
    return toPerSecond(r.getPrimaryResult().getScoreUnit(), v);
  }

  private static double toPerSecond(String unit, double v) {
    if (unit.endsWith("/s")) return v;
    if (unit.endsWith("/ms")) return v * 1e3;
    if (unit.endsWith("/us")) return v * 1e6;
    if (unit.endsWith("/ns")) return v * 1e9;
    throw new IllegalStateException("not a rate: " + unit);
  }

  private static String time(RunResult r) {
    if (r == null) return "n/a";
    Result<?> p = r.getPrimaryResult();
    Statistics s = p.getStatistics();
    return nanos(toNanos(r, s.getPercentile(50))) + " ± " + nanos(toNanos(r, p.getScoreError()));
  }

  private static String rate(RunResult r) {
    if (r == null) return "n/a";
    return count(toPerSecond(r, median(r))) + " ± " + count(toPerSecond(r, error(r)));
  }

  private static String mibs(ListStatistics s) {
    if (s == null || s.getN() == 0) return "n/a";
    double e = s.getMeanErrorAt(0.999);
    return String.format(Locale.ROOT, "%.0f ± %s", s.getPercentile(50),
        Double.isNaN(e) ? "n/a" : String.format(Locale.ROOT, "%.0f", e));
  }

  /** A duration in nanoseconds with 3 significant digits and a fitting unit. */
  static String nanos(double ns) {
    if (Double.isNaN(ns)) return "n/a";
    double a = Math.abs(ns);
    if (a < 1e3) return sig(ns) + " ns";
    if (a < 1e6) return sig(ns / 1e3) + " µs";
    if (a < 1e9) return sig(ns / 1e6) + " ms";
    return sig(ns / 1e9) + " s";
  }

  static String count(double v) {
    if (Double.isNaN(v)) return "n/a";
    double a = Math.abs(v);
    if (a < 1e3) return sig(v);
    if (a < 1e6) return sig(v / 1e3) + " k";
    return sig(v / 1e6) + " M";
  }

  static String ratio(double a, double b) {
    double r = a / b;
    if (Double.isNaN(r) || Double.isInfinite(r)) return "n/a";
    return sig(r) + "×";
  }

  /** Three significant digits, no exponent. */
  static String sig(double v) {
    double a = Math.abs(v);
    String fmt = a >= 100 ? "%.0f" : a >= 10 ? "%.1f" : a >= 1 ? "%.2f" : "%.3f";
    return String.format(Locale.ROOT, fmt, v);
  }

  static String row(Object... cells) {
    StringBuilder b = new StringBuilder("|");
    for (Object c : cells) {
      b.append(' ').append(c).append(" |");
    }
    return b.append('\n').toString();
  }
}
