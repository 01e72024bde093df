package spillway.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Function;

/**
 * The table of system calls per plan, from the {@code strace -c -f} summaries of
 * {@link SyscallDriver}: for each kind, {@code <kind>-0.txt} (the JVM's warm-up alone) and
 * {@code <kind>-<plans>.txt} (the same and {@code plans} plans). project/bench.sh runs it:
 *
 * <pre>
 * java -cp CLASSPATH spillway.bench.SyscallReport STRACE_DIR PLANS OUT_FILE
 * </pre>
 */
public final class SyscallReport {
  private static final String[] KINDS = {"lazy-nospill", "eager-nospill", "lazy-firstspill", "eager-firstspill"};
  /** Rows under this many calls per plan in every column are left out (but counted in the totals). */
  private static final double SHOWN = 0.05;

  private SyscallReport() {}

  public static void main(String[] args) throws IOException {
    if (args.length != 3) {
      System.err.println("usage: SyscallReport STRACE_DIR PLANS OUT_FILE");
      System.exit(2);
    }
    Path dir = Paths.get(args[0]);
    int plans = Integer.parseInt(args[1]);
    List<Map<String, Double>> perPlan = new ArrayList<>();
    for (String kind : KINDS) {
      Map<String, Long> base = calls(dir.resolve(kind + "-0.txt"));
      Map<String, Long> run = calls(dir.resolve(kind + "-" + plans + ".txt"));
      Map<String, Double> d = new TreeMap<>();
      TreeSet<String> names = new TreeSet<>(base.keySet());
      names.addAll(run.keySet());
      for (String s : names) {
        d.put(s, (run.getOrDefault(s, 0L) - base.getOrDefault(s, 0L)) / (double) plans);
      }
      perPlan.add(d);
    }
    Files.write(Paths.get(args[2]), table(perPlan, plans).getBytes(StandardCharsets.UTF_8));
  }

  /**
   * Calls per system call name in an {@code strace -c} summary: the rows between its two dashed
   * lines, calls the fourth column, the name the last (the errors column may be empty).
   */
  static Map<String, Long> calls(Path summary) throws IOException {
    Map<String, Long> calls = new TreeMap<>();
    int dashes = 0;
    for (String line : Files.readAllLines(summary, StandardCharsets.UTF_8)) {
      if (line.startsWith("------")) {
        dashes++;
        continue;
      }
      String[] f = line.trim().split("\\s+");
      if (dashes == 1 && f.length >= 5) {
        calls.put(f[f.length - 1], Long.parseLong(f[3]));
      }
    }
    return calls;
  }

  private static String table(List<Map<String, Double>> perPlan, int plans) {
    StringBuilder md = new StringBuilder();
    md.append("### System calls per plan, 8 local dirs (strace -c -f)\n\n");
    md.append("Calls per plan: (count over ").append(plans).append(" plans − count over 0 plans) ÷ ").append(plans)
        .append(", the same JVM\n"
            + "warm-up in both runs, so JVM startup cancels out. Rows under 0.05 per plan in every column\n"
            + "are left out but counted in the total. futex and nanosleep come from the JVM's and Go's\n"
            + "background threads, in proportion to wall time (strace slows every call), not per plan.\n"
            + "Raw: build/bench/strace/.\n\n");
    md.append("| syscall | never spills, lazy | never spills, eager | first spill, lazy | first spill, eager |\n");
    md.append("|---|---:|---:|---:|---:|\n");
    TreeSet<String> names = new TreeSet<>();
    perPlan.forEach(d -> names.addAll(d.keySet()));
    for (String s : names) {
      boolean shown = perPlan.stream().anyMatch(d -> Math.abs(d.getOrDefault(s, 0.0)) >= SHOWN);
      if (shown) {
        md.append(row(s, perPlan, d -> fmt("%.2f", d.getOrDefault(s, 0.0))));
      }
    }
    md.append(row("**mkdir + mkdirat** (dirs created)", perPlan,
        d -> fmt("**%.2f**", d.getOrDefault("mkdir", 0.0) + d.getOrDefault("mkdirat", 0.0))));
    md.append(row("all but futex and nanosleep", perPlan,
        d -> fmt("%.1f", total(d) - d.getOrDefault("futex", 0.0) - d.getOrDefault("nanosleep", 0.0))));
    md.append(row("**all system calls**", perPlan, d -> fmt("**%.1f**", total(d))));
    return md.append('\n').toString();
  }

  private static String row(String name, List<Map<String, Double>> perPlan,
      Function<Map<String, Double>, String> cell) {
    Object[] cells = new Object[perPlan.size() + 1];
    cells[0] = name;
    for (int k = 0; k < perPlan.size(); k++) {
      cells[k + 1] = cell.apply(perPlan.get(k));
    }
    return Report.row(cells);
  }

  private static double total(Map<String, Double> d) {
    return d.values().stream().mapToDouble(Double::doubleValue).sum();
  }

  private static String fmt(String format, double v) {
    return String.format(Locale.ROOT, format, v);
  }
}
