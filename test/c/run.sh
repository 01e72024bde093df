#!/usr/bin/env bash
# make test-c: checks that the library exports exactly the JNI entry points and the header's
# functions, then builds test/c/capi_test.c against include/spillway.h, links it to
# build/libspillway.so and runs it with no JVM, on a scratch dir and a small real tmpfs (root is
# needed for the mount: the disk-full test runs on every run). Everything made is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
lib=build/libspillway.so

# The exports: the version script's list must be the header's functions, no more, no less.
want=$(grep -oE '^int32_t spillway_[a-z_]+\(' include/spillway.h | sed -E 's/^int32_t (.*)\($/\1/' | sort)
got=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v -E '^(Java_spillway_NativeSpill_[A-Za-z0-9_]+|JNI_OnLoad)$' | sort)
if [[ "$want" != "$got" ]]; then
	echo "exports of $lib differ from include/spillway.h's functions:" >&2
	diff <(echo "$want") <(echo "$got") >&2 || true
	exit 1
fi
echo "exports: JNI entry points, JNI_OnLoad and the $(wc -l <<<"$want") functions of include/spillway.h"

work=$(mktemp -d build/test-c.XXXXXX)
work=$(readlink -f "$work")
mounted=
cleanup() {
	if [[ -n "$mounted" ]]; then umount "$work/tmpfs"; fi
	rm -rf "$work"
}
trap cleanup EXIT

cc=${CC:-gcc}
$cc -std=c11 -O1 -g -Wall -Wextra -Werror -Iinclude -o "$work/capi_test" test/c/capi_test.c -pthread \
	-Lbuild -lspillway -Wl,-rpath,"$(readlink -f build)"
# The header also compiles as C++ (extern "C", no C-only syntax).
if command -v g++ >/dev/null; then
	echo '#include "spillway.h"' | g++ -std=c++17 -Wall -Wextra -Werror -Iinclude -x c++ -fsyntax-only -
fi

mkdir "$work/scratch" "$work/tmpfs"
mount -t tmpfs -o size=2m tmpfs "$work/tmpfs"
mounted=1
"$work/capi_test" "$work/scratch" "$work/tmpfs"
