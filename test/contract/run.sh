#!/usr/bin/env bash
# make test-contract: the card's JNI contract from a client that declares spillway.NativeSpill
# itself (test/contract/spillway, the card's methods only, none of the shim's classes) and loads
# build/libspillway.so with System.load. First the library must export the card's three calls.
# Everything made is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
lib=build/libspillway.so

syms=$(nm -D --defined-only "$lib" | awk '{print $3}')
for call in createPlan createTmpFile releasePlan path write releaseTmpFile usedDiskSpace; do
	grep -qx "Java_spillway_NativeSpill_$call" <<<"$syms" ||
		{ echo "$lib does not export Java_spillway_NativeSpill_$call, a call of the card" >&2; exit 1; }
done

work=$(mktemp -d build/test-contract.XXXXXX)
work=$(readlink -f "$work")
trap 'rm -rf "$work"' EXIT
javac -d "$work/classes" test/contract/CardClient.java test/contract/spillway/*.java
mkdir "$work/a" "$work/b"
touch "$work/not-a-dir"
# Under -Xcheck:jni the JVM checks every JNI call of the library; a warning from it fails the test.
# Its output is shown on a failure only: the check also reports, at length, the signal handlers
# the Go runtime installs, which is harmless.
if ! java -Xcheck:jni -cp "$work/classes" CardClient "$lib" "$work/a" "$work/b" "$work/not-a-dir" >"$work/out" 2>&1 ||
	grep -q 'WARNING in native method' "$work/out"; then
	cat "$work/out" >&2
	echo "test-contract: the card's client failed or -Xcheck:jni warned about a native method (above)" >&2
	exit 1
fi
grep '^card client:' "$work/out"
