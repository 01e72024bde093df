#!/usr/bin/env bash
# Runs every Spillway benchmark side by side and writes build/bench/report.md (`make bench` runs
# this after `make lib lib-testhooks`; the pages under docs/benchmarks/ hold the latest figures):
#
#   1. JMH, through the real library (spillway.NativeSpill, spillway.SpillPlan): plan lifecycle
#      against the eager baseline and the floor (one empty call, in the library's test build),
#      plans/s from 1 and 2 threads, first spill, write throughput.
#      Sources in scala-shim/bench; sbt (bootstrapped by project/sbt) only compiles them, and
#      JMH runs outside sbt so that sbt's JVM competes with nothing being measured.
#   2. System calls per plan, counted with strace -c -f on spillway.bench.SyscallDriver.
#   3. The Go benchmarks of spill/ and plan/, summarised by benchstat with -col /impl.
#
# Environment:
#   BENCH_QUICK=1   a short run that only checks everything works (about 3 minutes); its numbers
#                   mean nothing
#   STRACE_PLANS    plans per syscall-counting run (default 1000)
#   JAVA_HOME       JDK to use (default: java on PATH)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

die() { echo "project/bench.sh: $*" >&2; exit 1; }
say() { echo "== bench: $*" >&2; }

# x/perf has no release tags; this pseudo-version is benchstat as of September 2026.
benchstat="golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"
quick="${BENCH_QUICK:-}"
strace_plans="${STRACE_PLANS:-1000}"
out="$repo_root/build/bench"
lib="$repo_root/build/libspillway.so"
# The library's test build: the product's sources and one empty JNI call, the lifecycle floor
# (spillway.bench.NativeFloor); only the floor's forks load it.
testhooks_lib="$repo_root/build/libspillway-testhooks.so"
java_cmd="java"
[[ -n "${JAVA_HOME:-}" ]] && java_cmd="$JAVA_HOME/bin/java"

[[ -f "$lib" ]] || die "$lib not found: run \`make lib\` first (\`make bench\` does)"
[[ -f "$testhooks_lib" ]] || die "$testhooks_lib not found: run \`make lib-testhooks\` first (\`make bench\` does)"
command -v go >/dev/null 2>&1 || die "go not found"
command -v "$java_cmd" >/dev/null 2>&1 || die "java not found (set JAVA_HOME or put java on PATH)"

rm -rf "$out"
mkdir -p "$out/dirs" "$out/strace"
# The benchmarks' local dirs live here, on the repository's disk, not in a tmpfs /tmp.
bench_dirs="$out/dirs"

load() { cut -d' ' -f1-3 /proc/loadavg; }
loads=()
phase() { # name: notes the load average as each phase starts
  loads+=("$1: $(load)")
  say "$1 (load average $(load))"
}
started=$(date +%s)

