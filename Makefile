# Spillway. `make demo` runs the main job, `make test` runs every test; see README.md.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

JAVA_HOME ?= $(shell dirname "$$(dirname "$$(readlink -f "$$(command -v javac)")")")
export CGO_ENABLED := 1
export CGO_CFLAGS := -I$(JAVA_HOME)/include -I$(JAVA_HOME)/include/linux
SBT := project/sbt

LIB := build/libspillway.so
GO_SOURCES := $(shell find cmd spill plan capi jni include -name '*.go' -o -name '*.c' -o -name '*.h' -o -name '*.map') go.mod go.sum
# The library's main package: it links the JNI binding (jni/) and the C ABI (capi/) side by side.
LIB_MAIN := ./cmd/libspillway
# The linker's version script, made from include/spillway.h (the one list of the C ABI's
# functions): the JNI entry points (Java_spillway_NativeSpill_*, JNI_OnLoad; the test build's
# floor, Java_spillway_bench_NativeFloor_*, which the product does not have) and the header's
# functions, nothing else.
LIB_EXPORTS := $(CURDIR)/build/exports.map

.PHONY: all lib lib-arm64 lib-testhooks jar publish-local demo test test-go test-remote bench-remote test-c test-contract test-datafusion datafusion-jni test-jvm test-line cluster-test pyspark-example test-ui soak cluster-soak spark-suites fuzz bench bench-c bench-sort bench-sql bench-memory bench-ui bench-datafusion clean docs bench-charts

all: lib

lib: $(LIB)

$(LIB_EXPORTS): include/spillway.h
	@mkdir -p build
	{ echo '{ global: Java_spillway_NativeSpill_*; Java_spillway_bench_NativeFloor_*; JNI_OnLoad;'; \
	  sed -nE 's/^int32_t (spillway_[a-z_]+)\(.*/  \1;/p' include/spillway.h; \
	  echo '  local: *; };'; } > $@

# Built with the version script (make test-c checks the library's exports against the header);
# -s -w drop the symbol tables, Go's own stack traces still work.
$(LIB): $(GO_SOURCES) $(LIB_EXPORTS)
	@mkdir -p build
	go build -buildmode=c-shared -trimpath \
		-ldflags="-s -w -extldflags=-Wl,--version-script=$(LIB_EXPORTS)" \
		-o $@ $(LIB_MAIN)

# The test build of the library: the product's sources and the test-only exports of
# jni/testhooks.go (the benchmarks' floor, an empty JNI call). Only `make bench` loads it, for that
# floor; the jar, the tests and every other benchmark use build/libspillway.so.
LIB_TESTHOOKS := build/libspillway-testhooks.so

lib-testhooks: $(LIB_TESTHOOKS)

$(LIB_TESTHOOKS): $(GO_SOURCES) $(LIB_EXPORTS)
	@mkdir -p build
	go build -buildmode=c-shared -trimpath -tags spillway_testhooks \
		-ldflags="-s -w -extldflags=-Wl,--version-script=$(LIB_EXPORTS)" \
		-o $@ $(LIB_MAIN)

# The linux/arm64 library (AWS Graviton and other arm64 executors), cross-compiled with Debian's
# cross toolchain (apt-get install gcc-aarch64-linux-gnu; about a minute the first time). The jar
# bundles every library under build/native/<os>/<arch>/ beside this machine's, so once built, `make
# jar` keeps it current and the jar serves both platforms. Not part of `make test`.
LIB_ARM64 := build/native/linux/arm64/libspillway.so

lib-arm64: $(LIB_ARM64)

$(LIB_ARM64): $(GO_SOURCES) $(LIB_EXPORTS)
	@command -v aarch64-linux-gnu-gcc >/dev/null || \
		{ echo "lib-arm64 needs aarch64-linux-gnu-gcc: apt-get install gcc-aarch64-linux-gnu" >&2; exit 1; }
	@mkdir -p $(dir $@)
	CC=aarch64-linux-gnu-gcc GOOS=linux GOARCH=arm64 go build -buildmode=c-shared -trimpath \
		-ldflags="-s -w -extldflags=-Wl,--version-script=$(LIB_EXPORTS)" \
		-o $@ $(LIB_MAIN)

