package extsort

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"unsafe"
)

// shortKeyMinRecords is the fewest records sortShortKeys takes: below it the in-place sort is as
// fast, and a pass's 16 KiB of counts is not worth setting up.
const shortKeyMinRecords = 1024

// shortKeyDigitBits is the widest digit a pass of sortShortKeys sorts by: 2,048 counts (16 KiB)
// and as many places written to at once, which the caches hold. Keys of up to two digits (a join
// key's 21 bits in a task's range) take a pass a digit, least significant first; longer keys take
// the top digit first (sortShortKeysByTopDigit).
const shortKeyDigitBits = 11

// shortKeyLayout is how sortShortKeys packs a record into one word: the key's bytes in the window
// (keyBytes of them, big-endian) in the high bytes, and the record's place in the arena (its
// chunk, then its offset in the chunk, offsetBits wide) in the low bits. Packed places grow with
// the insertion order, since chunks are filled one after another, each from its start.
type shortKeyLayout struct {
	keyBytes   int
	offsetBits uint
}

// shortKeys reports whether every record's key and place fit in one word with nothing lost:
// keys of one length whose bytes that vary all lie in the window (the window then reaches past
// the keys' end, so equal window bytes mean equal keys), and enough bits below them for the
// record's chunk and offset; and n, the records to sort, at least shortKeyMinRecords.
func (t indexer) shortKeys(w *window, n int) (shortKeyLayout, bool) {
	if n < shortKeyMinRecords || t.minKey != t.maxKey {
		return shortKeyLayout{}, false
	}
	m := 0
	for m < len(w.at) && w.at[m] < t.maxKey {
		m++
	}
	if m == len(w.at) { // the keys may differ past the window
		return shortKeyLayout{}, false
	}
	longest := 0
	for _, c := range t.chunks {
		longest = max(longest, len(c))
	}
	l := shortKeyLayout{keyBytes: m, offsetBits: uint(bits.Len(uint(longest)))}
	if int(l.offsetBits)+bits.Len(uint(len(t.chunks)-1)) > 8*(8-m) {
		return shortKeyLayout{}, false
	}
	return l, true
}

// sortShortKeys sorts the records by key, stably, into mem (an entry each) when their keys are
// short (shortKeys): a single integer, date or decimal key, say, whose values differ in a few low
// bytes. With lazy it sorts only those sortedIndex(lazy) indexes: the holes, then the records
// from frozen on. It reports false, having written nothing, when they are not.
//
// Each record becomes one word, its key's bytes above its place in the arena, and the words are
// radix sorted by the key's bits that vary alone, each pass a count and a stable scatter, so
// equal keys keep their insertion order with no pass over the places. Bits that fit two digits
// of shortKeyDigitBits take a pass a digit, the lowest first; more take a pass by the top digit,
// then each of its buckets is sorted by the bits below, in the cache, or left as it is when its
// keys are all equal (a key of few values: one pass in all; see sortShortKeysByTopDigit). The
// words take the first half of mem and the passes use the second half as scratch, so the sort
// needs no memory beyond the index's 16 bytes a record; the sorted words are then widened in
// place into entries. Against the in-place MSD sort (sortEntries), whose swaps branch
// unpredictably and which must go down to buckets of a few records, the byte-a-pass first version
// took 42% less time on a join key and 62% less on a key of few values; digits of 11 bits took
// 15% off the join key's again; the top digit first took 20% off the key of few values, and 18%
// off a day-time interval key's 2 M records (BenchmarkSortedIndex).
func (t indexer) sortShortKeys(w *window, mem []byte, lazy bool) bool {
	n := len(mem) / int(entrySize)
	layout, ok := t.shortKeys(w, n)
	if !ok {
		return false
	}
	words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(mem))), 2*n)
	src, dst := words[:n], words[n:]
	keyShift := uint(8 * (8 - layout.keyBytes)) // where the key's bytes start; 64 when none vary
	varying := t.shortKeyWords(w, layout, src, lazy)
	low, span := uint(0), uint(0)
	if varying != 0 {
		low = uint(bits.TrailingZeros64(varying))
		span = uint(bits.Len64(varying)) - low
	}
	base := keyShift + low // where the varying bits start in a word
	var counts [1 << shortKeyDigitBits]int
	inScratch := false
	if span <= 2*shortKeyDigitBits {
		inScratch = radixPasses(src, dst, base, varying>>low, span, &counts)
	} else {
		sortShortKeysByTopDigit(src, dst, base, varying>>low, span, &counts)
		inScratch = true
	}
	// Widen the words into entries where they lie: entry i takes words 2i and 2i+1. From the
	// first half that overwrites only words already read going down; from the second half
	// (word j at n+j), only words already read going up.
	entries := unsafe.Slice((*entry)(unsafe.Pointer(unsafe.SliceData(mem))), n)
	offsetMask := uint64(1)<<layout.offsetBits - 1
	placeMask := uint64(1)<<keyShift - 1 // all ones when keyShift is 64
	sorted := src
	if inScratch {
		sorted = dst
	}
	widen := func(i int) {
		word := sorted[i]
		place := word & placeMask
		entries[i] = entry{prefix: word, pos: place>>layout.offsetBits<<32 | place&offsetMask}
	}
	if inScratch {
		for i := range n {
			widen(i)
		}
	} else {
		for i := n - 1; i >= 0; i-- {
			widen(i)
		}
	}
	return true
}

