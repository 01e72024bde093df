package chunkfile

import (
	"encoding/binary"
	"unsafe"
)

// The shuffle filter (HDF5's and Blosc's): the bytes of a chunk made of records of one size are
// stored byte plane by byte plane, every record's first byte, then every record's second byte,
// and so on. The bytes of one field of the records then lie side by side: a column of sorted
// keys, of small integers or of null flags becomes long runs that lz4 and zstd shrink far better
// (and lz4 faster) than the records one after the other.
//
// A chunk of n bytes holds rows = n / stride whole rows of stride bytes (records straddle chunks,
// so a chunk's rows start where its first byte is, not at a record; the planes are then rotated,
// which compresses as well). The first rows*stride bytes are stored as the stride planes of rows
// bytes each; the n % stride bytes after them are stored as they are.
//
// Both directions move blocks of 8 rows by 8 columns: eight 8-byte loads, a transpose of the
// 8×8 bytes in registers, eight 8-byte stores. A byte at a time, the filter took 9% of a spilling
// narrow sort's CPU, more than lz4 itself.

// littleEndian: the blocks' words are loaded in the machine's order, and the transpose takes
// byte k of a word to be column k.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// shuffle writes src's bytes, in planes of stride, to dst (len(src) bytes).
func shuffle(dst, src []byte, stride int) {
	rows := len(src) / stride
	dst = dst[:len(src)]
	wide := 0 // the columns moved in blocks
	if littleEndian {
		wide = stride &^ 7
	}
	r := 0
	if wide > 0 {
		for ; r+8 <= rows; r += 8 {
			row := unsafe.Pointer(&src[r*stride]) // rows r to r+7 are in src: r+8 <= rows
			for c := 0; c < wide; c += 8 {
				s := unsafe.Add(row, c)
				x0, x1, x2, x3, x4, x5, x6, x7 := transpose8(load(s, 0), load(s, stride), load(s, 2*stride), load(s, 3*stride),
					load(s, 4*stride), load(s, 5*stride), load(s, 6*stride), load(s, 7*stride))
				d := unsafe.Pointer(&dst[c*rows+r]) // planes c to c+7, rows r to r+7: c+8 <= stride
				store(d, 0, x0)
				store(d, rows, x1)
				store(d, 2*rows, x2)
				store(d, 3*rows, x3)
				store(d, 4*rows, x4)
				store(d, 5*rows, x5)
				store(d, 6*rows, x6)
				store(d, 7*rows, x7)
			}
			for c := wide; c < stride; c++ {
				for i := range 8 {
					dst[c*rows+r+i] = src[(r+i)*stride+c]
				}
			}
		}
	}
	for ; r < rows; r++ {
		row := src[r*stride : r*stride+stride]
		for c, b := range row {
			dst[c*rows+r] = b
		}
	}
	copy(dst[rows*stride:], src[rows*stride:])
}

// unshuffle undoes shuffle: src holds len(src) bytes in planes of stride, dst gets the rows back.
func unshuffle(dst, src []byte, stride int) {
	rows := len(src) / stride
	dst = dst[:len(src)]
	wide := 0
	if littleEndian {
		wide = stride &^ 7
	}
	r := 0
	if wide > 0 {
		for ; r+8 <= rows; r += 8 {
			row := unsafe.Pointer(&dst[r*stride])
			for c := 0; c < wide; c += 8 {
				s := unsafe.Pointer(&src[c*rows+r])
				x0, x1, x2, x3, x4, x5, x6, x7 := transpose8(load(s, 0), load(s, rows), load(s, 2*rows), load(s, 3*rows),
					load(s, 4*rows), load(s, 5*rows), load(s, 6*rows), load(s, 7*rows))
				d := unsafe.Add(row, c)
				store(d, 0, x0)
				store(d, stride, x1)
				store(d, 2*stride, x2)
				store(d, 3*stride, x3)
				store(d, 4*stride, x4)
				store(d, 5*stride, x5)
				store(d, 6*stride, x6)
				store(d, 7*stride, x7)
			}
			for c := wide; c < stride; c++ {
				for i := range 8 {
					dst[(r+i)*stride+c] = src[c*rows+r+i]
				}
			}
		}
	}
	for ; r < rows; r++ {
		row := dst[r*stride : r*stride+stride]
		for c := range row {
			row[c] = src[c*rows+r]
		}
	}
	copy(dst[rows*stride:], src[rows*stride:])
}

// load and store move the 8 bytes at p+off, in the machine's order (callers check the bounds).
func load(p unsafe.Pointer, off int) uint64 { return *(*uint64)(unsafe.Add(p, off)) }

func store(p unsafe.Pointer, off int, v uint64) { *(*uint64)(unsafe.Add(p, off)) = v }

// transpose8 transposes the 8×8 bytes of x0..x7, word i holding row i (byte k: column k, little-
// endian), and returns the columns, word k holding column k. Three rounds swap blocks of 1, 2
// and 4 bytes. Words in and out, so that they stay in registers.
func transpose8(x0, x1, x2, x3, x4, x5, x6, x7 uint64) (uint64, uint64, uint64, uint64, uint64, uint64, uint64, uint64) {
	const m1, m2, m4 = 0x00ff00ff00ff00ff, 0x0000ffff0000ffff, 0x00000000ffffffff
	t := (x0>>8 ^ x1) & m1
	x1 ^= t
	x0 ^= t << 8
	t = (x2>>8 ^ x3) & m1
	x3 ^= t
	x2 ^= t << 8
	t = (x4>>8 ^ x5) & m1
	x5 ^= t
	x4 ^= t << 8
	t = (x6>>8 ^ x7) & m1
	x7 ^= t
	x6 ^= t << 8

	t = (x0>>16 ^ x2) & m2
	x2 ^= t
	x0 ^= t << 16
	t = (x1>>16 ^ x3) & m2
	x3 ^= t
	x1 ^= t << 16
	t = (x4>>16 ^ x6) & m2
	x6 ^= t
	x4 ^= t << 16
	t = (x5>>16 ^ x7) & m2
	x7 ^= t
	x5 ^= t << 16

	t = (x0>>32 ^ x4) & m4
	x4 ^= t
	x0 ^= t << 32
	t = (x1>>32 ^ x5) & m4
	x5 ^= t
	x1 ^= t << 32
	t = (x2>>32 ^ x6) & m4
	x6 ^= t
	x2 ^= t << 32
	t = (x3>>32 ^ x7) & m4
	x7 ^= t
	x3 ^= t << 32
	return x0, x1, x2, x3, x4, x5, x6, x7
}
