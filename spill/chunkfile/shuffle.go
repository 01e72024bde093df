package chunkfile

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

// shuffle writes src's bytes, in planes of stride, to dst (len(src) bytes).
func shuffle(dst, src []byte, stride int) {
	rows := len(src) / stride
	dst = dst[:len(src)]
	// Eight rows at a time: each plane gets 8 bytes from 8 reads, so that the writes go out in
	// words rather than bytes.
	r := 0
	for ; r+8 <= rows; r += 8 {
		s0 := src[r*stride : r*stride+8*stride]
		for c := 0; c < stride; c++ {
			d := dst[c*rows+r : c*rows+r+8]
			d[0] = s0[c]
			d[1] = s0[stride+c]
			d[2] = s0[2*stride+c]
			d[3] = s0[3*stride+c]
			d[4] = s0[4*stride+c]
			d[5] = s0[5*stride+c]
			d[6] = s0[6*stride+c]
			d[7] = s0[7*stride+c]
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
	r := 0
	for ; r+8 <= rows; r += 8 {
		d0 := dst[r*stride : r*stride+8*stride]
		for c := 0; c < stride; c++ {
			s := src[c*rows+r : c*rows+r+8]
			d0[c] = s[0]
			d0[stride+c] = s[1]
			d0[2*stride+c] = s[2]
			d0[3*stride+c] = s[3]
			d0[4*stride+c] = s[4]
			d0[5*stride+c] = s[5]
			d0[6*stride+c] = s[6]
			d0[7*stride+c] = s[7]
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
