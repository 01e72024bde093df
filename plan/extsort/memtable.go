package extsort

import (
	"cmp"
	"slices"

	"github.com/spillway/spillway/plan/offheap"
)

// memTable holds records in memory and reads them back in key order: the records in an arena,
// what their keys share (keyStats, for the index's prefixes), and how far they came in key order
// (orderTracker), from which an indexer builds the sorted index. The chunks and the index are off
// the Go heap (package offheap), from 64 KiB on: reset gives them back to the OS at once.
type memTable struct {
	arena
	keyStats
	orderTracker
	index index // the sorted index, once built (sortedIndex)

	// spillCost is the memory a spill of the records needs for its run's writer
	// (chunkfile.WriterMemory): counted while records are held, so that the grant that covers
	// them covers their spill too, though the writer's buffers exist only while it runs.
	spillCost int64
}

// indexer is t's parts, for an index of its records.
func (t *memTable) indexer() indexer {
	return indexer{arena: &t.arena, keyStats: &t.keyStats, orderTracker: &t.orderTracker, idx: &t.index}
}

// sortedIndex is indexer.sortedIndex, the records pending taken as stretches' starts first.
func (t *memTable) sortedIndex(lazy bool) ([]entry, error) {
	t.startPendingStretches(&t.arena)
	return t.indexer().sortedIndex(lazy)
}

func (t *memTable) memory() int64 {
	return t.mapped + int64(t.indexed(t.n))*entrySize + t.spillReserve()
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
	entries := int64(1+t.spikeEntries(t.n)) * entrySize
	if last := len(t.chunks) - 1; last >= 0 && cap(t.chunks[last])-len(t.chunks[last]) >= size || t.spareFits(size) {
		return first + entries
	}
	return first + entries + int64(offheap.Size(max(t.newChunkSize(), size)))
}

// batchGrowth is at most the memory that adding records records of length bytes in all adds:
// growth's, for each of them, and when they do not fit in the last chunk's room nor in a spare,
// their bytes and one chunk partly filled.
func (t *memTable) batchGrowth(length, records int) int64 {
	first := t.spillCost - t.spillReserve()
	entries := int64(records+t.spikeEntries(t.n)) * entrySize
	if t.room() >= length || t.spareFits(length) {
		return first + entries
	}
	return first + entries + int64(length) + int64(offheap.Size(t.chunkSize))
}

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
	t.observeRun(&t.arena, t.chunks[last][len(t.chunks[last])-len(rec):], len(rec), t.n)
	if t.n == 0 {
		t.minRec, t.maxRec = len(rec), len(rec)
	} else {
		t.minRec, t.maxRec = min(t.minRec, len(rec)), max(t.maxRec, len(rec))
	}
	t.track(rec, len(rec), t.n)
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
	entries := (limit-t.memory())/entrySize - int64(t.spikeEntries(t.n)) // the records the budget has room for
	if uniform > 0 {
		records = int(min(int64(room/uniform), int64(len(recs)/uniform), max(entries, 0)))
		taken = records * uniform
		if records > 0 {
			t.minRec, t.maxRec = min(t.minRec, uniform), max(t.maxRec, uniform)
			t.track(recs[:taken], uniform, t.n)
			t.n += records
			t.chunks[last] = append(t.chunks[last], recs[:taken]...)
			t.observeRun(&t.arena, t.chunks[last][len(t.chunks[last])-taken:], uniform, t.n-records)
		}
		return taken, records
	}
	for taken < len(recs) && int64(records) < entries {
		size := recordSize(recs[taken:])
		if size > room-taken {
			break
		}
		t.minRec, t.maxRec = min(t.minRec, size), max(t.maxRec, size)
		t.track(recs[taken:taken+size], size, t.n)
		t.n++
		taken += size
		records++
	}
	t.chunks[last] = append(t.chunks[last], recs[:taken]...) // within the chunk's capacity: never moved
	t.observeRun(&t.arena, t.chunks[last][len(t.chunks[last])-taken:], 0, t.n-records)
	return taken, records
}

// reset drops every record and gives their memory back, spares included.
func (t *memTable) reset() {
	for _, c := range t.chunks {
		offheap.Free(c)
	}
	t.freeSpare(0)
	t.index.free()
	*t = memTable{arena: arena{chunkSize: t.chunkSize, nextChunk: t.nextChunk}, spillCost: t.spillCost}
}

// reuse drops every record but keeps their chunks, emptied, as spares for the next records: a
// sort that spills to make room for its own input refills the same memory instead of mapping it
// again, which has the kernel clear every page (7% of a spilling SQL sort's task time). The index
// is freed. The spares stay counted in memory until used or freed.
func (t *memTable) reuse() {
	t.index.free()
	spare := t.spare
	for _, c := range t.chunks {
		spare = append(spare, c[:0])
	}
	slices.SortFunc(spare, func(a, b []byte) int { return cmp.Compare(cap(b), cap(a)) })
	*t = memTable{arena: arena{chunkSize: t.chunkSize, nextChunk: t.nextChunk, spare: spare, mapped: t.mapped}, spillCost: t.spillCost}
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
	t.startPendingStretches(&t.arena)
	// An index of the whole (left by a whole spill that failed) indexes neither part, and the part
	// left counts fewer entries than it holds.
	t.index.free()
	used := 0
	for _, c := range t.chunks {
		used += len(c)
	}
	k, bytes, mapped := 0, 0, int64(0)
	// A chunk more while it brings the bytes nearer half: bytes+len < half, or past it by less
	// than bytes falls short.
	for ; k < len(t.chunks)-1 && (k == 0 || 2*bytes+len(t.chunks[k]) < used); k++ {
		bytes += len(t.chunks[k])
		mapped += int64(cap(t.chunks[k]))
	}
	n := t.starts[k] // the records of chunks[:k]
	old = *t
	old.chunks, old.starts = slices.Clone(t.chunks[:k]), slices.Clone(t.starts[:k])
	old.spare, old.index = nil, index{} // old takes no more records
	old.n, old.mapped = n, mapped
	old.orderTracker = t.orderTracker.split(n, k)
	t.chunks, t.starts = slices.Delete(t.chunks, 0, k), slices.Delete(t.starts, 0, k)
	for i := range t.starts {
		t.starts[i] -= n
	}
	t.n -= n
	t.mapped -= mapped
	return old, true
}

// rejoin puts back the records that splitOlder moved to old, before the others, as they were.
func (t *memTable) rejoin(old *memTable) {
	old.index.free()
	for i := range t.starts {
		t.starts[i] += old.n
	}
	t.orderTracker.join(&old.orderTracker, old.n, len(old.chunks), t.n)
	t.chunks, t.starts = append(old.chunks, t.chunks...), append(old.starts, t.starts...)
	t.n += old.n
	t.mapped += old.mapped
	*old = memTable{}
}

// adoptSpares takes old's spare chunks (old emptied by reuse) as spares of its own.
func (t *memTable) adoptSpares(old *memTable) {
	t.spare = append(t.spare, old.spare...)
	slices.SortFunc(t.spare, func(a, b []byte) int { return cmp.Compare(cap(b), cap(a)) })
	t.mapped += old.mapped
	*old = memTable{}
}
