// Package lz4c compresses LZ4 blocks with the reference C implementation (lz4 1.10.0,
// BSD-2-Clause, vendored in lz4/ with its licence). On spill runs it compresses about twice as
// fast as the pure-Go encoder, which took a third of a spilling SQL sort's native time; its
// blocks are standard LZ4, so readers decode them as before.
package lz4c

/*
#cgo CFLAGS: -O3
#define LZ4_STATIC_LINKING_ONLY
#define LZ4LIB_VISIBILITY __attribute__((visibility("hidden")))
#include "lz4/lz4.h"
*/
import "C"

import (
	"math"
	"unsafe"
)

// acceleration is LZ4's: how fast its match search skips ahead where it finds no match. 4 takes
// about a fifth less CPU than the default (1) on text-like lineitem rows for about 5% more bytes;
// spills are written once and read once, soon, so their CPU matters more than a few bytes. On a
// SQL sort's UnsafeRows it neither saves nor costs (measured in Spark: the same speed and bytes
// at 1 and 4), since matches there are found at once; more than 4 only adds bytes.
const acceleration = 4

// Compressor compresses blocks with one LZ4 state (LZ4_sizeofState bytes, about 16 KiB), made
// on first use and reset cheaply for each block after. Not safe for concurrent use.
type Compressor struct {
	state []uint64 // 8-byte aligned, as LZ4 requires
}

// CompressBlock compresses src into dst as one LZ4 block and returns the block's length, or 0
// when the block would not fit in dst: into a dst shorter than src, it gives up as soon as the
// output would not be smaller.
func (c *Compressor) CompressBlock(src, dst []byte) int {
	if len(src) == 0 || len(dst) == 0 || len(src) > C.LZ4_MAX_INPUT_SIZE {
		return 0
	}
	in := (*C.char)(unsafe.Pointer(unsafe.SliceData(src)))
	out := (*C.char)(unsafe.Pointer(unsafe.SliceData(dst)))
	capacity := C.int(min(len(dst), math.MaxInt32))
	if c.state == nil {
		c.state = make([]uint64, (int(C.LZ4_sizeofState())+7)/8)
		// The first call initialises the state in full.
		return int(C.LZ4_compress_fast_extState(unsafe.Pointer(&c.state[0]), in, out, C.int(len(src)), capacity, acceleration))
	}
	return int(C.LZ4_compress_fast_extState_fastReset(unsafe.Pointer(&c.state[0]), in, out, C.int(len(src)), capacity, acceleration))
}
