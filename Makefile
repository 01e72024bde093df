# Spillway. `make demo` runs the main job, `make test` runs every test; see README.md.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

JAVA_HOME ?= $(shell dirname "$$(dirname "$$(readlink -f "$$(command -v javac)")")")
export CGO_ENABLED := 1
export CGO_CFLAGS := -I$(JAVA_HOME)/include -I$(JAVA_HOME)/include/linux
SBT := project/sbt

LIB := build/libspillway.so
GO_SOURCES := $(shell find spill plan jni -name '*.go' -o -name '*.c' -o -name '*.h' -o -name '*.map') go.mod go.sum

.PHONY: all lib jar demo test test-go test-jvm bench bench-sort clean

all: lib

lib: $(LIB)

# Only the JNI entry points are exported (the version script); -s -w drop the symbol tables, Go's
# own stack traces still work.
$(LIB): $(GO_SOURCES)
	@mkdir -p build
	go build -buildmode=c-shared -trimpath \
		-ldflags="-s -w -extldflags=-Wl,--version-script=$(CURDIR)/jni/exports.map" \
		-o $@ ./jni

jar: lib
	$(SBT) package

demo: lib
	$(SBT) run

test: test-go test-jvm

# The fuzz targets' seed corpora (testdata/fuzz/) run with the tests; then each fuzzer runs
# briefly, so a regression in input validation is caught on every run. `make fuzz` runs longer.
FUZZTIME ?= 10s

test-go:
	go vet ./...
	go test -race -count=1 ./...
	go test -run '^$$' -fuzz '^FuzzNewRoots$$' -fuzztime $(FUZZTIME) ./spill
	go test -run '^$$' -fuzz '^FuzzAdd$$' -fuzztime $(FUZZTIME) ./plan/extsort

fuzz:
	$(MAKE) test-go FUZZTIME=5m

# One sbt launch runs every JVM suite in one forked JVM against build/libspillway.so (Spark in local
# mode included). XcheckJniSuite re-runs the JNI contract suite (bad inputs included) in a child JVM
# under -Xcheck:jni and fails on any JNI warning raised in spillway's natives.
test-jvm: lib
	$(SBT) test

bench: lib
	go test -run '^$$' -bench . -benchmem -cpu 1,2 ./spill ./plan

# The native sort against Spark's own sort of the same records with the same execution memory, both
# spilling (spillway.bench.SortVsSpark). Arguments: records partitions memory runs.
BENCH_SORT_ARGS ?= 4000000 2 32m 5
bench-sort: lib
	$(SBT) "runMain spillway.bench.SortVsSpark $(BENCH_SORT_ARGS)"

clean:
	rm -rf build target project/target project/project
