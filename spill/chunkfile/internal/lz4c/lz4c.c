// The reference LZ4 (lz4/, version 1.10.0), compiled into this package with every symbol hidden
// (the pragma covers the functions lz4.c defines without LZ4LIB_VISIBILITY): the JVM may load
// another LZ4 (lz4-java's) into the same process, and the library's export map should not be
// all that keeps them apart.
#define LZ4_STATIC_LINKING_ONLY
#define LZ4LIB_VISIBILITY __attribute__((visibility("hidden")))
// The C library's headers first, outside the pragma: their functions must stay default.
#include <assert.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#pragma GCC visibility push(hidden)
#include "lz4/lz4.c"
#pragma GCC visibility pop