# The Spark lines (project/spark-lines): one sbt project and one jar each, the last line primary
# (the root project, `spillway`), the others spark35_212, spark35_213, spark40_213, ...
LINE_PROJECTS := $(shell awk '!/^\#/ && NF == 4 { gsub(/\./, "", $$1); gsub(/\./, "", $$2); print "spark" $$1 "_" $$2 }' project/spark-lines)
OTHER_LINES := $(filter-out $(lastword $(LINE_PROJECTS)),$(LINE_PROJECTS))

# The product jars, one per Spark line (target/scala-2.13/spillway-spark4.1_2.13-*.jar for the
# primary line, target/<project>/scala-<scala>/spillway-spark<line>_<scala>-*.jar for the others):
# the JVM classes and the libraries only. One sbt launch compiles every line.
JAR_LIBS := lib $(if $(wildcard $(LIB_ARM64)),lib-arm64)

jar: $(JAR_LIBS)
	$(SBT) spillway/package $(addsuffix /package,$(OTHER_LINES))

# Every line's jar and POM (Spark and Scala provided) into a Maven repository under build/maven,
# for `spark-submit --packages io.github.spillway:spillway-spark<line>_<scala>:<version>
# --repositories file://$(CURDIR)/build/maven` (what make pyspark-example runs).
publish-local: $(JAR_LIBS)
	$(SBT) spillway/publish $(addsuffix /publish,$(OTHER_LINES))

# The demos live in their own sbt project (scala-shim/demo), not in the product jar.
demo: lib
	$(SBT) demo/run

test: docs-check test-go test-remote test-c test-contract test-datafusion test-jvm cluster-test pyspark-example test-ui

# The docs against the code (project/check-docs.py, Python 3 alone): every relative link and
# heading anchor in the tracked Markdown resolves, every `make <target>` they name is a target
# here, every spark.spillway.* key they name is declared in SpillwayConf.scala, and every figure
# in README.md appears on a page of docs/benchmarks/. A second or two.
.PHONY: docs-check
docs-check:
	python3 project/check-docs.py

# jni's tests host a real JVM in the test binary (through jnigi) and call the JNI entry points
# with its JNIEnv; they run under -race like the rest. The extsort package takes about 7 minutes
# under -race on an idle 2-core machine, near go test's default 10-minute limit once the other
# packages run beside it: the limit is 20 minutes, a guard against a hang, not a speed target.
# The fuzz targets' seed corpora (testdata/fuzz/) run with the tests; then each fuzzer runs
# briefly (about 10 s each on 2 cores), so a regression in input validation is caught on every
# run. `make fuzz` runs 30 times as long. The budgets are counts of calls, not durations: when a
# duration ends, Go 1.26's fuzzing coordinator can report its own deadline as a failure
# ("context deadline exceeded", golang/go#75804, fixed in Go 1.27); a count has no deadline.
FUZZSCALE ?= 1

test-go:
	go vet ./...
	go vet -tags s3server ./spill/...
	go test -race -count=1 -timeout 20m ./...
	go test -run '^$$' -fuzz '^FuzzNewRoots$$' -fuzztime $$((200000 * $(FUZZSCALE)))x ./spill
	go test -run '^$$' -fuzz '^FuzzAdd$$' -fuzztime $$((120000 * $(FUZZSCALE)))x ./plan/extsort
	go test -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $$((250000 * $(FUZZSCALE)))x ./spill/chunkfile

fuzz:
	$(MAKE) test-go FUZZSCALE=30

# The remote tier against a real S3-compatible server: project/s3-server.sh starts s3proxy
# (fetched with mvn on first use) with its filesystem backend on a free loopback port, runs the
# tests built with the s3server tag under -race, and stops it. The full local dir is a real
# tmpfs (root, as CI runs). Under a minute.
test-remote:
	project/s3-server.sh go test -race -count=1 -tags s3server -run 'Remote|Probe' ./spill/ ./spill/s3store/

