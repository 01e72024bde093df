#!/usr/bin/env bash
# make bench-c: a never-spilling plan's create + release through the C ABI (test/c/bench.c) beside
# the same operations on plan.Registry called directly in Go, from 1 and 2 threads. The two
# alternate for BENCH_C_ROUNDS rounds and each figure is the best of all rounds, so that a busy
# machine slows both sides alike; the last column is what the C binding adds per plan.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d build/bench-c.XXXXXX)
work=$(readlink -f "$work")
trap 'rm -rf "$work"' EXIT
${CC:-gcc} -std=c11 -O2 -Wall -Wextra -Werror -Iinclude -o "$work/bench" test/c/bench.c \
	-Lbuild -lspillway -Wl,-rpath,"$(readlink -f build)" -pthread
go test -c -o "$work/plan.test" ./plan

rounds=${BENCH_C_ROUNDS:-3}
for ((i = 1; i <= rounds; i++)); do
	"$work/bench" "$work" "${BENCH_C_ITERATIONS:-300000}" | awk '/^spillway_/ {print "C", $1, $2, $3, $4}'
	"$work/plan.test" -test.run '^$' -test.bench '^BenchmarkCreateReleasePlan(In)?$' -test.cpu 1,2 |
		awk '/^Benchmark/ {print "Go", $1, $3}'
done >"$work/samples"

# Best of the rounds, as: operation roots threads C-ns Go-ns.
awk '
	$1 == "C" { split($3, r, "="); key = $2 " " r[2]; one[key] = min(one[key], $4); two[key] = min(two[key], $5) }
	$1 == "Go" {
		name = $2; threads = sub(/-2$/, "", name) ? 2 : 1
		split(name, p, "/"); split(p[2], r, "=")
		op = p[1] == "BenchmarkCreateReleasePlanIn" ? "spillway_plan_create_in" : "spillway_plan_create"
		go[op " " r[2] " " threads] = min(go[op " " r[2] " " threads], $3)
	}
	function min(a, b) { return a == "" || b < a ? b : a }
	END {
		printf "never-spilling plan, create + release, ns/op (best of '"$rounds"' rounds)\n"
		printf "%-24s %5s %7s %8s %8s %8s\n", "C ABI call", "roots", "threads", "C ABI", "Go", "C - Go"
		n = split("spillway_plan_create_in 1,spillway_plan_create_in 8,spillway_plan_create 1,spillway_plan_create 8", keys, ",")
		for (i = 1; i <= n; i++) {
			for (t = 1; t <= 2; t++) {
				c = t == 1 ? one[keys[i]] : two[keys[i]]; g = go[keys[i] " " t]
				split(keys[i], k, " ")
				printf "%-24s %5s %7d %8.0f %8.0f %8.0f\n", k[1], k[2], t, c, g, c - g
			}
		}
		print "Go: BenchmarkCreateReleasePlanIn for spillway_plan_create_in, BenchmarkCreateReleasePlan (dirs"
		print "parsed once, outside the loop) for spillway_plan_create, which converts the strings every time."
	}' "$work/samples"
