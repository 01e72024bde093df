package extsort

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
)

// ref is a record by ordinal and position (entry.pos).
type ref struct {
	i   int
	pos uint64
}

// maxPending is how many records below a stretch's last key may wait to be told holes (a few
// nulls in a row, or a few events that came late together; that many make a stretch), and how
// many spikes in a row may be.
const maxPending = 8

// maxBreaks bounds the stretches noted: enough for a task that reads the output of about a
// thousand map tasks over a table stored by the key, a stretch each. Keys in no order reach it
// within a few thousand records.
const maxBreaks = 1024

// indexedFirst is how many records count an index entry in memory whatever their order: keys in
// no order turn out so within a few thousand records, and so all their entries are counted
// from the first on, with no jump when they do. Past it, records held in stretches count none
// (their sort needs no index: cursor), a third less memory for a narrow SQL row; records that
// come out of order after them count an entry each, as any record does (frozen).
const indexedFirst = 1 << 16

// lazyBreaks bounds the stretches past indexedFirst records: a merge of stretches read without
// an index costs a search and a heap step a block, and stretches that interleave finely would
// make that a record; bounded, the heap is 6 levels deep at most. More stretches there put the
// table out of order (frozen).
const lazyBreaks = 64

// orderTracker notes, record by record, how far the input is in key order, as TimSort's
// countRunAndMakeAscending finds its runs, so that records that come in order need no sort.
//
// A stretch is a run of records in key order as added (breaks holds where each but the first
// starts). A break is a record whose key is less than the last key of the stretch before it:
// a stretch starts there. A record out of line with its stretch does not end it: a hole is a record
// held apart from the stretches (indexed, and merged with them when read), either one below the
// stretch's last key that the records after it resume past (a null key first in the order among
// rows stored by the key; an event that came late), or a spike, one of a few records above the
// stretch that the record after them falls back under (null keys last in the order). A record
// below the last key waits as pending until one resumes past that key (the records pending are
// then holes), or until maxPending of them, or the end of the records, make the first a
// stretch's start. recent keeps the stretch's last records, the spikes' candidates. Past
// maxBreaks stretches (lazyBreaks past indexedFirst records), or with too many holes, the input
// is out of order from a record on: past indexedFirst records, those before it stay as they are
// (frozen: they are read by merging their stretches and holes) and only those after are sorted.
type orderTracker struct {
	breaks     []int // the ordinals of the stretches' starts but the first, ascending
	holes      []ref // ascending
	pending    []ref
	outOfOrder bool
	lastKey    []byte // the stretch's last key, where it lies in the arena
	recent     []ref  // the stretch's last records since its start or last hole, oldest first: the spikes' and those under them
	frozen     int    // the records before it are in stretches and holes; 0 when none is
}

// indexed is how many of n records held as these are count an index entry: at most
// indexedFirst of those in stretches (all of them while in order, those before frozen once not),
// and every other.
// Records held apart from the stretches (holes, pending) count one each.
func (t *orderTracker) indexed(n int) int {
	apart := len(t.holes) + len(t.pending)
	if t.outOfOrder {
		return n - t.frozen + min(t.frozen-apart, indexedFirst) + apart
	}
	return min(n-apart, indexedFirst) + apart
}

// stopOrder puts the input out of order from the record of ordinal i on: past indexedFirst, the
// records before it stay as they are, in their stretches and holes (frozen).
func (t *orderTracker) stopOrder(i int) {
	t.outOfOrder, t.lastKey, t.recent, t.pending = true, nil, nil, nil
	if i > indexedFirst {
		t.frozen = i
	} else {
		t.breaks, t.holes = nil, nil
	}
}

// spikeEntries is how many entries the records held may come to count when more are added:
// records in stretches past indexedFirst count none, and up to maxPending of them, a stretch's
// last, become holes, an entry each, when a record falls back under them (spikes). Records added
// together count at most an entry each in all, spikes among them or not.
func (t *orderTracker) spikeEntries(n int) int {
	if t.outOfOrder {
		return 0
	}
	apart := len(t.holes) + len(t.pending)
	return min(maxPending, max(0, n-apart-indexedFirst))
}