# --- machine -------------------------------------------------------------------------------
cpu_model="$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -1)"
[[ -n "$cpu_model" ]] || cpu_model="$(uname -m)"
fs="$(df -T "$bench_dirs" | awk 'NR == 2 { print $2 " (" $1 ", " $7 ")" }')"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
# --no-optional-locks: only read; never refresh the index behind whoever is working here.
if [[ -n "$(git --no-optional-locks status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  commit="$commit with uncommitted changes"
fi
load_at_start="$(load)"

# --- 1. compile the JMH benchmarks ----------------------------------------------------------
phase "compiling the JMH benchmarks (sbt bench/compile)"
# bench/clean first: JMH's annotation processor writes its benchmark list from the sources of
# one javac run, so an incremental compile of a few files would drop the others' entries.
# bench/writeRuntimeClasspath writes the classpath JMH runs on (Spark-free) to a file.
classpath_file="$repo_root/scala-shim/bench/target/runtime-classpath"
rm -f "$classpath_file"
if ! CI=true "$repo_root/project/sbt" "bench/clean" "bench/compile" "bench/writeRuntimeClasspath" \
    >"$out/sbt.log" 2>&1; then
  # Zinc cannot map JMH's generated classes to sources; those warnings are expected noise.
  grep -v 'Could not determine source for class' "$out/sbt.log" | tail -40 >&2
  die "sbt failed; full log in $out/sbt.log"
fi
classpath="$(cat "$classpath_file")"
java_props=(-Dspillway.library.path="$lib" -Dspillway.bench.dir="$bench_dirs")

# --- 2. system calls per plan ----------------------------------------------------------------
strace_md="$out/syscalls.md"
if ! command -v strace >/dev/null 2>&1 && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
  say "installing strace"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace; } >&2 || true
fi
if command -v strace >/dev/null 2>&1; then
  [[ -n "$quick" ]] && strace_plans=100
  phase "counting system calls (strace -c -f, $strace_plans plans per kind)"
  kinds=(lazy-nospill eager-nospill lazy-firstspill eager-firstspill)
  for kind in "${kinds[@]}"; do
    for plans in 0 "$strace_plans"; do
      # Interpreted, serial GC, small heap: fewer JVM threads making system calls of their own.
      # The driver runs the same warm-up either way, so the difference of the two runs is the
      # plans' own calls.
      strace -f -c -o "$out/strace/$kind-$plans.txt" \
        "$java_cmd" -Xint -XX:+UseSerialGC -Xms64m -Xmx64m -XX:-UsePerfData -cp "$classpath" \
        "${java_props[@]}" spillway.bench.SyscallDriver "$kind" "$plans" >/dev/null
    done
  done
  "$java_cmd" -cp "$classpath" spillway.bench.SyscallReport "$out/strace" "$strace_plans" "$strace_md"
else
  printf '### System calls per plan\n\nNot counted: strace is not installed.\n\n' >"$strace_md"
fi

# --- 3. JMH -----------------------------------------------------------------------------------
phase "JMH (log: build/bench/jmh.log)"
# JMH's progress goes to the log; the terminal gets one line per benchmark run.
"$java_cmd" -cp "$classpath" "${java_props[@]}" -Dspillway.bench.testhooksLibrary="$testhooks_lib" spillway.bench.Report \
    --out "$out/jmh.md" --json-dir "$out" ${quick:+--quick} 2>&1 \
  | tee "$out/jmh.log" \
  | { grep --line-buffered -E '^# (Run progress|Benchmark:|Parameters|Threads)|^Iteration' >&2 || true; }
[[ -s "$out/jmh.md" ]] || die "JMH wrote no results; see $out/jmh.log"

# --- 4. Go ------------------------------------------------------------------------------------
phase "Go benchmarks (spill, plan)"
go_flags=(-count 6)
[[ -n "$quick" ]] && go_flags=(-count 2 -benchtime 100ms)
go test -run '^$' -bench . -benchmem "${go_flags[@]}" -cpu 1,2 ./spill ./plan | tee "$out/go.txt" >&2
phase "benchstat"
go run "$benchstat" -col /impl "$out/go.txt" >"$out/go-benchstat.txt"
loads+=("end: $(load)")

# --- report -----------------------------------------------------------------------------------
{
  echo "## Results"
  echo
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); commit $commit"
  echo "- Machine: $(nproc) × $cpu_model, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r)"
  echo "- Local dirs on: $fs"
  echo "- $(go version | sed 's/^go version //'), $("$java_cmd" -version 2>&1 | head -1)"
  echo "- Command: \`make bench\`${quick:+ with BENCH_QUICK=1 (a smoke run: the numbers mean nothing)} ($(( ($(date +%s) - started) / 60 )) min)"
  echo "- Load average (1, 5, 15 min) at start: $load_at_start; as each phase started:"
  for l in "${loads[@]}"; do echo "  - $l"; done
  echo
  cat "$out/jmh.md"
  cat "$strace_md"
  echo "### Go benchmarks (\`go test -bench . -benchmem ${go_flags[*]} -cpu 1,2 ./spill ./plan\`, benchstat -col /impl)"
  echo
  echo "Go-side cost without JNI. Median and 95% confidence interval (±) over the runs; \`vs base\` is"
  echo "eager's change against lazy (+N% means eager takes 1 + N/100 times as long). \`-2\` is"
  echo "GOMAXPROCS=2 (RunParallel over 2 goroutines in the lifecycle benchmarks); the Go first spill"
  echo "writes 4 KiB."
  echo
  echo '```'
  cat "$out/go-benchstat.txt"
  echo '```'
} >"$out/report.md"

echo
cat "$out/report.md"
say "done in $(( $(date +%s) - started )) s; report in build/bench/report.md (its tables go onto the pages under docs/benchmarks/)"