# The remote tier's throughput against the same server (docs/benchmarks/remote.md): a 256 MiB spill
# file written through the tier against the client's own PutObject of the bytes it stored, read
# back in order against one GET of the object, and the external sort's merge of 16 remote runs
# with 20 ms added to every request by the fault proxy against the same merge with none, each
# beside its baseline in every iteration (spill/remote_bench_server_test.go). Prints a table of
# MB/s and ratios (project/bench-remote-table.awk); the raw output is in build/bench/remote.txt.
# About a minute on 2 cores; BENCH_REMOTE_RUNS iterations of each. With BENCH_REMOTE_SPLIT=1 the
# server runs on CPU 1 and the benchmark on CPU 0, a core each, as with a store on other machines.
BENCH_REMOTE_RUNS ?= 3
bench-remote:
	mkdir -p build/bench
	$(if $(BENCH_REMOTE_SPLIT),SPILLWAY_S3_CPUS=1) project/s3-server.sh $(if $(BENCH_REMOTE_SPLIT),taskset -c 0) \
		go test -tags s3server -run '^$$' -bench '^BenchmarkRemote' \
		-benchtime $(BENCH_REMOTE_RUNS)x -timeout 15m ./spill/ | tee build/bench/remote.txt
	awk -f project/bench-remote-table.awk build/bench/remote.txt

# The C ABI (include/spillway.h) from a plain C program linked to the library, with no JVM: the
# exports are exactly the JNI entry points and the header's functions; a full disk is a real
# tmpfs, mounted for the run (as root) and removed on exit. See test/c/run.sh.
test-c: lib
	test/c/run.sh

# The card's JNI contract from a client that declares spillway.NativeSpill itself, with the card's
# methods only (no class of the shim), and loads the library with System.load, under -Xcheck:jni;
# see test/contract/run.sh. A few seconds.
test-contract: lib
	test/contract/run.sh

# The DataFusion crate (spillway-datafusion/): DataFusion's own SortExec and grouped aggregate
# spilling through its TempFileFactory into build/libspillway.so. The cargo target dir is kept out
# of the repository, in ~/.cache: DataFusion takes ~15 minutes to build on 2 cores, and the cache
# makes every later run take seconds.
CARGO_TARGET := $${CARGO_TARGET_DIR:-$$HOME/.cache/spillway/cargo-target}
CARGO := CARGO_TARGET_DIR=$(CARGO_TARGET) SPILLWAY_LIBRARY=$(CURDIR)/$(LIB) cargo
# No Cargo.lock is committed: cargo writes its registry's address into it, which no file here names;
# the versions are bounded in Cargo.toml.
DATAFUSION_CRATE := --manifest-path spillway-datafusion/Cargo.toml

NEED_CARGO = command -v cargo >/dev/null || \
	{ echo "$@ needs cargo (Rust 1.94 or later, as DataFusion 55): install Rust with rustup" >&2; exit 1; }

test-datafusion: lib
	@$(NEED_CARGO)
	$(CARGO) test $(DATAFUSION_CRATE)

# The Comet scenario in miniature: a Rust JNI library (the crate's example datafusion_task_sort_jni)
# that runs DataFusion's SortExec in a Spark task, spilling through the task's plan; the suite
# spillway.DataFusionTaskSortSuite loads it. An example of the crate, so it is built with the tests'
# dependencies and features and shares their DataFusion build: after `make test-datafusion` this
# takes seconds. build.sbt gives the test JVM its path (-Dspillway.datafusion.jni.library).
DATAFUSION_JNI := $(CARGO_TARGET)/debug/examples/libdatafusion_task_sort_jni.so

datafusion-jni:
	@$(NEED_CARGO)
	$(CARGO) build $(DATAFUSION_CRATE) --example datafusion_task_sort_jni

