package extsort

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/spillway/spillway/plan/offheap"
)

const (
	minChunk   = 64
	maxChunk   = 4 << 20  // two huge pages (offheap.HugePage)
	firstChunk = 64 << 10 // the first chunks are smaller: a sort of a few rows allocates little
)

// entrySize is the memory one record's index entry takes, counted from the record's Add on: the
// index is built only when the records are sorted, at its exact size, so no slice growth slack
// is ever held.
const entrySize = int64(unsafe.Sizeof(entry{}))

// chunkSizeFor sizes arena chunks: a sixteenth of the budget, so that a partly filled chunk
// wastes little of it, and at most 4 MiB: allocations are rare, and the chunks of a sort of 64 MiB
// or more are two huge pages each (offheap.HugePage), which the records, read in key order,
// need (a TLB miss a record otherwise).
func chunkSizeFor(budget int64) int {
	return int(min(budget, max(minChunk, min(maxChunk, budget/16))))
}

// memTable holds records in memory, encoded as in a batch, back to back in chunks, in insertion
// order. A record never straddles chunks; one larger than the chunk size gets a chunk of its own.
// The chunks and the index are off the Go heap (package offheap), from 64 KiB on: reset gives
// them back to the OS at once.
// The chunks start at firstChunk and double up to chunkSize (kept across spills), so that the
// many small sorts of a query (under its joins, say) do not each allocate and clear a full chunk.
type memTable struct {
	chunkSize int
	nextChunk int      // the size of the next chunk, up to chunkSize
	chunks    [][]byte // only the last chunk is appended to
	starts    []int    // per chunk, the records held in the chunks before it: splitOlder reads no record
	spare     [][]byte // emptied chunks (reuse) that new records fill before any is mapped, largest first
	n         int      // records held
	arena     int64    // capacity of all chunks, spares included: the memory they really take
	// spillCost is the memory a spill of the records needs for its run's writer
	// (chunkfile.WriterMemory): counted while records are held, so that the grant that covers
	// them covers their spill too, though the writer's buffers exist only while it runs.
	spillCost int64

	index    []entry // the sorted index, once built (sortedIndex)
	indexMem []byte  // the memory index lives in

	// The index's prefixes hold the key bytes that tell keys apart (window): the null flags and
	// the high bytes of a SQL sort's integer columns are the same in every key.
	first          [maxTracked]byte       // the first key's first bytes
	firstLen       int                    // how many of first are set
	diff           [maxTracked / 8]uint64 // the OR of every key's first bytes XOR first: nonzero bytes vary
	minKey, maxKey int                    // the shortest and longest key held
	minRec, maxRec int                    // the shortest and longest record held, encoded

	// Input often comes in key order already, or as a few stretches in key order: a sort over a
	// sorted scan, a table stored by the key and read file by file (TPC-H's lineitem, stored by
	// l_orderkey, reaches each task of a sort by l_orderkey as 2 to 4 stretches, each of whole
	// files). Such records need no radix sort: their index is the stretches merged by blocks
	// (stretchIndex). Each key added is compared with the one before (lastKey, the last record's
	// key where it lies in the arena); breaks holds the ordinal of each record whose key is less,
	// where a stretch starts. Past maxBreaks of them outOfOrder is set and nothing is compared.
	// Past indexedFirst records held in stretches, the sort reads them by merging the stretches
	// as it goes (cursor), with no index: their index memory is not counted (memory). A table
	// put out of order past indexedFirst records keeps those before as they are (frozen: the
	// records before it are in the stretches that breaks notes), and only the records from there
	// on count an entry and are indexed; the cursor merges the two.
	//
	// A record out of line with its stretch does not end it: one below the stretch's last key
	// that the records after it resume past (a null key, first in the order, among rows stored by
	// the key; an event that came late), or a few above the stretch that the record after them
	// falls back under (spikes: null keys last in the order), is held apart (holes): it counts an
	// entry, is indexed and merged with the stretches as the frozen records are. A record below
	// the last key, and under the records kept in recent, waits (pending) until one resumes past
	// the last key, which makes the records waiting holes, or until maxPending of them, or the
	// end of the records, make the first of them a stretch's start.
	breaks     []int
	holes      []hole // ascending
	pending    []hole
	outOfOrder bool
	lastKey    []byte // the stretch's last key
	recent     []hole // the stretch's last records since its start or last hole, oldest first: the spikes' and those under them
	frozen     int
}

