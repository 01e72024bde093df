package extsort

import (
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

// chunkSizeFor sizes arena chunks: a sixteenth of the budget, so that a partly filled chunk
// wastes little of it, and at most 4 MiB: allocations are rare, and the chunks of a sort of 64 MiB
// or more are two huge pages each (offheap.HugePage), which the records, read in key order,
// need (a TLB miss a record otherwise).
func chunkSizeFor(budget int64) int {
	return int(min(budget, max(minChunk, min(maxChunk, budget/16))))
}

// arena holds records encoded as in a batch, back to back in chunks, in insertion order. A record
// never straddles chunks; one larger than the chunk size gets a chunk of its own. The chunks are
// off the Go heap (package offheap) from 64 KiB on: they go back to the OS when freed.
// The chunks start at firstChunk and double up to chunkSize (kept across spills), so that the
// many small sorts of a query (under its joins, say) do not each allocate and clear a full chunk.
// A record is found by its position (entry.pos): chunk<<32 | offset in chunk, which grows with the
// insertion order.
type arena struct {
	chunkSize int
	nextChunk int      // the size of the next chunk, up to chunkSize
	chunks    [][]byte // only the last chunk is appended to
	starts    []int    // per chunk, the records held in the chunks before it: splitOlder reads no record
	spare     [][]byte // emptied chunks (reuse) that new records fill before any is mapped, largest first
	n         int      // records held
	mapped    int64    // capacity of all chunks, spares included: the memory they really take
	minRec    int      // the shortest record held, encoded
	maxRec    int      // the longest record held, encoded
}

// spareFits reports whether a spare chunk holds size bytes: records of that many bytes in all,
// past the last chunk's room, need no new memory (a record never straddles chunks, so those that
// do not fit the last chunk's room all go to that spare).
func (t *arena) spareFits(size int) bool { return len(t.spare) > 0 && cap(t.spare[0]) >= size }

// room is the bytes the last chunk has left: records of that many bytes in all need no new chunk.
func (t *arena) room() int {
	if last := len(t.chunks) - 1; last >= 0 {
		return cap(t.chunks[last]) - len(t.chunks[last])
	}
	return 0
}

func (t *arena) newChunkSize() int { return min(t.chunkSize, max(t.nextChunk, firstChunk)) }

// newChunk returns an empty chunk for at least size bytes: the largest spare if it holds them,
// else a new mapping.
func (t *arena) newChunk(size int) ([]byte, error) {
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
	t.mapped += int64(cap(c))
	return c[:0], nil
}

// freeSpare gives back spare chunks, the smallest first, until the arena takes at most limit
// bytes or no spare is left.
func (t *arena) freeSpare(limit int64) {
	for len(t.spare) > 0 && t.mapped > limit {
		last := len(t.spare) - 1
		t.mapped -= int64(cap(t.spare[last]))
		offheap.Free(t.spare[last])
		t.spare[last] = nil
		t.spare = t.spare[:last]
	}
}

// skip is the position of the record l bytes past the one at pos: in the next chunk when the
// chunk ends there (meaningless past the last record).
func (t *arena) skip(pos uint64, l int) uint64 {
	ci, off := int(pos>>32), int(uint32(pos))+l
	if off < len(t.chunks[ci]) {
		return uint64(ci)<<32 | uint64(off)
	}
	return uint64(ci+1) << 32
}

// positionOf is the position of the record of ordinal o, every record being of size bytes.
func (t *arena) positionOf(o, size int) uint64 {
	ci, found := slices.BinarySearch(t.starts, o)
	if !found {
		ci--
	}
	return uint64(ci)<<32 | uint64((o-t.starts[ci])*size)
}

// indexFrom fills idx with the positions of the len(idx) records from the one at pos on, in
// insertion order.
func (t *arena) indexFrom(idx []entry, pos uint64) {
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
func (t *arena) positions(ordinals []int) []uint64 {
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

// recordSize is the size of every record held when they all have one (a SQL sort's rows of
// fixed-width columns and keys), else 0.
func (t *arena) recordSize() int {
	if t.n == 0 || t.minRec != t.maxRec {
		return 0
	}
	return t.minRec
}

// record is the encoded record that e indexes, and possibly bytes after it.
func (t *arena) record(e entry) []byte { return t.chunks[e.pos>>32][uint32(e.pos):] }

// prefetchAhead is how many records ahead of the one copied out, in key order, prefetch is
// asked for: far enough for a miss to be served meanwhile, near enough for the lines to stay cached.
const prefetchAhead = 8

// prefetch asks for the first two cache lines of the record that e indexes.
func (t *arena) prefetch(e entry) {
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