// observeRun is observe for recs, records just added (where they lie in a, at the end of the last
// chunk), the first of ordinal first; size is every record's size, or 0 when they differ. Records
// of one size with short keys are compared inline while they come in order, and only those out
// of order, and the last few in order (recent), are observed one by one.
func (t *orderTracker) observeRun(a *arena, recs []byte, size, first int) {
	if t.outOfOrder || len(recs) == 0 {
		return
	}
	last := len(a.chunks) - 1
	base := uint64(last)<<32 | uint64(len(a.chunks[last])-len(recs)) // recs[0]'s position
	at := func(off, i int) ref { return ref{i: i, pos: base + uint64(off)} }
	if n := int(binary.LittleEndian.Uint32(recs)); size > 0 && n >= 8 && n <= 16 {
		// Records of one size have one key length (validate): a key of 8 to 16 bytes (a SQL
		// sort's single integral key, its null flag first, takes 9) is two big-endian words, its
		// first 8 bytes and its last 8, compared with no call while the keys come in order.
		key := func(off int) []byte { return recs[off+headerSize : off+headerSize+n] }
		words := func(off int) (uint64, uint64) {
			k := key(off)
			return binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[n-8:])
		}
		if !t.observe(a, at(0, first), key(0)) {
			return
		}
		hi, lo := words(0)      // the last key in order, when nothing is pending
		since := size           // recs from since on, in order up to here, are not in t.recent yet
		seen := func(end int) { // brings t's last keys up to the record before end
			if since < end {
				for off := max(since, end-(maxPending+1)*size); off < end; off += size {
					t.pushRecent(at(off, first+off/size))
				}
				t.lastKey = key(end - size)
			}
			since = end + size
		}
		for off, i := size, first+1; off < len(recs); off, i = off+size, i+1 {
			h, l := words(off)
			if len(t.pending) == 0 && (h > hi || h == hi && l >= lo) {
				hi, lo = h, l
				continue
			}
			seen(off)
			if !t.observe(a, at(off, i), key(off)) {
				return
			}
			hi, lo = h, l // observe leaves nothing pending only with this record the last key
		}
		seen(len(recs))
		return
	}
	for off, i := 0, first; off < len(recs); i++ {
		if !t.observe(a, at(off, i), keyOf(recs[off:])) {
			return
		}
		if size > 0 {
			off += size
		} else {
			off += recordSize(recs[off:])
		}
	}
}

// observe checks the order of one record just added, r, of key key (where it lies in a), against
// the stretch's last records, and reports false when that put the input out of order. a holds the
// records observed before, whose keys it may read.
func (t *orderTracker) observe(a *arena, r ref, key []byte) bool {
	if t.lastKey == nil || bytes.Compare(t.lastKey, key) <= 0 { // in order: what waited is apart
		if len(t.pending) > 0 {
			// Holes first, then the check: stopped, they are r's elders, frozen with the stretches.
			t.holes = append(t.holes, t.pending...)
			t.pending, t.recent = t.pending[:0], t.recent[:0]
			if !t.fewApart(0, r.i) {
				return false
			}
		}
		t.lastKey = key
		t.pushRecent(r)
		return true
	}
	if len(t.pending) == 0 {
		if j := t.spikes(a, key); j > 0 {
			// The check first: stopped, the spikes stay in their stretch, and only r counts an
			// entry more.
			if !t.fewApart(j, r.i) {
				return false
			}
			t.holes = append(t.holes, t.recent[len(t.recent)-j:]...)
			t.recent, t.lastKey = append(t.recent[:0], r), key
			return true
		}
	}
	if len(t.pending) < maxPending {
		t.pending = append(t.pending, r)
		return true
	}
	return t.startStretch(a) && t.observe(a, r, key)
}

// pushRecent notes r, a record in order, in recent, which keeps the last maxPending+1 at least.
func (t *orderTracker) pushRecent(r ref) {
	if len(t.recent) == 2*(maxPending+1) {
		t.recent = t.recent[:copy(t.recent, t.recent[maxPending+1:])]
	}
	t.recent = append(t.recent, r)
}

// spikes is how many of the stretch's last records are above key, a key below the last: at most
// maxPending, with a record of the stretch under them at or below key; else 0.
func (t *orderTracker) spikes(a *arena, key []byte) int {
	for j := len(t.recent) - 2; j >= 0 && len(t.recent)-1-j <= maxPending; j-- {
		if bytes.Compare(keyOf(a.record(entry{pos: t.recent[j].pos})), key) <= 0 {
			return len(t.recent) - 1 - j
		}
	}
	return 0
}

// fewApart reports whether the holes, and more of them, are few among the records up to the one
// of ordinal i: at most a sixteenth of them, and a few. Keys in no order make many, which would
// only delay their sort; past that the input is put out of order from i on (stopOrder).
func (t *orderTracker) fewApart(more, i int) bool {
	if len(t.holes)+more <= 64+i/16 {
		return true
	}
	t.stopOrder(i)
	return false
}