// shortKeyWords writes each record's word (see sortShortKeys) into words, in insertion order, and
// returns the key bits that differ from the first key's, in the low bits. With lazy, the records
// are the holes, then those from frozen on.
func (t indexer) shortKeyWords(w *window, l shortKeyLayout, words []uint64, lazy bool) (varying uint64) {
	keyShift := uint(8 * (8 - l.keyBytes))
	from, i := uint64(0), 0 // the first record in a row: frozen's with lazy; and the next word
	first := w.keyBytes(keyOf(t.chunks[0]), l.keyBytes)
	if lazy {
		for _, h := range t.holes {
			k := w.keyBytes(keyOf(t.record(entry{pos: h.pos})), l.keyBytes)
			words[i] = k<<keyShift | h.pos>>32<<l.offsetBits | uint64(uint32(h.pos))
			varying |= k ^ first
			i++
		}
		from = t.lazyStart()
	}
	start := func(ci int) int { // where a chunk's records in a row start
		if ci == int(from>>32) {
			return int(uint32(from))
		}
		return 0
	}
	// Records of one size (a SQL sort's fixed-width rows) are a stride apart: no header read to
	// find the next record (a dependent load a record).
	size := t.recordSize()
	if end := w.at[0] + l.keyBytes; size > 0 && w.contiguous && end >= 8 {
		// And the key bytes are one load, the 8 bytes that end where they end.
		at := headerSize + end - 8
		keyMask := uint64(1)<<(8*uint(l.keyBytes)) - 1
		for ci := int(from >> 32); ci < len(t.chunks); ci++ {
			c, place := t.chunks[ci], uint64(ci)<<l.offsetBits
			for off := start(ci); off+size <= len(c); off += size {
				k := binary.BigEndian.Uint64(c[off+at:]) & keyMask
				words[i] = k<<keyShift | place | uint64(off)
				varying |= k ^ first
				i++
			}
		}
		return varying
	}
	for ci := int(from >> 32); ci < len(t.chunks); ci++ {
		c, place := t.chunks[ci], uint64(ci)<<l.offsetBits
		off := start(ci)
		ahead := off
		for off < len(c) {
			if size == 0 { // records of many sizes: a stride apart, their loads would not wait on each other
				ahead = prefetchWalk(c, ahead, off)
			}
			k := w.keyBytes(keyOf(c[off:]), l.keyBytes)
			words[i] = k<<keyShift | place | uint64(off)
			varying |= k ^ first
			i++
			if size > 0 {
				off += size
			} else {
				off += recordSize(c[off:])
			}
		}
	}
	return varying
}

