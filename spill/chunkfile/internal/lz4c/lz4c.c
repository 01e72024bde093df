// The reference LZ4 (lz4/, version 1.10.0), compiled into this package with its symbols hidden:
// the JVM may load another LZ4 (lz4-java's) into the same process.
#define LZ4_STATIC_LINKING_ONLY
#define LZ4LIB_VISIBILITY __attribute__((visibility("hidden")))
#include "lz4/lz4.c"