// startStretch makes the first record pending a stretch's start, and checks the others' order
// again from it (none of them waits past maxPending then). It reports false when that put the
// input out of order.
func (t *orderTracker) startStretch(a *arena) bool {
	var buf [maxPending]ref
	p := append(buf[:0], t.pending...)
	t.pending = t.pending[:0]
	if !t.breakAt(p[0].i) {
		return false
	}
	t.lastKey, t.recent = keyOf(a.record(entry{pos: p[0].pos})), append(t.recent[:0], p[0])
	for _, r := range p[1:] {
		if !t.observe(a, r, keyOf(a.record(entry{pos: r.pos}))) {
			return false
		}
	}
	return true
}

// startPendingStretches makes the records pending stretches' starts, as if no record were to
// come: the records are read (cursor) or split (splitOlder) now.
func (t *orderTracker) startPendingStretches(a *arena) {
	for len(t.pending) > 0 && t.startStretch(a) {
	}
}

// breakAt notes that a stretch starts at the record of ordinal i, and reports true; past
// maxBreaks, or lazyBreaks from indexedFirst records on, it puts the input out of order from
// that record on instead (stopOrder), and reports false.
func (t *orderTracker) breakAt(i int) bool {
	if len(t.breaks) >= maxBreaks || i >= indexedFirst && len(t.breaks) >= lazyBreaks {
		t.stopOrder(i)
		return false
	}
	t.breaks = append(t.breaks, i)
	return true
}

// split cuts the order noted at the record of ordinal n, the first of chunk k, as splitOlder
// cuts the records: old, returned, is the order of the records before n, which takes no more
// records; t keeps that of the records from n on, renumbered from 0, which start a stretch.
// Nothing may be pending (startPendingStretches).
func (t *orderTracker) split(n, k int) (old orderTracker) {
	old = orderTracker{outOfOrder: t.outOfOrder, frozen: t.frozen}
	cut, _ := slices.BinarySearch(t.breaks, n)
	old.breaks = slices.Clone(t.breaks[:cut])
	rest := t.breaks[cut:]
	if len(rest) > 0 && rest[0] == n {
		rest = rest[1:]
	}
	t.breaks = slices.Clone(rest)
	for i := range t.breaks {
		t.breaks[i] -= n
	}
	cut, _ = slices.BinarySearchFunc(t.holes, n, func(h ref, n int) int { return cmp.Compare(h.i, n) })
	old.holes = slices.Clone(t.holes[:cut])
	t.holes = slices.Clone(t.holes[cut:])
	t.recent = slices.DeleteFunc(t.recent, func(r ref) bool { return r.i < n }) // the last record's stays (see startPendingStretches)
	shiftRefs(t.holes, -n, -k)
	shiftRefs(t.recent, -n, -k)
	if t.frozen > 0 { // out of order from frozen on: the older records are all in stretches, or hold them all
		if n <= t.frozen {
			old.outOfOrder, old.frozen = false, 0
			t.frozen -= n
		} else {
			t.frozen = 0
		}
		if t.frozen == 0 {
			t.breaks, t.holes = nil, nil
		}
	}
	return old
}

// join puts back before t's the order that split cut off into old, of oldN records in oldChunks
// chunks; n is t's records.
func (t *orderTracker) join(old *orderTracker, oldN, oldChunks, n int) {
	shiftRefs(t.holes, oldN, oldChunks)
	shiftRefs(t.recent, oldN, oldChunks)
	if old.outOfOrder { // so were t's records: the records in stretches, if any, were all old's
		t.breaks, t.holes, t.frozen = old.breaks, old.holes, old.frozen
		return
	}
	// old's records were in stretches, and were the first of those held.
	t.holes = append(old.holes, t.holes...)
	end := oldN + n // where the records in stretches end
	if t.outOfOrder {
		end = oldN + t.frozen
	}
	breaks := old.breaks
	if oldN < end { // where t's records started: a stretch may start there
		breaks = append(breaks, oldN)
	}
	for _, b := range t.breaks {
		breaks = append(breaks, b+oldN)
	}
	t.breaks = breaks
	if t.outOfOrder {
		t.frozen = end
	}
}

// shiftRefs moves rs by records ordinals and chunks chunks (back when negative), as split and
// join move the records.
func shiftRefs(rs []ref, records, chunks int) {
	for i := range rs {
		rs[i].i += records
		rs[i].pos += uint64(chunks) << 32
	}
}
