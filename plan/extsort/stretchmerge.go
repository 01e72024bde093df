package extsort

import (
	"bytes"
)

// stretches returns the stretches in key order that a's records were added in, as o noted them
// (see orderTracker.breaks), up to frozen when set, in a heap, least first, for a merge
// (stretchMerge): those with records left past their holes.
func stretches(a *arena, o *orderTracker) []*stretch {
	starts := append(append(make([]int, 0, len(o.breaks)+1), 0), o.breaks...)
	pos := a.positions(starts)
	all, heap := make([]stretch, len(starts)), make([]*stretch, 0, len(starts))
	holes := o.holes
	for i, start := range starts {
		end := a.n
		if o.outOfOrder {
			end = o.frozen
		}
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		k := 0
		for k < len(holes) && holes[k].i < end {
			k++
		}
		all[i] = stretch{a: a, start: start, at: start, end: end, pos: pos[i], holes: holes[:k]}
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

// stretch is one stretch in key order in a merge of stretches (stretchMerge): its records from
// ordinal at to end.
type stretch struct {
	a       *arena
	start   int    // its first record's ordinal: equal keys of an earlier stretch go first
	at, end int    // ordinals: the next record, and one past the last
	pos     uint64 // the next record's position (entry.pos)
	holes   []ref  // its records held apart past at, which the merge skips
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
		s.pos = s.a.skip(h, recordSize(s.a.record(entry{pos: h})))
		s.at++
		s.holes = s.holes[1:]
	}
}

// left is how many records s has left to merge.
func (s *stretch) left() int { return s.end - s.at - len(s.holes) }

func (s *stretch) key() []byte { return keyOf(s.a.record(entry{pos: s.pos})) }

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
		n, pos := 1, s.a.skip(s.pos, recordSize(s.a.record(entry{pos: s.pos})))
		for ; s.at+n < end; n++ {
			rec := s.a.record(entry{pos: pos})
			if !s.before(keyOf(rec), next) {
				break
			}
			pos = s.a.skip(pos, recordSize(rec))
		}
		return n, pos
	}
	goes := func(n int) bool { // the record n past at goes first
		return s.before(keyOf(s.a.record(entry{pos: s.a.positionOf(s.at+n, size)})), next)
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
	return lo, s.a.positionOf(s.at+lo, size)
}

// stretchMerge merges stretches in key order (and skips their holes), a block at a time: a block
// is records of one stretch that lie together in the arena and go before every other stretch's
// next record.
type stretchMerge struct {
	heap []*stretch // the stretches with records left past the current block, least first
	pos  uint64     // the position of the current block's next record
	left int        // the records left in the current block
	size int        // every record's size, or 0 when they differ
}

// newStretchMerge starts a merge of the stretches of a's records that o noted.
func newStretchMerge(a *arena, o *orderTracker) stretchMerge {
	return stretchMerge{heap: stretches(a, o), size: a.recordSize()}
}

// refill takes the next block of the merge: the records of the least stretch that go before the
// next stretch's next record, or every record left of the last stretch. It reports false when
// none is left.
func (c *stretchMerge) refill() bool {
	h := c.heap
	if len(h) == 0 {
		return false
	}
	top := h[0]
	var n int
	var after uint64
	switch {
	case len(h) == 1 && len(top.holes) == 0:
		c.pos, c.left, c.heap = top.pos, top.end-top.at, h[:0]
		return true
	case len(h) == 1:
		n, after = top.holes[0].i-top.at, top.holes[0].pos
	default:
		next := h[1]
		if len(h) > 2 && stretchLess(h[2], next) {
			next = h[2]
		}
		n, after = top.block(next, c.size)
	}
	c.pos, c.left = top.pos, n
	top.at, top.pos = top.at+n, after
	if top.skipHoles(); top.at == top.end {
		h[0] = h[len(h)-1]
		c.heap = h[:len(h)-1]
	}
	siftDown(c.heap, 0, stretchLess)
	return true
}
