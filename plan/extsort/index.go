package extsort

import (
	"unsafe"

	"github.com/spillway/spillway/plan/offheap"
)

// entrySize is the memory one record's index entry takes, counted from the record's Add on: the
// index is built only when the records are sorted, at its exact size, so no slice growth slack
// is ever held.
const entrySize = int64(unsafe.Sizeof(entry{}))

// entry indexes one in-memory record. It is 16 bytes because the sort moves entries by value:
// a 24-byte entry made the whole sort over twice as slow.
type entry struct {
	prefix uint64 // the key's bytes in the window (keyStats.window); the sort reuses it
	pos    uint64 // chunk<<32 | offset in chunk: where the record is, and its insertion order
}

// index is the memory of a sorted index, off the Go heap: entries holds no pointers.
type index struct {
	entries []entry
	mem     []byte
}

func (x *index) free() {
	offheap.Free(x.mem)
	x.entries, x.mem = nil, nil
}

// indexer sorts an arena's records into an index, by their keys' window (keyStats), and with the
// order the tracker found: records in stretches are merged, not sorted.
type indexer struct {
	*arena
	*keyStats
	*orderTracker
	idx *index
}

// sortedIndex returns an index in key order, stable, valid until reset or the next sortedIndex,
// of every record, or with lazy, of those the cursor does not merge from their stretches: the
// holes, and the records from frozen on. Records added in a few stretches in key order are merged
// (stretchIndex). Otherwise the sort itself need not be stable: the insertion order in each entry
// breaks ties, so the fast unstable sort gives a stable result. It fails only when the OS refuses
// the index's memory (counted from each record's add on: entrySize; the cursor takes no index
// where none is counted).
func (t indexer) sortedIndex(lazy bool) ([]entry, error) {
	t.idx.free() // one left by a spill that failed
	n := t.n
	if lazy {
		n = len(t.holes)
		if t.frozen > 0 {
			n += t.n - t.frozen
		}
	}
	mem, err := offheap.Alloc(n * int(entrySize))
	if err != nil {
		return nil, err
	}
	// Entries hold no pointers, so memory the collector does not scan may hold them.
	t.idx.mem = mem
	t.idx.entries = unsafe.Slice((*entry)(unsafe.Pointer(unsafe.SliceData(mem))), n)
	if !lazy && !t.outOfOrder && len(t.holes) == 0 && t.stretchIndex(t.idx.entries) {
		return t.idx.entries, nil
	}
	w := t.window()
	if t.sortShortKeys(&w, mem, lazy) {
		return t.idx.entries, nil
	}
	t.idx.entries = t.idx.entries[:0]
	idx := t.idx.entries
	// Where the prefix has bytes past every key, the insertion order goes there: equal keys
	// then have distinct prefixes in insertion order, and the radix sort alone makes the sort
	// stable, with no sort of ties by position after it.
	// The ordinal is len(idx): entries are appended in insertion order.
	var ordinals uint64 // all ones when the ordinal goes in, else zero
	if t.ordinalFits(&w) {
		ordinals = ^uint64(0)
	}
	from := uint64(0) // the first record indexed in a row: frozen's, or none with lazy
	if lazy {
		for _, h := range t.holes {
			idx = append(idx, entry{prefix: w.prefix(keyOf(t.record(entry{pos: h.pos}))) | uint64(len(idx))&ordinals, pos: h.pos})
		}
		from = t.lazyStart()
	}
	for ci := int(from >> 32); ci < len(t.chunks); ci++ {
		c, off := t.chunks[ci], 0
		if ci == int(from>>32) {
			off = int(uint32(from))
		}
		for ahead := off; off < len(c); off += recordSize(c[off:]) {
			ahead = prefetchWalk(c, ahead, off)
			idx = append(idx, entry{prefix: w.prefix(keyOf(c[off:])) | uint64(len(idx))&ordinals, pos: uint64(ci)<<32 | uint64(off)})
		}
	}
	t.sortEntries(idx, w.end)
	return idx, nil
}

// lazyStart is where the records that a lazy index holds in a row, past the holes, start
// (entry.pos): at frozen, or past the last record when none is frozen.
func (t indexer) lazyStart() uint64 {
	if t.frozen == 0 {
		return uint64(len(t.chunks)) << 32
	}
	return t.positions([]int{t.frozen})[0]
}

// stretchIndex fills idx with the records in key order, stable, by merging the stretches in key
// order that they were added in (see breaks), when the merge takes blocks of records at a time:
// stretches that do not overlap are each one block, and overlapping ones mostly are a few (a
// shuffle's blocks of a table stored by the key, each of one file or more, interleave by whole
// files). A block is found by a search over the stretch's keys (by a walk, for records of many
// sizes), and indexed with no key read. It reports false, having written nothing of use, when
// the blocks are too short to be worth it (stretches that interleave record by record).
func (t indexer) stretchIndex(idx []entry) bool {
	if len(t.breaks) == 0 {
		t.indexFrom(idx, 0) // in key order as added
		return true
	}
	m := newStretchMerge(t.arena, t.orderTracker)
	for blocks, i := 1, 0; m.refill(); blocks, i = blocks+1, i+m.left {
		if blocks > 64 && blocks*minBlock > t.n {
			return false
		}
		t.indexFrom(idx[i:i+m.left], m.pos)
	}
	return true
}

// ordinalFits reports whether the prefix's low bytes that lie past every key's end (zero in every
// prefix) can hold each record's insertion ordinal, with every key of one length, so that equal
// prefixes would mean equal keys. A single fixed-width key (an integer, a date, a compact decimal,
// not null) varies in fewer than 8 bytes: its sort is then by the prefix alone, where
// sortShortKeys did not take it already (fewer than shortKeyMinRecords records, or too few bits
// left for the records' places). Keys of several lengths are left to the tie sort, which orders
// a key before its zero-padded extensions.
func (t indexer) ordinalFits(w *window) bool {
	if t.minKey != t.maxKey {
		return false
	}
	free := 0
	for i := len(w.at) - 1; i >= 0 && w.at[i] >= t.maxKey; i-- {
		free++
	}
	return free == len(w.at) || (free > 0 && uint64(t.n) <= 1<<(8*uint(free)))
}