# One sbt launch runs every JVM suite on the primary Spark line in one forked JVM against
# build/libspillway.so (Spark in local mode included), then on every other line the suites of what
# differs between lines (LINE_SUITES: the jar check, the TaskSpill lifecycle, the plugin and its
# confs, the SQL sort, its key types and where its fallbacks show: explain providers from 4.0 on),
# each line compiled once, against its own Spark; and Spillway's listener events, the Spillway tab's
# store and its content (SpillwayEventsSuite: what of Spark's UI and event log it uses differs by line).
# XcheckJniSuite re-runs the JNI contract suite (bad inputs included) in a child JVM under
# -Xcheck:jni and fails on any JNI warning raised in spillway's natives.
# The launch runs inside project/s3-server.sh, for RemoteSpillSuite's real S3-compatible server.
LINE_SUITES := spillway.SparkLineSuite spillway.TaskSpillSuite spillway.SpillwayPluginSuite \
	spillway.SpillwayConfSuite spillway.sql.SpillwaySortSqlSuite spillway.sql.SortKeyEncoderSuite \
	spillway.sql.SortFallbacksSuite org.apache.spark.spillway.ui.SpillwayEventsSuite

test-jvm: lib datafusion-jni
	SBT_OPTS="$${SBT_OPTS:-} -Dspillway.datafusion.jni.library=$(DATAFUSION_JNI)" project/s3-server.sh $(SBT) spillway/test \
		$(foreach l,$(OTHER_LINES),"$(l)/testOnly $(LINE_SUITES)")

# The suites of one line alone: make test-line LINE=spark35_212 (LINE_SUITES, or SUITES=...).
SUITES ?= $(LINE_SUITES)
test-line: lib
	$(SBT) "$(LINE)/testOnly $(SUITES)"

# The soak of docs/reliability.md for longer than the 90 s loop make test runs (spillway.SparkSoakSuite):
# Spark tasks in local mode that spill, sort, fail and get cancelled, then nothing may be left on
# disk or in the library and neither VmRSS nor the Go heap may grow like a leak. SOAK_SEED=<seed>
# replays the random choices the soak printed.
SOAK_SECONDS ?= 600
soak: lib
	SOAK_SECONDS=$(SOAK_SECONDS) $(SBT) "testOnly spillway.SparkSoakSuite"

# Apache Spark's own SQL suites (from Spark's test jars: JoinSuite, PlannerSuite, the window
# function suites, SortSuite) with spillway.SpillwayExtensions on and a 1k sort budget, so the
# native sorts spill, against the same suites without it: every test that passes off must pass on
# (exit 1 otherwise; the known differences, with reasons, are in project/spark-suites-known). See
# project/spark-suites.sh and docs/development.md, "Spark's own suites"; reports under
# build/spark-suites/. Not part of `make test` (it takes far longer).
spark-suites: lib
	project/spark-suites.sh

# A standalone master and two workers on loopback (Spark from the pyspark package on PyPI, installed
# into build/pyspark-<version> on first use) run spillway.demo.ClusterDemo from the demo jar, with
# the product jar beside it and the plugin on, the executors under a memory cgroup sized for
# off-heap mode, then for on-heap mode in a second application (a native sort, then a hash aggregate
# taking the execution memory it gave back: no executor killed for memory), one of each executor's
# two local dirs a small tmpfs that the script fills during a native sort and frees (mounted for
# the run, as root; the runs go to the other dir and come back, the result Spark's), and first an
# application whose driver is killed with kill -9 while its executors spill (nothing of it left
# once the next application has run); see
# project/cluster-test.sh. On the primary line and on Spark 3.5 with Scala 2.12 (Spark 3.5's own
# distribution). About 3-4 min a line on 2 shared cores (plus ~1 min for each first pyspark install).
# The primary line then runs spillway.demo.ClusterSoak for CLUSTER_SOAK_SECONDS: concurrent
# sessions of spilling native SQL sorts, one over its plan limit, one cancelling its queries, while
# each executor's RSS, descriptors, threads and plan dirs must stay flat. `make cluster-soak` runs
# it for SOAK_SECONDS (ten minutes). Last, on each line, the workers start again with one local dir
# each, a tmpfs of a few MiB, and spillway.demo.ClusterOverflow sorts several times that per
# executor through the remote tier into s3proxy on loopback (project/s3-server.sh): its input's
# rows in order, runs in the store, then nothing left in the bucket, on the tmpfs or in a plan dir.
CLUSTER_LINES := 3.5_2.12 4.1_2.13
CLUSTER_SOAK_SECONDS ?= 60

