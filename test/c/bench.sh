#!/usr/bin/env bash
# make bench-c: the C ABI's never-spilling plan create + release (test/c/bench.c) and, in the same
# run, the same operations on plan.Registry called directly in Go, from 1 and 2 threads.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d build/bench-c.XXXXXX)
work=$(readlink -f "$work")
trap 'rm -rf "$work"' EXIT
${CC:-gcc} -std=c11 -O2 -Wall -Wextra -Werror -Iinclude -o "$work/bench" test/c/bench.c \
	-Lbuild -lspillway -Wl,-rpath,"$(readlink -f build)" -pthread
"$work/bench" "$work" "${BENCH_C_ITERATIONS:-300000}"
echo
echo "Go, plan.Registry directly (-cpu 1,2 = 1 and 2 threads):"
go test -run '^$' -bench '^BenchmarkCreateReleasePlan(In)?$' -cpu 1,2 -count 1 ./plan | grep -E '^Benchmark'
