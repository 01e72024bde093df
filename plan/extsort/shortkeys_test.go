package extsort

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Keys whose varying bytes fit in a word beside the record's place take the short-key path, and
// it sorts as the reference does: by key, equal keys in insertion order. The shapes cover no pass
// (all keys equal: the words stay in the first half), one pass (the result in the scratch half),
// keys of more bits than a digit (the top digit's pass, then its buckets: all keys equal, a few
// words sorted whole, one pass or two within), a digit every key shares (its pass skipped), windows that are not contiguous, records of several sizes (found by their headers,
// not a stride), a nullable key's nulls padded to its width, and small chunks, so that the
// place's chunk bits are many.
func TestShortKeysSortByKeyThenInsertion(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	long := func(v uint64) []byte { return sqlLongKey(nil, v, false) }
	for _, tc := range []struct {
		name      string
		chunkSize int
		keyBytes  int
		key       func() []byte
		sizes     bool // the records' values have several lengths
	}{
		{"all keys equal", maxChunk, 0, func() []byte { return long(42) }, false},
		{"one varying byte, many equal", maxChunk, 1, func() []byte { return long(uint64(r.IntN(200))) }, false},
		{"two varying bytes", maxChunk, 2, func() []byte { return long(uint64(r.IntN(1 << 16))) }, false},
		{"a join key: three varying bytes", maxChunk, 3, func() []byte { return long(uint64(r.IntN(1<<22) + 1)) }, false},
		{"four varying bytes", maxChunk, 4, func() []byte { return long(uint64(r.IntN(1 << 30))) }, false},
		// Bits 0, 8, 16, 30 and 33 vary (each of bytes 0-4 varies): 34 bits, more than two
		// digits; the 5,000 records spread over the top digit's buckets a few each, which are
		// sorted whole.
		{"bits far apart, small buckets", maxChunk, 5, func() []byte {
			v := uint64(0)
			for _, b := range []uint{0, 8, 16, 30, 33} {
				v |= uint64(r.IntN(2)) << b
			}
			return long(v)
		}, false},
		// More varying bits than two digits: the top digit's pass, then each of its buckets.
		// Few values, each alone in its top-digit bucket (a day-time interval key): one pass.
		{"few values over many bits", maxChunk, 3, func() []byte { return long(uint64(r.IntN(50)) * 60_000_000) }, false},
		// Bits 0-13, 16 and 30 vary: two top-digit buckets (bits 20-30) of ~2,500 records whose
		// 20 bits below take two passes.
		{"large buckets, two passes within", maxChunk, 4, func() []byte {
			return long(uint64(r.IntN(2))<<30 | uint64(r.IntN(2))<<16 | uint64(r.IntN(1<<14)))
		}, false},
		// Bits 0-9, 22 and 31 vary: four top-digit buckets (bits 21-31) whose 21 bits below are
		// two digits, the upper (bits 11-20) the same in every key: one pass, its result copied
		// back.
		{"large buckets, a digit within every key shares", maxChunk, 4, func() []byte {
			return long(uint64(r.IntN(2))<<31 | uint64(r.IntN(2))<<22 | uint64(r.IntN(1<<10)))
		}, false},
		{"descending", maxChunk, 3, func() []byte { return sqlLongKey(nil, uint64(r.IntN(1<<20)), true) }, false},
		// The value's bytes 0 and 2 vary, byte 1 never: the window skips it, two key bytes.
		{"a byte that never varies between two that do", maxChunk, 2, func() []byte { return long(uint64(r.IntN(256)<<16 | r.IntN(256))) }, false},
		// Two 4-byte columns whose low bytes vary: the window skips the shared bytes between them.
		{"window not contiguous", maxChunk, 2, func() []byte {
			return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(r.IntN(7))), uint32(r.IntN(9)))
		}, false},
		{"small chunks", 256, 2, func() []byte { return long(uint64(r.IntN(3000))) }, false},
		{"records of several sizes", maxChunk, 3, func() []byte { return long(uint64(r.IntN(1<<22) + 1)) }, true},
		{"records of several sizes, window not contiguous", maxChunk, 2, func() []byte {
			return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(r.IntN(7))), uint32(r.IntN(9)))
		}, true},
		// A NULLS LAST key as the SQL sort encodes it: a null is its flag and zero's encoding. The
		// flag byte and the value's low bytes vary.
		{"nulls padded to the key's width", maxChunk, 3, func() []byte {
			if r.IntN(10) == 0 {
				return append([]byte{2}, long(0)[1:]...)
			}
			return long(uint64(r.IntN(1 << 16)))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := make([]rec, 5000)
			for i := range recs {
				recs[i] = rec{key: tc.key(), val: binary.BigEndian.AppendUint32(nil, uint32(i))}
				if tc.sizes {
					recs[i].val = append(recs[i].val, make([]byte, i%7)...)
				}
			}
			mt := memTable{arena: arena{chunkSize: tc.chunkSize}}
			defer mt.reset()
			for _, rc := range recs {
				require.NoError(t, mt.add(AppendRecord(nil, rc.key, rc.val)))
			}
			w := mt.window()
			layout, ok := mt.indexer().shortKeys(&w, mt.n)
			require.True(t, ok, "the case must take the short-key path")
			assert.Equal(t, tc.keyBytes, layout.keyBytes)
			idx, err := mt.sortedIndex(false)
			require.NoError(t, err)
			got := make([]rec, len(idx))
			for i, e := range idx {
				b := mt.record(e)
				got[i] = decode(t, b[:recordSize(b)])[0]
			}
			assertSorted(t, recs, got)
		})
	}
}

// The short-key path is taken only where a word holds everything that orders the records.
func TestShortKeysOnlyWhereAWordHoldsTheOrder(t *testing.T) {
	many := func(n int, key func(i int) []byte) [][]byte {
		keys := make([][]byte, n)
		for i := range keys {
			keys[i] = key(i)
		}
		return keys
	}
	for _, tc := range []struct {
		name string
		keys [][]byte
		fits bool
	}{
		{"a long key, low bytes vary", many(2000, func(i int) []byte { return sqlColumns(uint64(i)) }), true},
		{"too few records", many(shortKeyMinRecords-1, func(i int) []byte { return sqlColumns(uint64(i)) }), false},
		{"keys of two lengths", many(2000, func(i int) []byte { return []byte{1, 2, 3}[:1+i%3] }), false},
		// Seven varying bytes leave a byte, too few for the place of 2000 records.
		{"seven varying bytes", many(2000, func(i int) []byte {
			return binary.BigEndian.AppendUint64([]byte{1}, uint64(i)*0x01010101010101)
		}), false},
		{"keys longer than the bytes tracked", many(2000, func(i int) []byte {
			return binary.BigEndian.AppendUint16(make([]byte, maxTracked+8), uint16(i))
		}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mt := tableOf(t, tc.keys)
			w := mt.window()
			_, ok := mt.indexer().shortKeys(&w, mt.n)
			assert.Equal(t, tc.fits, ok)
		})
	}
}