// hole is a record by ordinal and position (entry.pos), for the order check (see memTable).
type hole struct {
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

// maxTracked bounds the leading key bytes whose variation is tracked: comparing them costs each
// add.
const maxTracked = 64

// entry indexes one in-memory record. It is 16 bytes because the sort moves entries by value:
// a 24-byte entry made the whole sort over twice as slow.
type entry struct {
	prefix uint64 // the key's bytes in the window (memTable.window); the sort reuses it
	pos    uint64 // chunk<<32 | offset in chunk: where the record is, and its insertion order
}

func (t *memTable) memory() int64 {
	return t.arena + int64(t.indexed(t.n))*entrySize + t.spillReserve()
}

// indexed is how many of n records held as these are count an index entry: at most
// indexedFirst of those in stretches (all of them while in order, those before frozen once not),
// and every other.
// Records held apart from the stretches (holes, pending) count one each.
func (t *memTable) indexed(n int) int {
	apart := len(t.holes) + len(t.pending)
	if t.outOfOrder {
		return n - t.frozen + min(t.frozen-apart, indexedFirst) + apart
	}
	return min(n-apart, indexedFirst) + apart
}

// stopOrder puts the table out of order from the record of ordinal i on: past indexedFirst, the
// records before it stay as they are, in their stretches and holes (frozen).
func (t *memTable) stopOrder(i int) {
	t.outOfOrder, t.lastKey, t.recent, t.pending = true, nil, nil, nil
	if i > indexedFirst {
		t.frozen = i
	} else {
		t.breaks, t.holes = nil, nil
	}
}

// spillReserve is spillCost while records are held, else nothing.
func (t *memTable) spillReserve() int64 {
	if t.n == 0 {
		return 0
	}
	return t.spillCost
}

// growth is at most the memory that adding a record of size bytes adds: its entry, those of the
// spikes it may make holes, and a chunk if it does not fit.
func (t *memTable) growth(size int) int64 {
	first := t.spillCost - t.spillReserve() // the first record brings its spill's writer
	entries := int64(1+t.spikeEntries()) * entrySize
	if last := len(t.chunks) - 1; last >= 0 && cap(t.chunks[last])-len(t.chunks[last]) >= size || t.spareFits(size) {
		return first + entries
	}
	return first + entries + int64(offheap.Size(max(t.newChunkSize(), size)))
}

// spikeEntries is how many entries the records held may come to count when more are added:
// records in stretches past indexedFirst count none, and up to maxPending of them, a stretch's
// last, become holes, an entry each, when a record falls back under them (spikes). Records added
// together count at most an entry each in all, spikes among them or not.
func (t *memTable) spikeEntries() int {
	if t.outOfOrder {
		return 0
	}
	apart := len(t.holes) + len(t.pending)
	return min(maxPending, max(0, t.n-apart-indexedFirst))
}

// spareFits reports whether a spare chunk holds size bytes: records of that many bytes in all,
// past the last chunk's room, need no new memory (a record never straddles chunks, so those that
// do not fit the last chunk's room all go to that spare).
func (t *memTable) spareFits(size int) bool { return len(t.spare) > 0 && cap(t.spare[0]) >= size }

// room is the bytes the last chunk has left: records of that many bytes in all need no new chunk.
func (t *memTable) room() int {
	if last := len(t.chunks) - 1; last >= 0 {
		return cap(t.chunks[last]) - len(t.chunks[last])
	}
	return 0
}

func (t *memTable) newChunkSize() int { return min(t.chunkSize, max(t.nextChunk, firstChunk)) }

// add copies one encoded record in. It fails only when the OS refuses a new chunk's memory;
// the record is not added then.
func (t *memTable) add(rec []byte) error {
	last := len(t.chunks) - 1
	if last < 0 || cap(t.chunks[last])-len(t.chunks[last]) < len(rec) {
		c, err := t.newChunk(len(rec))
		if err != nil {
			return err
		}
		t.chunks = append(t.chunks, c)
		t.starts = append(t.starts, t.n)
		last++
	}
	t.chunks[last] = append(t.chunks[last], rec...) // within the chunk's capacity: never moved
	t.checkOrder(t.chunks[last][len(t.chunks[last])-len(rec):], len(rec), t.n)
	if t.n == 0 {
		t.minRec, t.maxRec = len(rec), len(rec)
	} else {
		t.minRec, t.maxRec = min(t.minRec, len(rec)), max(t.maxRec, len(rec))
	}
	t.track(rec, len(rec))
	t.n++
	return nil
}

// addRun copies in, with one copy, the longest run of whole records at the start of recs (well
// formed, as validate checks) that fits in the last chunk's room and keeps memory() within limit,
// and returns the bytes and the records it took: none when the first does not fit, or when no
// record is held yet. Adding those records one by one would neither spill nor map a chunk.
// uniform is validate's: the size of every record in recs, or 0 if they differ.
func (t *memTable) addRun(recs []byte, limit int64, uniform int) (taken, records int) {
	last := len(t.chunks) - 1
	if last < 0 || t.n == 0 {
		return 0, 0
	}
	room := cap(t.chunks[last]) - len(t.chunks[last])
	entries := (limit-t.memory())/entrySize - int64(t.spikeEntries()) // the records the budget has room for
	if uniform > 0 {
		records = int(min(int64(room/uniform), int64(len(recs)/uniform), max(entries, 0)))
		taken = records * uniform
		if records > 0 {
			t.minRec, t.maxRec = min(t.minRec, uniform), max(t.maxRec, uniform)
			t.track(recs[:taken], uniform)
			t.n += records
			t.chunks[last] = append(t.chunks[last], recs[:taken]...)
			t.checkOrder(t.chunks[last][len(t.chunks[last])-taken:], uniform, t.n-records)
		}
		return taken, records
	}
	for taken < len(recs) && int64(records) < entries {
		size := recordSize(recs[taken:])
		if size > room-taken {
			break
		}
		t.minRec, t.maxRec = min(t.minRec, size), max(t.maxRec, size)
		t.track(recs[taken:taken+size], size)
		t.n++
		taken += size
		records++
	}
	t.chunks[last] = append(t.chunks[last], recs[:taken]...) // within the chunk's capacity: never moved
	t.checkOrder(t.chunks[last][len(t.chunks[last])-taken:], 0, t.n-records)
	return taken, records
}

// checkOrder checks the order of recs, records just added (where they lie in the arena, at the
// end of the last chunk), the first of ordinal first, while the records held are in stretches
// in key order (see memTable); size is every record's size, or 0 when they differ.
func (t *memTable) checkOrder(recs []byte, size, first int) {
	if t.outOfOrder || len(recs) == 0 {
		return
	}
	last := len(t.chunks) - 1
	base := uint64(last)<<32 | uint64(len(t.chunks[last])-len(recs)) // recs[0]'s position
	at := func(off, i int) hole { return hole{i: i, pos: base + uint64(off)} }
	if n := int(binary.LittleEndian.Uint32(recs)); size > 0 && n >= 8 && n <= 16 {
		// Records of one size have one key length (validate): a key of 8 to 16 bytes (a SQL
		// sort's single integral key, its null flag first, takes 9) is two big-endian words, its
		// first 8 bytes and its last 8, compared with no call while the keys come in order.
		key := func(off int) []byte { return recs[off+headerSize : off+headerSize+n] }
		words := func(off int) (uint64, uint64) {
			k := key(off)
			return binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[n-8:])
		}
		if !t.see(at(0, first), key(0)) {
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
			if !t.see(at(off, i), key(off)) {
				return
			}
			hi, lo = h, l // see leaves nothing pending only with this record the last key
		}
		seen(len(recs))
		return
	}
	for off, i := 0, first; off < len(recs); i++ {
		if !t.see(at(off, i), keyOf(recs[off:])) {
			return
		}
		if size > 0 {
			off += size
		} else {
			off += recordSize(recs[off:])
		}
	}
}

