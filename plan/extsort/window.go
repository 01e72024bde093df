package extsort

import (
	"encoding/binary"
)

// maxTracked bounds the leading key bytes whose variation is tracked: comparing them costs each
// add.
const maxTracked = 64

// keyStats tracks what the keys held share, for the index's prefixes (window): the null flags and
// the high bytes of a SQL sort's integer columns are the same in every key.
type keyStats struct {
	first          [maxTracked]byte       // the first key's first bytes
	firstLen       int                    // how many of first are set
	diff           [maxTracked / 8]uint64 // the OR of every key's first bytes XOR first: nonzero bytes vary
	minKey, maxKey int                    // the shortest and longest key held
}

// track updates the key bytes that vary and the key lengths with the records of recs added,
// records of size bytes with one key length: one record, or a run that validate found uniform.
// The key bytes compared are then the same for every record, so the loop does nothing else.
// held is the records held before recs: the first record held (one, alone in recs) sets the bytes
// the others are compared with.
func (t *keyStats) track(recs []byte, size, held int) {
	keyLen := int(binary.LittleEndian.Uint32(recs))
	if held == 0 {
		t.firstLen = copy(t.first[:], recs[headerSize:headerSize+keyLen])
		t.minKey, t.maxKey = keyLen, keyLen
		return
	}
	t.minKey, t.maxKey = min(t.minKey, keyLen), max(t.maxKey, keyLen)
	n := min(t.minKey, t.firstLen) // the bytes past minKey are never in a window
	words := n / 8
	var diff [maxTracked / 8]uint64
	for off := 0; off < len(recs); off += size {
		key := recs[off+headerSize : off+headerSize+n]
		for i := range words {
			diff[i] |= binary.LittleEndian.Uint64(key[8*i:]) ^ binary.LittleEndian.Uint64(t.first[8*i:])
		}
	}
	for i := range words {
		t.diff[i] |= diff[i]
	}
	if n%8 == 0 {
		return
	}
	// The bytes past the last whole word: one word a record, the 8 bytes that end with the key's
	// n-th when it has them, else byte by byte.
	if n >= 8 {
		p := n - 8
		var tail uint64
		for off := 0; off < len(recs); off += size {
			tail |= binary.LittleEndian.Uint64(recs[off+headerSize+p:]) ^ binary.LittleEndian.Uint64(t.first[p:])
		}
		shift := 8 * uint(p%8)
		t.diff[p/8] |= tail << shift
		t.diff[p/8+1] |= tail >> (64 - shift)
		return
	}
	for off := 0; off < len(recs); off += size {
		for i := 0; i < n; i++ {
			t.diff[0] |= uint64(recs[off+headerSize+i]^t.first[i]) << (8 * i)
		}
	}
}

// varies reports whether some keys differ at position p, below minKey and firstLen.
func (t *keyStats) varies(p int) bool { return byte(t.diff[p/8]>>(8*(p%8))) != 0 }

// window is where the index's prefixes take their 8 bytes from in every key: the positions
// where keys differ among the tracked bytes that every key has, then the bytes after those.
// Comparing keys at these positions alone orders them as bytes.Compare does, since at the
// positions skipped every key has the same byte.
type window struct {
	at         [8]int // the positions, ascending
	contiguous bool   // at[i] == at[0]+i: the prefix is one load
	end        int    // keys with equal prefixes are equal before end, once zero-padded
}

func (t *keyStats) window() window {
	var w window
	bound := min(t.minKey, t.firstLen)
	n, p := 0, 0
	for ; p < bound && n < len(w.at); p++ {
		if t.varies(p) {
			w.at[n] = p
			n++
		}
	}
	if n == len(w.at) {
		for p < bound && !t.varies(p) {
			p++
		}
		w.end = p
	} else {
		for i := n; i < len(w.at); i++ {
			w.at[i] = bound + i - n
		}
		w.end = bound + len(w.at) - n
	}
	w.contiguous = w.at[7] == w.at[0]+7
	return w
}

// prefix is key's bytes at the window's positions, big-endian, zero past the key's end.
func (w *window) prefix(key []byte) uint64 {
	if w.contiguous {
		return keyPrefix(key[w.at[0]:])
	}
	var p uint64
	for _, at := range w.at {
		p <<= 8
		if at < len(key) {
			p |= uint64(key[at])
		}
	}
	return p
}