cluster-test: $(JAR_LIBS)
	$(SBT) spillway/package $(addsuffix /package,$(OTHER_LINES)) demo/package demo35_212/package
	for line in $(CLUSTER_LINES); do \
	  soak=0; [ "$$line" = "$(lastword $(CLUSTER_LINES))" ] && soak=$(CLUSTER_SOAK_SECONDS); \
	  CLUSTER_SOAK_SECONDS=$$soak project/cluster-test.sh $$line || exit 1; \
	done

cluster-soak: $(JAR_LIBS)
	$(SBT) spillway/package $(addsuffix /package,$(OTHER_LINES)) demo/package
	CLUSTER_SOAK_SECONDS=$(SOAK_SECONDS) project/cluster-test.sh $(lastword $(CLUSTER_LINES))

# The README's PySpark example (examples/pyspark_sql_sort.py): Spillway's native sort in a PySpark
# job by configuration alone, checked against Spark's own sort, and the listing of the sorts left to
# Spark's sort (with explain's section from 4.0 on), on every line pyspark ships (3.5
# with Scala 2.12, 4.0, 4.1), each in that pyspark's venv: the jar from the local Maven repository
# with `spark-submit --packages`, and on the primary line also by path. ~40 s a line.
pyspark-example: publish-local
	project/pyspark-example.sh

# The Spillway tab in a real browser (test/ui/run.sh, test/ui/check_ui.py): headless Chromium
# (Debian's chromium and chromium-driver) through WebDriver (Selenium, installed with pip into
# build/ui-test-venv on first use, test/ui/selenium-venv.sh) opens the live UI of a spilling
# PySpark application in local mode, one of whose local dirs is a full tmpfs (mounted for the run,
# as root, and removed on exit), then a History Server on its event log, finds the tab and checks
# its figures against the application's own (Spark's spill metrics of the query and its stages, the
# full dir's size, the sorts left to Spark with their reasons, the timeline's bytes), sorts a table
# by a header click, and fails on an exception in either log or an error in the browser's console.
# Screenshots and the JSON read in build/ui-test-<line>/. On Spark 3.5 with Scala 2.12
# (javax.servlet) and on the primary line (jakarta.servlet). About 30 s a line after the jars
# (plus each first pyspark install).
UI_LINES := 3.5_2.12 4.1_2.13

test-ui: $(JAR_LIBS)
	$(SBT) spillway/package spark35_212/package
	for line in $(UI_LINES); do test/ui/run.sh $$line; done

# Every benchmark side by side: JMH through the real library (plan lifecycle against eager dirs and
# the floor, first spill with syscall counts, write throughput, plans/s from 1 and 2 threads) and
# the Go benchmarks with benchstat. Prints and writes build/bench/report.md, whose tables go onto
# the pages under docs/benchmarks/. About 13 minutes on 2 cores; BENCH_QUICK=1 only checks that it all runs.
bench: lib lib-testhooks
	project/bench.sh

# A never-spilling plan's create + release through the C ABI (a C program linked to the library)
# beside the same on plan.Registry in Go, in one run; see test/c/bench.sh. About a minute.
bench-c: lib
	test/c/bench.sh

# The native sort against Spark's own sort of the same records with the same execution memory, both
# spilling (spillway.bench.SortVsSpark, in the bench project). Arguments: records partitions memory runs.
BENCH_SORT_ARGS ?= 4000000 2 32m 5
# The benchmark of record for the SQL sort (docs/benchmarks/sql-sort.md and tpch.md):
# 1. spillway.bench.SortShapesBench: per row shape (wide, narrow, string keys, two keys, a key Comet
#    leaves to Spark) the sorting stage's wall, task CPU and process CPU and the bytes spilled, for
#    Spark's sort, Spillway's, Comet 1.2.0's and Comet with Spillway, on the same data and off-heap
#    memory, alternating rounds, beside the floor under them (the same shuffle and rows with no sort,
#    Spark's and Comet's: the most any sort could gain). Arguments: scale-factor off-heap-size rounds.
# 2. spillway.bench.TpchBench: a spilling ORDER BY (on-heap), the 22 TPC-H queries with the extension
#    on and off, and the 22 under Comet alone and Comet with Spillway, alternating runs, per-query
#    ratios against the noise of the queries whose plans do not change. Arguments: scale-factor
#    execution-memory-of-the-ORDER-BY rounds.
# The tables are generated once into build/tpch-sf<scale-factor> (SF1: about a minute here). About 35
# minutes on 2 cores; everything printed is also in build/bench/sql.txt.
BENCH_SHAPES_ARGS ?= 1 256m 3
BENCH_SQL_ARGS ?= 1 128m 5
bench-sql: lib
	mkdir -p build/bench
	$(SBT) 'set Test / javaOptions += "-Xmx4g"' "Test/runMain spillway.bench.SortShapesBench $(BENCH_SHAPES_ARGS)" \
		"Test/runMain spillway.bench.TpchBench $(BENCH_SQL_ARGS)" 2>&1 | tee build/bench/sql.txt; exit $${PIPESTATUS[0]}

