# Spillway. `make demo` runs the main job, `make test` runs every test; see README.md.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

JAVA_HOME ?= $(shell dirname "$$(dirname "$$(readlink -f "$$(command -v javac)")")")
export CGO_ENABLED := 1
export CGO_CFLAGS := -I$(JAVA_HOME)/include -I$(JAVA_HOME)/include/linux
SBT := project/sbt

LIB := build/libspillway.so
GO_SOURCES := $(shell find spill plan jni -name '*.go' -o -name '*.c' -o -name '*.h' -o -name '*.map') go.mod go.sum

.PHONY: all lib lib-arm64 jar demo test test-go test-jvm cluster-test pyspark-example soak fuzz bench bench-sort bench-sql clean

all: lib

lib: $(LIB)

# Only the JNI entry points are exported (the version script); -s -w drop the symbol tables, Go's
# own stack traces still work.
$(LIB): $(GO_SOURCES)
	@mkdir -p build
	go build -buildmode=c-shared -trimpath \
		-ldflags="-s -w -extldflags=-Wl,--version-script=$(CURDIR)/jni/exports.map" \
		-o $@ ./jni

# The linux/arm64 library (AWS Graviton and other arm64 executors), cross-compiled with Debian's
# cross toolchain (apt-get install gcc-aarch64-linux-gnu; about a minute the first time). The jar
# bundles every library under build/native/<os>/<arch>/ beside this machine's, so once built, `make
# jar` keeps it current and the jar serves both platforms. Not part of `make test`.
LIB_ARM64 := build/native/linux/arm64/libspillway.so

lib-arm64: $(LIB_ARM64)

$(LIB_ARM64): $(GO_SOURCES)
	@command -v aarch64-linux-gnu-gcc >/dev/null || \
		{ echo "lib-arm64 needs aarch64-linux-gnu-gcc: apt-get install gcc-aarch64-linux-gnu" >&2; exit 1; }
	@mkdir -p $(dir $@)
	CC=aarch64-linux-gnu-gcc GOOS=linux GOARCH=arm64 go build -buildmode=c-shared -trimpath \
		-ldflags="-s -w -extldflags=-Wl,--version-script=$(CURDIR)/jni/exports.map" \
		-o $@ ./jni

jar: lib $(if $(wildcard $(LIB_ARM64)),lib-arm64)
	$(SBT) package

demo: lib
	$(SBT) run

test: test-go test-jvm cluster-test pyspark-example

# jni's tests host a real JVM in the test binary (through jnigi) and call the JNI entry points
# with its JNIEnv; they run under -race like the rest.
# The fuzz targets' seed corpora (testdata/fuzz/) run with the tests; then each fuzzer runs
# briefly, so a regression in input validation is caught on every run. `make fuzz` runs longer.
FUZZTIME ?= 10s

test-go:
	go vet ./...
	go test -race -count=1 ./...
	go test -run '^$$' -fuzz '^FuzzNewRoots$$' -fuzztime $(FUZZTIME) ./spill
	go test -run '^$$' -fuzz '^FuzzAdd$$' -fuzztime $(FUZZTIME) ./plan/extsort
	go test -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZTIME) ./spill/chunkfile

fuzz:
	$(MAKE) test-go FUZZTIME=5m

# One sbt launch runs every JVM suite in one forked JVM against build/libspillway.so (Spark in local
# mode included). XcheckJniSuite re-runs the JNI contract suite (bad inputs included) in a child JVM
# under -Xcheck:jni and fails on any JNI warning raised in spillway's natives.
test-jvm: lib
	$(SBT) test

# The soak of RELIABILITY.md for longer than the 90 s loop make test runs (spillway.SparkSoakSuite):
# Spark tasks in local mode that spill, sort, fail and get cancelled, then nothing may be left on
# disk or in the library and neither VmRSS nor the Go heap may grow like a leak. SOAK_SEED=<seed>
# replays the random choices the soak printed.
SOAK_SECONDS ?= 600
soak: lib
	SOAK_SECONDS=$(SOAK_SECONDS) $(SBT) "testOnly spillway.SparkSoakSuite"

# A standalone master and two workers on loopback (Spark from the pyspark package on PyPI, installed
# into build/pyspark-venv on first use) run spillway.demo.ClusterDemo from the jar with the plugin
# on; see project/cluster-test.sh. About 1.5 min (plus ~1 min for the first pyspark install).
cluster-test: jar
	project/cluster-test.sh

# The README's PySpark example (examples/pyspark_sql_sort.py): Spillway's native sort in a PySpark
# job by configuration alone, checked against Spark's own sort; in the cluster test's venv. ~35 s.
pyspark-example: jar
	project/pyspark-example.sh

# Every benchmark side by side: JMH through the real library (plan lifecycle against eager dirs and
# the floor, first spill with syscall counts, write throughput, plans/s from 1 and 2 threads) and
# the Go benchmarks with benchstat. Prints and writes build/bench/report.md; BENCHMARKS.md holds
# the latest. About 13 minutes on 2 cores; BENCH_QUICK=1 only checks that it all runs.
bench: lib
	project/bench.sh

# The native sort against Spark's own sort of the same records with the same execution memory, both
# spilling (spillway.bench.SortVsSpark). Arguments: records partitions memory runs.
BENCH_SORT_ARGS ?= 4000000 2 32m 5
# TPC-H with spillway.SpillwayExtensions on and off, alternating runs (spillway.bench.TpchBench, in
# the test sources beside the TPC-H generator): a spilling ORDER BY over lineitem, then the 22
# queries; prints a table with the ratios. Arguments: scale-factor execution-memory-of-the-ORDER-BY
# rounds. The tables are generated once into build/tpch-sf<scale-factor> (SF1: a few minutes).
BENCH_SQL_ARGS ?= 1 128m 2
bench-sql: lib
	$(SBT) 'set Test / javaOptions += "-Xmx4g"' "Test/runMain spillway.bench.TpchBench $(BENCH_SQL_ARGS)"

bench-sort: lib
	$(SBT) "runMain spillway.bench.SortVsSpark $(BENCH_SORT_ARGS)"

clean:
	rm -rf build target project/target project/project
