# Spillway. `make demo` runs the main job, `make test` runs every test; see README.md.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

JAVA_HOME ?= $(shell dirname "$$(dirname "$$(readlink -f "$$(command -v javac)")")")
export CGO_ENABLED := 1
export CGO_CFLAGS := -I$(JAVA_HOME)/include -I$(JAVA_HOME)/include/linux
SBT := project/sbt

LIB := build/libspillway.so
GO_SOURCES := $(shell find spill plan jni -name '*.go' -o -name '*.c' -o -name '*.h' -o -name '*.map') go.mod go.sum

.PHONY: all lib jar demo test test-go test-jvm bench clean

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

test-go:
	go vet ./...
	go test -race -count=1 ./...

# One sbt launch runs every JVM suite in one forked JVM against build/libspillway.so (Spark in local
# mode included). XcheckJniSuite re-runs the JNI contract suite (bad inputs included) in a child JVM
# under -Xcheck:jni and fails on any JNI warning raised in spillway's natives.
test-jvm: lib
	$(SBT) test

bench: lib
	go test -run '^$$' -bench . -benchmem -cpu 1,2 ./spill ./plan

clean:
	rm -rf build target project/target project/project