# A sort as a Spark user runs it (local[2], 2g driver, on-heap mode, Spillway's defaults): the
# JVM's peak and final RSS and the spills, Spillway's native sort against Spark's own, each run in
# a fresh JVM, alternating; see project/memory-compare.sh. Arguments: rows rounds. ~4 min.
BENCH_MEMORY_ARGS ?= 1500000 3
bench-memory: $(JAR_LIBS)
	$(SBT) spillway/package
	project/memory-compare.sh $(BENCH_MEMORY_ARGS)

# What Spillway's events and the Spillway tab cost a spilling SQL sort (spillway.bench.UiListenerBench):
# the sort stage's wall time with the plugin on (events, the tab's listener, executor updates every
# second) against the extension alone, the live UI on in both, alternating fresh SparkContexts.
# Arguments: rows rounds. About a minute with the defaults; BENCH_UI_ARGS="300000 1" checks it runs.
BENCH_UI_ARGS ?= 2000000 5
bench-ui: lib
	$(SBT) "Test/runMain spillway.bench.UiListenerBench $(BENCH_UI_ARGS)"

# Per DataFusion plan (never spilling, spilling once; 1/4/8 roots) and a spilling SortExec end to
# end: DataFusion's Directories mode (what Comet uses), its lazy OS tmp dir, and Spillway's factory,
# in one run, release build (the first build of DataFusion in release takes ~15 minutes).
bench-datafusion: lib
	$(CARGO) bench $(DATAFUSION_CRATE) --bench spill_modes

# The benchmark pages' charts (docs/benchmarks/img/*.png), drawn from the result tables on the
# pages themselves, so a chart shows exactly the figures beside it: run it after a benchmark's new
# table replaces the old one. matplotlib is installed with pip into build/charts-venv on first use.
CHARTS_VENV := build/charts-venv

bench-charts:
	test -x $(CHARTS_VENV)/bin/python || python3 -m venv $(CHARTS_VENV)
	$(CHARTS_VENV)/bin/python -c 'import matplotlib' 2>/dev/null || $(CHARTS_VENV)/bin/pip install -q matplotlib
	$(CHARTS_VENV)/bin/python project/bench-charts.py

bench-sort: lib
	$(SBT) "bench/runMain spillway.bench.SortVsSpark $(BENCH_SORT_ARGS)"

# The generated parts of the docs, each rewritten from its one source: the configuration page's
# tables from the settings' declarations in SpillwayConf (spillway.ConfDocs). make test fails when a
# committed page differs from what its source generates (spillway.ConfDocsSuite).
# The generated references: the configuration page from the settings' declarations
# (SpillwayConf), the metrics table from plan.StatsLayout. make test fails while a committed page
# differs from what these write (ConfDocsSuite; TestMetricsPageIsGeneratedFromTheLayout).
docs:
	$(SBT) "spillway/Test/runMain spillway.ConfDocs $(CURDIR)/docs/user-guide/configuration.md"
	go test -count=1 -run '^TestMetricsPageIsGeneratedFromTheLayout$$' ./plan -update

clean:
	rm -rf build target project/target project/project scala-shim/demo/target scala-shim/bench/target scala-shim/lines
