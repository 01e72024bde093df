package extsort

import (
	"cmp"
	"encoding/binary"
	"math/bits"
	"slices"
)

// radixCutoff is the bucket size under which the radix sort hands a bucket to a comparison sort.
const radixCutoff = 48

// sortEntries sorts idx by (key, insertion order) as bytes.Compare then the insertion order do,
// with an in-place MSD radix sort (American flag sort) on the entries' 8-byte prefixes: no
// compare, no memory access beyond the entries, and no scratch memory, so that the index costs
// no more than its 16 bytes a record. The radix sort is not stable; the insertion order in each
// entry (pos) breaks the ties it leaves, so the result is stable. Keys of one length that vary in
// fewer than 8 bytes carry their insertion ordinal in the prefix's spare low bytes
// (indexer.ordinalFits), so that they leave no ties at all; most such sorts never come here, but
// go through sortShortKeys' LSD passes.
//
// Integer sort keys (the SQL sorts) differ mostly within the prefix, since it holds only key
// bytes that vary (keyStats.window), not the null flags and high bytes every key shares: a
// comparison sort's per-compare cost and its cache misses on the records then drop out, which
// made in-memory sorts of integer keys about 4× faster. Keys with equal prefixes are equal
// before end; each run of them goes on with the radix sort on the keys' bytes from end on
// (sortPast), so that each record is read once per 8 bytes of key, not once per compare.
//
// The entries' prefixes are overwritten on the way: after the sort only pos means anything.
func (t indexer) sortEntries(idx []entry, end int) {
	t.radix(idx, 56)
	t.finishTies(idx, end)
}

// finishTies sorts each run of equal prefixes in idx, which is in prefix order and whose
// prefixes hold its keys' bytes up to end (keys equal before that).
func (t indexer) finishTies(idx []entry, end int) {
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && idx[j].prefix == idx[i].prefix {
			j++
		}
		if j-i > 1 {
			if t.keysEndBy(end) { // equal prefixes: equal keys
				sortByPos(idx[i:j])
			} else {
				t.sortPast(idx[i:j], end)
			}
		}
		i = j
	}
}

// sortPast sorts tied, whose keys are equal up to end once zero-padded: a key that ends by end
// is a prefix of every other one, and sorts before the longer ones. The others get their bytes
// from end on as their prefixes, and the radix sort goes on with them.
func (t indexer) sortPast(tied []entry, end int) {
	for {
		ended := 0
		for k := range tied {
			// The tied records are scattered over the arena, each a cache miss: ask for them
			// ahead, as the output does, so that the misses overlap. The entries ahead have not
			// been moved yet (the swap below moves only entries already read).
			if k+prefetchAhead < len(tied) {
				t.prefetch(tied[k+prefetchAhead])
			}
			key := keyOf(t.record(tied[k]))
			if len(key) <= end {
				tied[k].prefix = uint64(len(key))
				tied[k], tied[ended] = tied[ended], tied[k]
				ended++
				continue
			}
			tied[k].prefix = keyPrefix(key[end:])
		}
		sortByPrefixPos(tied[:ended]) // by length: the shorter key is a prefix of the longer
		rest := tied[ended:]
		if len(rest) < 2 {
			return
		}
		var diff uint64 // the bits in which some prefix differs from the first
		for _, e := range rest {
			diff |= e.prefix ^ rest[0].prefix
		}
		if diff != 0 {
			// Bytes the whole group shares in the new prefix need no radix pass.
			t.radix(rest, uint(56-bits.LeadingZeros64(diff)&^7))
			t.finishTies(rest, end+8)
			return
		}
		// The next 8 bytes are the same in every key: skip all the bytes the keys share, in
		// one pass, rather than a pass over the records for each 8.
		first := keyOf(t.record(rest[0]))[end:]
		shared := len(first)
		for k, e := range rest[1:] {
			if k+1+prefetchAhead < len(rest) {
				t.prefetch(rest[k+1+prefetchAhead])
			}
			shared = min(shared, sharedLen(first, keyOf(t.record(e))[end:]))
		}
		tied, end = rest, end+shared
	}
}

// keysEndBy reports whether every key has the same length and ends by end, so that keys whose
// bytes up to end are equal are equal.
func (t indexer) keysEndBy(end int) bool { return t.minKey == t.maxKey && t.maxKey <= end }

// radix sorts idx by the prefix bits from shift+7 down to 0, one byte per level.
func (t indexer) radix(idx []entry, shift uint) {
	if len(idx) < radixCutoff {
		insertionSortByPrefix(idx)
		return
	}
	var count [256]int
	for _, e := range idx {
		count[byte(e.prefix>>shift)]++
	}
	if count[byte(idx[0].prefix>>shift)] == len(idx) { // one bucket: this byte is the same in all
		if shift > 0 {
			t.radix(idx, shift-8)
		}
		return
	}
	var start, next [256]int
	sum := 0
	for b := range 256 {
		start[b] = sum
		next[b] = sum
		sum += count[b]
	}
	for b := range 256 {
		end := start[b] + count[b]
		for next[b] < end {
			d := byte(idx[next[b]].prefix >> shift)
			if int(d) == b {
				next[b]++
				continue
			}
			idx[next[b]], idx[next[d]] = idx[next[d]], idx[next[b]]
			next[d]++
		}
	}
	if shift == 0 {
		return
	}
	for b := range 256 {
		if count[b] > 1 {
			t.radix(idx[start[b]:start[b]+count[b]], shift-8)
		}
	}
}

// insertionSortByPrefix sorts a small bucket with no call per compare (slices.SortFunc's).
func insertionSortByPrefix(idx []entry) {
	for i := 1; i < len(idx); i++ {
		e := idx[i]
		j := i
		for ; j > 0 && idx[j-1].prefix > e.prefix; j-- {
			idx[j] = idx[j-1]
		}
		idx[j] = e
	}
}

// sortByPos sorts entries of equal keys into insertion order. Such runs are mostly short (the
// rows of one order in lineitem sorted by order key): those take an insertion sort, with no call
// per compare.
func sortByPos(idx []entry) {
	if len(idx) < radixCutoff {
		for i := 1; i < len(idx); i++ {
			e := idx[i]
			j := i
			for ; j > 0 && idx[j-1].pos > e.pos; j-- {
				idx[j] = idx[j-1]
			}
			idx[j] = e
		}
		return
	}
	slices.SortFunc(idx, func(a, b entry) int { return cmp.Compare(a.pos, b.pos) })
}

func sortByPrefixPos(idx []entry) {
	slices.SortFunc(idx, func(a, b entry) int {
		if c := cmp.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		return cmp.Compare(a.pos, b.pos)
	})
}

// sharedLen is the length of the longest common prefix of a and b.
func sharedLen(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}
