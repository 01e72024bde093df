#!/usr/bin/env bash
# The memory of a sort as a Spark user runs it, Spillway's native sort against Spark's own, in
# fresh JVMs, alternating, in each memory mode (project/memory_compare.py says what one run does):
# the process's peak, and what it holds a few seconds after the job against before it. Prints each
# run and the medians. Usage: project/memory-compare.sh [rows (1500000)] [rounds (3)]
# Environment: MEMORY_MODES (default "onheap offheap"); MEMORY_COMPARE_CONF (confs for every run).
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
  for memory in ${MEMORY_MODES:-onheap offheap}; do
    for mode in off on; do
      SPARK_LOCAL_DIRS="$scratch" "$venv/bin/python" project/memory_compare.py "$jar" "$mode" "$rows" "$memory" \
        2>"$scratch/err" | grep '^memory-compare ' | tee -a "$results" || { tail -30 "$scratch/err" >&2; exit 1; }
    done
  done
done
"$venv/bin/python" - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    kv = dict(f.split("=") for f in line.split()[1:])
    runs.setdefault((kv["memory"], kv["mode"]), []).append({k: int(v) for k, v in kv.items() if k not in ("mode", "memory")})
mib = lambda b: "%.0f MiB" % (b / 2**20)
print("| memory mode | sort | RSS before | peak RSS (runs) | right after the job | a few seconds after | after - before (runs) | spilled (disk) |")
print("|---|---|---|---|---|---|---|---|")
for memory in dict.fromkeys(m for m, _ in runs):
    for mode, label in (("off", "Spark's"), ("on", "Spillway's")):
        r = runs[(memory, mode)]
        med = lambda k: statistics.median(x[k] for x in r)
        deltas = [x["rssSettled"] - x["rssBefore"] for x in r]
        print("| %s | %s | %s | %s (%s) | %s | %s | %+.0f MiB (%s) | %s |" % (
            memory, label, mib(med("rssBefore")), mib(med("peakRss")), ", ".join("%.0f" % (x["peakRss"] / 2**20) for x in r),
            mib(med("rssAfter")), mib(med("rssSettled")), statistics.median(deltas) / 2**20,
            ", ".join("%+.0f" % (d / 2**20) for d in deltas), mib(med("diskSpilled"))))
PY
