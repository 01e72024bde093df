package extsort

import (
	"cmp"
	"slices"
)

// radixCutoff is the bucket size under which the radix sort hands a bucket to a comparison sort.
const radixCutoff = 48

// sortEntries sorts idx by (key, insertion order) as t.compare does, with an in-place MSD radix
// sort (American flag sort) on the entries' 8-byte prefixes first: no compare, no memory access
// beyond the entries, and no scratch memory, so that the index costs no more than its 16 bytes
// a record. The radix sort is not stable; the insertion order in each entry (pos) breaks the ties
// it leaves, in the comparison sort of each run of equal prefixes, so the result is stable.
//
// Integer sort keys (the SQL sorts under joins) differ mostly within the prefix, since it starts
// after the bytes every key shares (memTable.common): a comparison sort's per-compare cost and its
// cache misses on the records then drop out, which made in-memory sorts of integer keys about
// 4× faster.
func (t *memTable) sortEntries(idx []entry) {
	t.radix(idx, 56)
	// The prefixes are in order: finish each run of equal prefixes.
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && idx[j].prefix == idx[i].prefix {
			j++
		}
		if j-i > 1 {
			if t.prefixDecides() {
				slices.SortFunc(idx[i:j], func(a, b entry) int { return cmp.Compare(a.pos, b.pos) })
			} else {
				slices.SortFunc(idx[i:j], t.compare)
			}
		}
		i = j
	}
}

// radix sorts idx by the prefix bits from shift+7 down to 0, one byte per level.
func (t *memTable) radix(idx []entry, shift uint) {
	if len(idx) < radixCutoff {
		slices.SortFunc(idx, func(a, b entry) int { return cmp.Compare(a.prefix, b.prefix) })
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
