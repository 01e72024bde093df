package extsort

import (
	"bytes"
	"sort"
)

// cursor reads a memTable's records in key order, stable: through its sorted index
// (sortedIndex) when they are out of order or few, else by merging their stretches in key order
// as it goes, a block at a time, with no index (none is counted for them: memTable.indexed). A
// block is records of one stretch that lie together in memory, so they are copied out or written
// whole (span). The records held apart from the stretches (holes), and those of a table frozen
// when its order broke, are read by their index (rest), and merged with the stretches while any
// is left: rest's a record at a time, the stretches' with the records of their block that go
// before rest's next (following).
type cursor struct {
	t   *memTable
	idx []entry // the sorted index; nil when merging stretches
	i   int     // idx[i] is the next record

	stretchMerge // when merging stretches

	rest       *cursor // the holes and the records from frozen on, by their index: merged with the stretches
	a, b       []byte  // the next record of the stretches and of rest, once looked at (nil: none left)
	aPos, bPos uint64  // their positions: on equal keys the older goes first
	seen       bool    // a and b are looked at
}

// cursor returns a cursor at t's first record in key order. It fails only when the OS refuses
// the index's memory.
func (t *memTable) cursor() (*cursor, error) {
	t.startPendingStretches(&t.arena)
	lazy := t.frozen > 0 || !t.outOfOrder && t.n > indexedFirst // the stretches are merged as read
	if lazy && t.frozen == 0 && len(t.holes) == 0 {
		return &cursor{t: t, stretchMerge: newStretchMerge(&t.arena, &t.orderTracker)}, nil
	}
	idx, err := t.sortedIndex(lazy)
	if err != nil {
		return nil, err
	}
	if !lazy {
		return &cursor{t: t, idx: idx}, nil
	}
	return &cursor{t: t, stretchMerge: newStretchMerge(&t.arena, &t.orderTracker), rest: &cursor{t: t, idx: idx}}, nil
}

// next returns the next record and passes it; nil past the last.
func (c *cursor) next() []byte {
	if c.rest != nil {
		return c.take(c.least())
	}
	rec, _ := c.own()
	return rec
}

// least is the next record of a cursor with rest: the stretches' or rest's, whichever key is
// less, the older on a tie; nil past the last.
func (c *cursor) least() []byte {
	if !c.seen {
		c.a, c.aPos = c.own()
		c.b, c.bPos = c.rest.own()
		c.seen = true
	}
	if c.b == nil {
		return c.a
	}
	if c.a != nil {
		if k := bytes.Compare(keyOf(c.a), keyOf(c.b)); k < 0 || k == 0 && c.aPos < c.bPos {
			return c.a
		}
	}
	return c.b
}

// take passes rec, the record least returned. Once rest has none left, the stretches are
// merged alone again, a block at a time.
func (c *cursor) take(rec []byte) []byte {
	switch {
	case rec == nil:
		return nil
	case len(c.a) > 0 && &rec[0] == &c.a[0]:
		c.a, c.aPos = c.own()
	default:
		c.b, c.bPos = c.rest.own()
	}
	if c.b == nil && c.a != nil { // a is the stretches' next, just read: read it again alone
		c.left++
		c.pos = c.aPos
		c.rest, c.a, c.seen = nil, nil, false
	}
	return rec
}

// own is next for the stretches, or the index, alone, and the record's position.
func (c *cursor) own() ([]byte, uint64) {
	if c.idx != nil {
		if c.i == len(c.idx) {
			return nil, 0
		}
		if ahead := c.i + prefetchAhead; ahead < len(c.idx) {
			c.t.prefetch(c.idx[ahead])
		}
		e := c.idx[c.i]
		rec := c.t.record(e)
		c.i++
		return rec[:recordSize(rec)], e.pos
	}
	if c.left == 0 && !c.refill() {
		return nil, 0
	}
	pos := c.pos
	rec := c.t.record(entry{pos: pos})
	l := c.size
	if l == 0 {
		l = recordSize(rec)
	}
	c.left--
	c.pos = c.t.skip(pos, l)
	return rec[:l], pos
}

// span returns the next records, whole, that lie together in memory, as many as max bytes hold,
// and passes them: nil when the next record alone is larger than max, or none is left. Only
// when merging stretches (idx is nil).
func (c *cursor) span(max int) []byte {
	if c.rest != nil {
		rec := c.least()
		if len(rec) > max {
			return nil
		}
		if len(c.a) > 0 && &rec[0] == &c.a[0] { // with those of its block that go before b
			rec = rec[:len(rec)+c.following(rec, max-len(rec))]
		}
		c.take(rec)
		return rec
	}
	if c.left == 0 && !c.refill() {
		return nil
	}
	ch, off := c.t.chunks[c.pos>>32], int(uint32(c.pos))
	n := c.pass(max, nil)
	if n == 0 {
		return nil
	}
	return ch[off : off+n]
}

// pass passes the current block's next records that lie together in its chunk, as many as room
// bytes hold, and with goes, those it reports true of (by their offset in the chunk; true, then
// false along the block), and returns their bytes. Records of one size are found by a binary
// search, others by a walk.
func (c *cursor) pass(room int, goes func(at int) bool) int {
	ch, off := c.t.chunks[c.pos>>32], int(uint32(c.pos))
	end, k := off, 0
	if c.size > 0 {
		k = min(c.left, (len(ch)-off)/c.size, room/c.size)
		if goes != nil {
			k = sort.Search(k, func(j int) bool { return !goes(off + j*c.size) })
		}
		end += k * c.size
	} else {
		for k < c.left && end < len(ch) {
			l := recordSize(ch[end:])
			if end+l-off > room || goes != nil && !goes(end) {
				break
			}
			end += l
			k++
		}
	}
	c.left -= k
	c.pos = c.t.skip(c.pos, end-off)
	return end - off
}

// following passes the records of the current block that lie right after rec, the stretches'
// record that least returned, and go before b, rest's next (nulls last, or events that came late,
// keep rest to the end of the merge), as many as room bytes hold, and returns their bytes.
func (c *cursor) following(rec []byte, room int) int {
	if c.left == 0 || c.pos != c.aPos+uint64(len(rec)) { // the block's next record is elsewhere
		return 0
	}
	ci := c.pos >> 32
	ch, bKey := c.t.chunks[ci], keyOf(c.b)
	return c.pass(room, func(at int) bool {
		k := bytes.Compare(keyOf(ch[at:]), bKey)
		return k < 0 || k == 0 && ci<<32|uint64(at) < c.bPos
	})
}

// done reports whether every record was passed, when merging stretches.
func (c *cursor) done() bool {
	if c.rest != nil {
		return c.least() == nil
	}
	return c.left == 0 && len(c.heap) == 0
}

// remaining is how many records are left to pass.
func (c *cursor) remaining() int {
	if c.idx != nil {
		return len(c.idx) - c.i
	}
	n := c.left
	for _, s := range c.heap {
		n += s.left()
	}
	if c.rest != nil {
		n += c.rest.remaining()
		if c.seen {
			n += min(len(c.a), 1) + min(len(c.b), 1)
		}
	}
	return n
}

// clone is a cursor at the same record that moves on its own (a run written again from there).
func (c *cursor) clone() *cursor {
	d := *c
	d.heap = make([]*stretch, len(c.heap))
	for i, s := range c.heap {
		v := *s
		d.heap[i] = &v
	}
	if c.rest != nil {
		d.rest = c.rest.clone()
	}
	return &d
}