// see checks the order of one record just added, r, of key key, against the stretch's last
// records, and reports false when that put the table out of order.
func (t *memTable) see(r hole, key []byte) bool {
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
		if j := t.spikes(key); j > 0 {
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
	return t.startStretch() && t.see(r, key)
}

// pushRecent notes r, a record in order, in recent, which keeps the last maxPending+1 at least.
func (t *memTable) pushRecent(r hole) {
	if len(t.recent) == 2*(maxPending+1) {
		t.recent = t.recent[:copy(t.recent, t.recent[maxPending+1:])]
	}
	t.recent = append(t.recent, r)
}

// spikes is how many of the stretch's last records are above key, a key below the last: at most
// maxPending, with a record of the stretch under them at or below key; else 0.
func (t *memTable) spikes(key []byte) int {
	for j := len(t.recent) - 2; j >= 0 && len(t.recent)-1-j <= maxPending; j-- {
		if bytes.Compare(keyOf(t.record(entry{pos: t.recent[j].pos})), key) <= 0 {
			return len(t.recent) - 1 - j
		}
	}
	return 0
}

// fewApart reports whether the holes, and more of them, are few among the records up to the one
// of ordinal i: at most a sixteenth of them, and a few. Keys in no order make many, which would
// only delay their sort; past that the table is put out of order from i on (stopOrder).
func (t *memTable) fewApart(more, i int) bool {
	if len(t.holes)+more <= 64+i/16 {
		return true
	}
	t.stopOrder(i)
	return false
}

// startStretch makes the first record pending a stretch's start, and checks the others' order
// again from it (none of them waits past maxPending then). It reports false when that put the
// table out of order.
func (t *memTable) startStretch() bool {
	var buf [maxPending]hole
	p := append(buf[:0], t.pending...)
	t.pending = t.pending[:0]
	if !t.breakAt(p[0].i) {
		return false
	}
	t.lastKey, t.recent = keyOf(t.record(entry{pos: p[0].pos})), append(t.recent[:0], p[0])
	for _, r := range p[1:] {
		if !t.see(r, keyOf(t.record(entry{pos: r.pos}))) {
			return false
		}
	}
	return true
}

// settle makes the records pending stretches' starts, as if no record were to come: they are
// read (cursor) or split (splitOlder) now.
func (t *memTable) settle() {
	for len(t.pending) > 0 && t.startStretch() {
	}
}

// breakAt notes that a stretch starts at the record of ordinal i, and reports true; past
// maxBreaks, or lazyBreaks from indexedFirst records on, it puts the table out of order from
// that record on instead (stopOrder), and reports false.
func (t *memTable) breakAt(i int) bool {
	if len(t.breaks) >= maxBreaks || i >= indexedFirst && len(t.breaks) >= lazyBreaks {
		t.stopOrder(i)
		return false
	}
	t.breaks = append(t.breaks, i)
	return true
}

// newChunk returns an empty chunk for at least size bytes: the largest spare if it holds them,
// else a new mapping.
func (t *memTable) newChunk(size int) ([]byte, error) {
	if t.spareFits(size) {
		c := t.spare[0]
		t.spare = t.spare[1:]
		return c, nil
	}
	c, err := offheap.Alloc(max(t.newChunkSize(), size))
	if err != nil {
		return nil, err
	}
	t.nextChunk = min(t.chunkSize, 2*t.newChunkSize())
	t.arena += int64(cap(c))
	return c[:0], nil
}

// track updates the key bytes that vary and the key lengths with the records of recs added,
// records of size bytes with one key length: one record, or a run that validate found uniform.
// The key bytes compared are then the same for every record, so the loop does nothing else.
// The first record held (one, alone in recs) sets the bytes the others are compared with.
func (t *memTable) track(recs []byte, size int) {
	keyLen := int(binary.LittleEndian.Uint32(recs))
	if t.n == 0 {
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
func (t *memTable) varies(p int) bool { return byte(t.diff[p/8]>>(8*(p%8))) != 0 }

// window is where the index's prefixes take their 8 bytes from in every key: the positions
// where keys differ among the tracked bytes that every key has, then the bytes after those.
// Comparing keys at these positions alone orders them as bytes.Compare does, since at the
// positions skipped every key has the same byte.
type window struct {
	at         [8]int // the positions, ascending
	contiguous bool   // at[i] == at[0]+i: the prefix is one load
	end        int    // keys with equal prefixes are equal before end, once zero-padded
}

func (t *memTable) window() window {
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

// reset drops every record and gives their memory back, spares included.
func (t *memTable) reset() {
	for _, c := range t.chunks {
		offheap.Free(c)
	}
	t.freeSpare(0)
	t.freeIndex()
	*t = memTable{chunkSize: t.chunkSize, nextChunk: t.nextChunk, spillCost: t.spillCost}
}

// reuse drops every record but keeps their chunks, emptied, as spares for the next records: a
// sort that spills to make room for its own input refills the same memory instead of mapping it
// again, which has the kernel clear every page (7% of a spilling SQL sort's task time). The index
// is freed. The spares stay counted in memory until used or freed.
func (t *memTable) reuse() {
	t.freeIndex()
	spare := t.spare
	for _, c := range t.chunks {
		spare = append(spare, c[:0])
	}
	slices.SortFunc(spare, func(a, b []byte) int { return cmp.Compare(cap(b), cap(a)) })
	*t = memTable{chunkSize: t.chunkSize, nextChunk: t.nextChunk, spillCost: t.spillCost, spare: spare, arena: t.arena}
}

// splitOlder moves the records of the oldest chunks, those that hold the nearest to half the
// bytes of the records (chunks grow, so a chunk more may pass half by far), into a table of their
// own, and returns it: it keeps the tracked key bytes and lengths, those of every record held,
// which bound its own. The last chunk, which records are added to, always stays; ok is false when
// it is the only one.
func (t *memTable) splitOlder() (old memTable, ok bool) {
	if len(t.chunks) < 2 {
		return memTable{}, false
	}
	t.settle()
	// An index of the whole (left by a whole spill that failed) indexes neither part, and the part
	// left counts fewer entries than it holds.
	t.freeIndex()
	used := 0
	for _, c := range t.chunks {
		used += len(c)
	}
	k, bytes, arena := 0, 0, int64(0)
	// A chunk more while it brings the bytes nearer half: bytes+len < half, or past it by less
	// than bytes falls short.
	for ; k < len(t.chunks)-1 && (k == 0 || 2*bytes+len(t.chunks[k]) < used); k++ {
		bytes += len(t.chunks[k])
		arena += int64(cap(t.chunks[k]))
	}
	n := t.starts[k] // the records of chunks[:k]
	old = *t
	old.chunks, old.starts = slices.Clone(t.chunks[:k]), slices.Clone(t.starts[:k])
	old.spare, old.index, old.indexMem, old.lastKey, old.recent = nil, nil, nil, nil, nil // old takes no more records
	old.n, old.arena = n, arena
	// Each side's stretches and holes are the whole's, cut at n: the records left start a stretch.
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
	cut, _ = slices.BinarySearchFunc(t.holes, n, func(h hole, n int) int { return cmp.Compare(h.i, n) })
	old.holes = slices.Clone(t.holes[:cut])
	t.holes = slices.Clone(t.holes[cut:])
	t.recent = slices.DeleteFunc(t.recent, func(r hole) bool { return r.i < n }) // the last record's stays (see settle)
	shiftHoles(t.holes, -n, -k)
	shiftHoles(t.recent, -n, -k)
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
	t.chunks, t.starts = slices.Delete(t.chunks, 0, k), slices.Delete(t.starts, 0, k)
	for i := range t.starts {
		t.starts[i] -= n
	}
	t.n -= n
	t.arena -= arena
	return old, true
}

// rejoin puts back the records that splitOlder moved to old, before the others, as they were.
func (t *memTable) rejoin(old *memTable) {
	old.freeIndex()
	for i := range t.starts {
		t.starts[i] += old.n
	}
	shiftHoles(t.holes, old.n, len(old.chunks))
	shiftHoles(t.recent, old.n, len(old.chunks))
	t.chunks, t.starts = append(old.chunks, t.chunks...), append(old.starts, t.starts...)
	switch {
	case old.outOfOrder: // so were t's records: the records in stretches, if any, were all old's
		t.breaks, t.holes, t.frozen = old.breaks, old.holes, old.frozen
	default: // old's records were in stretches, and were the first of those held
		t.holes = append(old.holes, t.holes...)
		end := old.n + t.n // where the records in stretches end
		if t.outOfOrder {
			end = old.n + t.frozen
		}
		breaks := old.breaks
		if old.n < end { // where the records left started: a stretch may start there
			breaks = append(breaks, old.n)
		}
		for _, b := range t.breaks {
			breaks = append(breaks, b+old.n)
		}
		t.breaks = breaks
		if t.outOfOrder {
			t.frozen = end
		}
	}
	t.n += old.n
	t.arena += old.arena
	*old = memTable{}
}

// shiftHoles moves hs by records ordinals and chunks chunks (back when negative), as splitOlder
// and rejoin move the records.
func shiftHoles(hs []hole, records, chunks int) {
	for i := range hs {
		hs[i].i += records
		hs[i].pos += uint64(chunks) << 32
	}
}

// adoptSpares takes old's spare chunks (old emptied by reuse) as spares of its own.
func (t *memTable) adoptSpares(old *memTable) {
	t.spare = append(t.spare, old.spare...)
	slices.SortFunc(t.spare, func(a, b []byte) int { return cmp.Compare(cap(b), cap(a)) })
	t.arena += old.arena
	*old = memTable{}
}

// freeSpare gives back spare chunks, the smallest first, until the arena takes at most limit
// bytes or no spare is left.
func (t *memTable) freeSpare(limit int64) {
	for len(t.spare) > 0 && t.arena > limit {
		last := len(t.spare) - 1
		t.arena -= int64(cap(t.spare[last]))
		offheap.Free(t.spare[last])
		t.spare[last] = nil
		t.spare = t.spare[:last]
	}
}

func (t *memTable) freeIndex() {
	offheap.Free(t.indexMem)
	t.index, t.indexMem = nil, nil
}

// sortedIndex returns an index in key order, stable, valid until reset or the next sortedIndex,
// of every record, or with lazy, of those the cursor does not merge from their stretches: the
// holes, and the records from frozen on. Records added in a few stretches in key order are merged
// (stretchIndex). Otherwise the sort itself need not be stable: the insertion order in each entry
// breaks ties, so the fast unstable sort gives a stable result. It fails only when the OS refuses
// the index's memory (counted from each record's add on: entrySize; the cursor takes no index
// where none is counted).
func (t *memTable) sortedIndex(lazy bool) ([]entry, error) {
	t.settle()
	t.freeIndex() // one left by a spill that failed
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
	t.indexMem = mem
	t.index = unsafe.Slice((*entry)(unsafe.Pointer(unsafe.SliceData(mem))), n)
	if !lazy && !t.outOfOrder && len(t.holes) == 0 && t.stretchIndex(t.index) {
		return t.index, nil
	}
	w := t.window()
	if t.sortShortKeys(&w, mem, lazy) {
		return t.index, nil
	}
	t.index = t.index[:0]
	idx := t.index
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
func (t *memTable) lazyStart() uint64 {
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
func (t *memTable) stretchIndex(idx []entry) bool {
	if len(t.breaks) == 0 {
		t.indexFrom(idx, 0) // in key order as added
		return true
	}
	c := cursor{t: t, size: t.recordSize(), heap: t.stretches()}
	for blocks, i := 1, 0; c.refill(); blocks, i = blocks+1, i+c.left {
		if blocks > 64 && blocks*minBlock > t.n {
			return false
		}
		t.indexFrom(idx[i:i+c.left], c.pos)
	}
	return true
}

// stretches returns the stretches in key order that the records were added in (see breaks), up
// to frozen when set, in a heap, least first, for a merge (cursor.refill): those with records
// left past their holes.
func (t *memTable) stretches() []*stretch {
	starts := append(append(make([]int, 0, len(t.breaks)+1), 0), t.breaks...)
	pos := t.positions(starts)
	all, heap := make([]stretch, len(starts)), make([]*stretch, 0, len(starts))
	holes := t.holes
	for i, start := range starts {
		end := t.n
		if t.outOfOrder {
			end = t.frozen
		}
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		k := 0
		for k < len(holes) && holes[k].i < end {
			k++
		}
		all[i] = stretch{t: t, start: start, at: start, end: end, pos: pos[i], holes: holes[:k]}
		holes = holes[k:]
		if all[i].skipHoles(); all[i].at < end {
			heap = append(heap, &all[i])
		}
	}
	heapify(heap, stretchLess)
	return heap
}

// minBlock is the fewest records a block of stretchIndex's merge takes on average: shorter, and
// finding the blocks costs about what the radix sort does.
const minBlock = 32

// stretch is one stretch in key order in a merge of stretches (cursor): its records from ordinal at to end.
type stretch struct {
	t       *memTable
	start   int    // its first record's ordinal: equal keys of an earlier stretch go first
	at, end int    // ordinals: the next record, and one past the last
	pos     uint64 // the next record's position (entry.pos)
	holes   []hole // its records held apart past at, which the merge skips
}

// limit is the ordinal where the records that lie together from at on end: the next hole's, or end.
func (s *stretch) limit() int {
	if len(s.holes) > 0 {
		return s.holes[0].i
	}
	return s.end
}

// skipHoles passes the holes at at, if any.
func (s *stretch) skipHoles() {
	for len(s.holes) > 0 && s.holes[0].i == s.at {
		h := s.holes[0].pos
		s.pos = s.t.skip(h, recordSize(s.t.record(entry{pos: h})))
		s.at++
		s.holes = s.holes[1:]
	}
}

// left is how many records s has left to merge.
func (s *stretch) left() int { return s.end - s.at - len(s.holes) }

func (s *stretch) key() []byte { return keyOf(s.t.record(entry{pos: s.pos})) }

// stretchLess orders stretches by their next keys, then by age.
func stretchLess(s, o *stretch) bool {
	if c := bytes.Compare(s.key(), o.key()); c != 0 {
		return c < 0
	}
	return s.start < o.start
}

// before reports whether key, a key of s, goes before next's next record.
func (s *stretch) before(key []byte, next *stretch) bool {
	c := bytes.Compare(key, next.key())
	return c < 0 || c == 0 && s.start < next.start
}

// block is how many of s's records from at on, up to its limit, go before next's next record (at
// least one: s comes first in the merge), and the position of the record after them (meaningless
// when they are the last). Records of one size (size) are found by a galloping search over
// ordinals, others by a walk.
func (s *stretch) block(next *stretch, size int) (int, uint64) {
	end := s.limit()
	if size == 0 {
		n, pos := 1, s.t.skip(s.pos, recordSize(s.t.record(entry{pos: s.pos})))
		for ; s.at+n < end; n++ {
			rec := s.t.record(entry{pos: pos})
			if !s.before(keyOf(rec), next) {
				break
			}
			pos = s.t.skip(pos, recordSize(rec))
		}
		return n, pos
	}
	goes := func(n int) bool { // the record n past at goes first
		return s.before(keyOf(s.t.record(entry{pos: s.t.positionOf(s.at+n, size)})), next)
	}
	lo, hi := 1, 2 // records lo-1 goes first; hi is the first to try
	for s.at+hi < end && goes(hi) {
		lo, hi = hi+1, 2*hi
	}
	hi = min(hi, end-s.at) // the answer is in [lo, hi]
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if goes(mid) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if s.at+lo == end {
		if len(s.holes) > 0 {
			return lo, s.holes[0].pos
		}
		return lo, 0
	}
	return lo, s.t.positionOf(s.at+lo, size)
}

// skip is the position of the record l bytes past the one at pos: in the next chunk when the
// chunk ends there (meaningless past the last record).
func (t *memTable) skip(pos uint64, l int) uint64 {
	ci, off := int(pos>>32), int(uint32(pos))+l
	if off < len(t.chunks[ci]) {
		return uint64(ci)<<32 | uint64(off)
	}
	return uint64(ci+1) << 32
}

// positionOf is the position of the record of ordinal o, every record being of size bytes.
func (t *memTable) positionOf(o, size int) uint64 {
	ci, found := slices.BinarySearch(t.starts, o)
	if !found {
		ci--
	}
	return uint64(ci)<<32 | uint64((o-t.starts[ci])*size)
}

// indexFrom fills idx with the positions of the len(idx) records from the one at pos on, in
// insertion order.
func (t *memTable) indexFrom(idx []entry, pos uint64) {
	size := t.recordSize()
	off, i := int(uint32(pos)), 0
	for ci := int(pos >> 32); i < len(idx); ci++ {
		c, p := t.chunks[ci], uint64(ci)<<32
		if size > 0 { // a stride apart: no header read to find the next
			for ; off < len(c) && i < len(idx); off += size {
				idx[i] = entry{pos: p | uint64(off)}
				i++
			}
		} else {
			for ahead := off; off < len(c) && i < len(idx); off += recordSize(c[off:]) {
				ahead = prefetchWalk(c, ahead, off)
				idx[i] = entry{pos: p | uint64(off)}
				i++
			}
		}
		off = 0
	}
}

// positions returns the positions (entry.pos) of the records of the given ordinals, ascending.
func (t *memTable) positions(ordinals []int) []uint64 {
	pos := make([]uint64, len(ordinals))
	if size := t.recordSize(); size > 0 { // no walk: a chunk's records are a stride apart
		for i, o := range ordinals {
			pos[i] = t.positionOf(o, size)
		}
		return pos
	}
	i := 0
	for ci, c := range t.chunks {
		o := t.starts[ci]
		for off, ahead := 0, 0; off < len(c) && i < len(ordinals); off += recordSize(c[off:]) {
			ahead = prefetchWalk(c, ahead, off)
			for i < len(ordinals) && ordinals[i] == o {
				pos[i] = uint64(ci)<<32 | uint64(off)
				i++
			}
			o++
		}
	}
	return pos
}

// ordinalFits reports whether the prefix's low bytes that lie past every key's end (zero in every
// prefix) can hold each record's insertion ordinal, with every key of one length, so that equal
// prefixes would mean equal keys. A single fixed-width key (an integer, a date, a compact decimal,
// not null) varies in fewer than 8 bytes: its sort is then by the prefix alone, where
// sortShortKeys did not take it already (fewer than shortKeyMinRecords records, or too few bits
// left for the records' places). Keys of several lengths are left to the tie sort, which orders
// a key before its zero-padded extensions.
func (t *memTable) ordinalFits(w *window) bool {
	if t.minKey != t.maxKey {
		return false
	}
	free := 0
	for i := len(w.at) - 1; i >= 0 && w.at[i] >= t.maxKey; i-- {
		free++
	}
	return free == len(w.at) || (free > 0 && uint64(t.n) <= 1<<(8*uint(free)))
}

// recordSize is the size of every record held when they all have one (a SQL sort's rows of
// fixed-width columns and keys), else 0.
func (t *memTable) recordSize() int {
	if t.n == 0 || t.minRec != t.maxRec {
		return 0
	}
	return t.minRec
}

// record is the encoded record that e indexes, and possibly bytes after it.
func (t *memTable) record(e entry) []byte { return t.chunks[e.pos>>32][uint32(e.pos):] }

// prefetchAhead is how many records ahead of the one copied out, in key order, prefetch is
// asked for: far enough for a miss to be served meanwhile, near enough for the lines to stay cached.
const prefetchAhead = 8

// prefetch asks for the first two cache lines of the record that e indexes.
func (t *memTable) prefetch(e entry) {
	prefetch(unsafe.Pointer(&t.chunks[e.pos>>32][uint32(e.pos)]))
}

// walkAhead is how far ahead of the record it is at a walk of records in storage order asks for
// their lines (prefetchWalk): a few microseconds of the walk, and well within the caches.
const walkAhead = 4 << 10

// prefetchWalk asks for c's lines from ahead on up to walkAhead bytes past off, where a walk of
// c's records in storage order is, and returns how far it has asked. A walk over records of many
// sizes finds each by the header of the one before, so each load waits for the last, and the
// CPU's stride prefetcher finds no stride to follow: in a Spark task (SortShapesBench's wide
// rows, 264 bytes on average) the index walk took 108 ns a record so, against 25–43 with the
// lines asked for ahead, which arrive in parallel; a batch's validation, 23 against 11.
func prefetchWalk(c []byte, ahead, off int) int {
	for end := min(off+walkAhead, len(c)); ahead < end; ahead += 128 { // prefetch asks for two lines
		prefetch(unsafe.Pointer(&c[ahead]))
	}
	return ahead
}

// keyOf is the key of the encoded record that rec starts with.
func keyOf(rec []byte) []byte {
	return rec[headerSize : headerSize+binary.LittleEndian.Uint32(rec)]
}

func keyPrefix(key []byte) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(key)
	}
	var b [8]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:])
}