// keyBytes is key's first m bytes in the window (m ≤ 7, each at a position inside the key),
// big-endian in the low m bytes of the result.
func (w *window) keyBytes(key []byte, m int) uint64 {
	if end := w.at[0] + m; w.contiguous && end >= 8 {
		// One load of the 8 bytes that end where the window's key bytes end.
		return binary.BigEndian.Uint64(key[end-8:end]) & (uint64(1)<<(8*uint(m)) - 1)
	}
	var k uint64
	for _, at := range w.at[:m] {
		k = k<<8 | uint64(key[at])
	}
	return k
}

// sortShortKeysByTopDigit sorts words (src) into dst by their span varying bits from base up,
// stably, when they are more than two digits: by the top digit first, then, within each of its
// buckets, by the bits below it, in the cache. A bucket whose keys are all equal is left as the
// first pass put it, in insertion order: a key of few values spread over many bits (a day-time
// interval of a few hundred values, a timestamp of few) is then sorted in one pass, where
// least-significant-digit passes would take three. (A key of two digits is not sorted so: a
// pass within each of 2,048 buckets cost more than the second global pass, BenchmarkSortedIndex
// joinkey +17%.) src is left as scratch.
func sortShortKeysByTopDigit(src, dst []uint64, base uint, varying uint64, span uint, counts *[1 << shortKeyDigitBits]int) {
	rest := span - shortKeyDigitBits // the bits below the top digit
	topShift := base + rest
	const topMask = 1<<shortKeyDigitBits - 1
	for _, word := range src {
		counts[word>>topShift&topMask]++
	}
	var starts [1<<shortKeyDigitBits + 1]int
	sum := 0
	for d, c := range counts {
		starts[d] = sum
		sum += c
	}
	starts[len(starts)-1] = sum
	next := counts[:]
	copy(next, starts[:len(next)])
	for _, word := range src {
		d := word >> topShift & topMask
		dst[next[d]] = word
		next[d]++
	}
	restMask := (uint64(1)<<rest - 1) << base
	restVarying := varying & (uint64(1)<<rest - 1)
	for d := range topMask + 1 {
		bucket := dst[starts[d]:starts[d+1]]
		if len(bucket) < 2 {
			continue
		}
		first, equal := bucket[0]&restMask, true
		for _, word := range bucket[1:] {
			if word&restMask != first {
				equal = false
				break
			}
		}
		switch {
		case equal:
		case len(bucket) <= shortKeySmallBucket:
			// Words are distinct (each holds its record's place), and equal keys' words grow
			// with the insertion order: ordering whole words is the stable sort by key.
			slices.Sort(bucket)
		default:
			scratch := src[starts[d]:starts[d+1]]
			if radixPasses(bucket, scratch, base, restVarying, rest, counts) {
				copy(bucket, scratch)
			}
		}
	}
}

// shortKeySmallBucket is the largest bucket of sortShortKeysByTopDigit sorted by comparisons
// rather than passes.
const shortKeySmallBucket = 32

// radixPasses sorts words (src) stably by their span bits from base up, least significant digit
// first, in digits of at most shortKeyDigitBits, skipping a digit every word shares (by varying,
// the bits that differ among them, from base). It reports whether the result is in dst (an odd
// number of passes) rather than src; the other is scratch.
func radixPasses(src, dst []uint64, base uint, varying uint64, span uint, counts *[1 << shortKeyDigitBits]int) (inDst bool) {
	passes := (span + shortKeyDigitBits - 1) / shortKeyDigitBits
	for p := range passes {
		width := (span + passes - 1) / passes
		mask := uint64(1)<<min(width, span-p*width) - 1
		if varying>>(p*width)&mask == 0 { // every key has this digit
			continue
		}
		shift := base + p*width
		next := counts[:mask+1]
		clear(next)
		for _, word := range src {
			next[word>>shift&mask]++
		}
		sum := 0
		for d, c := range next {
			next[d] = sum
			sum += c
		}
		for _, word := range src {
			d := word >> shift & mask
			dst[next[d]] = word
			next[d]++
		}
		src, dst = dst, src
		inDst = !inDst
	}
	return inDst
}
