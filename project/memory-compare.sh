#!/usr/bin/env bash
# Peak memory of a sort as a Spark user runs it, Spillway's native sort against Spark's own, in
# fresh JVMs, alternating (project/memory_compare.py says what one run does). Prints each run and
# the medians. Usage: project/memory-compare.sh [rows (1500000)] [rounds (3)]
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
source "$repo_root/project/lines.sh"
source "$repo_root/project/pyspark-venv.sh"

rows="${1:-1500000}"
rounds="${2:-3}"
line="$(primary_line_key)"
jar="$(line_jar "$line")"
[[ -f "$jar" ]] || { echo "memory-compare: no jar for $line: run \`make jar\`" >&2; exit 1; }
ensure_pyspark_venv memory-compare "$(line_field "$line" 3)"
export PYSPARK_PYTHON="$venv/bin/python" PYSPARK_DRIVER_PYTHON="$venv/bin/python"

scratch="$(mktemp -d "$repo_root/build/memory-compare.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
results="$scratch/results"
for round in $(seq 1 "$rounds"); do
  for mode in off on; do
    SPARK_LOCAL_DIRS="$scratch" "$venv/bin/python" project/memory_compare.py "$jar" "$mode" "$rows" 2>"$scratch/err" |
      grep '^memory-compare ' | tee -a "$results" || { tail -30 "$scratch/err" >&2; exit 1; }
  done
done
"$venv/bin/python" - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    kv = dict(f.split("=") for f in line.split()[1:])
    runs.setdefault(kv["mode"], []).append({k: int(v) for k, v in kv.items() if k != "mode"})
mib = lambda b: "%.0f MiB" % (b / 2**20)
for mode, label in (("off", "Spark's sort"), ("on", "Spillway's sort")):
    r = runs[mode]
    med = lambda k: statistics.median(x[k] for x in r)
    print("%-16s peak RSS %s (%s), after the job %s (%s once the cache let go), spilled %s (memory) %s (disk), "
          "nativeBytes after %d, cached %s, Go heap after %s" % (
        label, mib(med("peakRss")), " ".join(mib(x["peakRss"]) for x in r), mib(med("rssAfter")),
        mib(med("rssCacheLetGo")), mib(med("memorySpilled")), mib(med("diskSpilled")), med("nativeBytes"),
        mib(med("nativeCachedBytes")), mib(med("goHeapBytes"))))
ratio = statistics.median(x["peakRss"] for x in runs["on"]) / statistics.median(x["peakRss"] for x in runs["off"])
print("peak RSS, Spillway / Spark: %.2f" % ratio)
PY
