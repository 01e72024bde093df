package extsort

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/plan/offheap"
	"github.com/spillway/spillway/spill/faultenv"
)

// addBatch adds batch to mt as Sorter.Add does: by runs where they fit, else record by record.
func addBatch(t *testing.T, mt *memTable, batch []byte) {
	t.Helper()
	uniform, err := validate(batch)
	require.NoError(t, err)
	for off := 0; off < len(batch); {
		if taken, _ := mt.addRun(batch[off:], math.MaxInt64, uniform); taken > 0 {
			off += taken
			continue
		}
		size := recordSize(batch[off:])
		require.NoError(t, mt.add(batch[off:off+size]))
		off += size
	}
}

// inInsertionOrder reports whether idx lists mt's records in the order they were added.
func inInsertionOrder(mt *memTable, idx []entry) bool {
	i := 0
	for ci, c := range mt.chunks {
		for off := 0; off < len(c); off += recordSize(c[off:]) {
			if i >= len(idx) || idx[i].pos != uint64(ci)<<32|uint64(off) {
				return false
			}
			i++
		}
	}
	return i == len(idx)
}

// keysOf reads mt's keys in idx's order.
func keysOf(mt *memTable, idx []entry) [][]byte {
	keys := make([][]byte, len(idx))
	for i, e := range idx {
		keys[i] = keyOf(mt.record(e))
	}
	return keys
}

// be is the words big-endian, one after another: a key of 8 bytes a word.
func be(words ...uint64) (k []byte) {
	for _, w := range words {
		k = binary.BigEndian.AppendUint64(k, w)
	}
	return k
}

// evenOdd is the long keys of parity from 0 to n, one record each.
func evenOdd(parity, n int) (k [][]byte) {
	for i := parity; i < n; i += 2 {
		k = append(k, sqlLongKey(nil, uint64(i), false))
	}
	return k
}

// stretchIndexOf is mt's index by stretchIndex, and whether it took the stretches.
func stretchIndexOf(t *testing.T, mt *memTable) ([]entry, bool) {
	mt.startPendingStretches(&mt.arena)
	idx := make([]entry, mt.n)
	require.False(t, mt.outOfOrder)
	require.Empty(t, mt.holes)
	return idx, mt.indexer().stretchIndex(idx)
}

// wantKeys is recs' keys sorted.
func wantKeys(recs []rec) [][]byte {
	want := make([][]byte, len(recs))
	for i, r := range reference(recs) {
		want[i] = r.key
	}
	return want
}

// Records added in key order are indexed in insertion order, with no sort, equal keys as they
// came. Stretches in key order are merged by blocks, equal keys of an earlier stretch first; those
// that interleave record by record are sorted.
func TestStretchesInKeyOrderNeedNoSort(t *testing.T) {
	long := func(v uint64) []byte { return sqlLongKey(nil, v, false) }
	keyRange := func(from, to int) (k [][]byte) { // keys from to to, 3 records each
		for i := 3 * from; i < 3*to; i++ {
			k = append(k, long(uint64(i/3)))
		}
		return k
	}
	for _, tc := range []struct {
		name     string
		keys     [][]byte
		breaks   int
		stretch  bool // indexed by its stretches
		oneStore bool // every record added alone, of several sizes (else by runs, of one size)
	}{
		{"one long key, ties, in order", keyRange(0, 20_000), 0, true, false},
		{"every key the same", repeatKeys(3000, long(7), long(7)), 0, true, false},
		{"a key before its extensions", [][]byte{{}, {'a'}, {'a'}, {'a', 0}, {'a', 'b'}, {'a', 'b', 'c'}, {'b'}}, 0, true, true},
		{"three stretches, apart", slices.Concat(keyRange(10_000, 15_000), keyRange(5_000, 10_000), keyRange(0, 5_000)), 2, true, false},
		{"keys of several lengths, two stretches", [][]byte{{'b'}, {'b', 'a'}, {'c'}, {'a'}, {'a', 'z'}}, 1, true, true},
		{"a later stretch's equal keys go after an earlier one's", slices.Concat(keyRange(5, 10), keyRange(0, 6)), 1, true, false},
		{"two stretches that overlap by blocks", slices.Concat(keyRange(0, 1_000), keyRange(2_000, 3_000), keyRange(1_000, 2_000), keyRange(3_000, 4_000)), 1, true, false},
		{"by blocks, records of several sizes", slices.Concat(keyRange(0, 1_000), keyRange(2_000, 3_000), keyRange(1_000, 2_000), keyRange(3_000, 4_000)), 1, true, true},
		{"two stretches, one record each in turn", slices.Concat(evenOdd(0, 6_000), evenOdd(1, 6_000)), 1, false, false},
		{"8-byte keys, two stretches", [][]byte{be(5), be(6), be(6), be(1), be(2)}, 1, true, false},
		{"16-byte keys, a break in the last byte", [][]byte{be(2, 1), be(2, 2), be(2, 0), be(2, 0), be(2, 1)}, 1, true, false},
		{"16-byte keys, a break in the first word", [][]byte{be(1, 9), be(2, 0), be(1, 7), be(1, 8)}, 1, true, false},
		{"stretches over the same keys, ties between them", slices.Concat(keyRange(0, 3_000), keyRange(1_000, 4_000), keyRange(2_000, 5_000)), 2, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := make([]rec, len(tc.keys))
			for i, k := range tc.keys {
				recs[i] = rec{key: k, val: binary.BigEndian.AppendUint32(nil, uint32(i))}
				if tc.oneStore { // records of several sizes: the ordinal stays last
					recs[i].val = append(make([]byte, i%3), recs[i].val...)
				}
			}
			mt := &memTable{arena: arena{chunkSize: 64 << 10}}
			t.Cleanup(mt.reset)
			if tc.oneStore {
				for _, r := range recs {
					require.NoError(t, mt.add(AppendRecord(nil, r.key, r.val)))
				}
			} else {
				addBatch(t, mt, encode(recs))
			}
			mt.startPendingStretches(&mt.arena)
			assert.Len(t, mt.breaks, tc.breaks)
			assert.Empty(t, mt.holes)
			idx, ok := stretchIndexOf(t, mt)
			assert.Equal(t, tc.stretch, ok)
			if ok {
				assert.Equal(t, wantKeys(recs), keysOf(mt, idx))
			}
			if tc.breaks == 0 {
				assert.True(t, inInsertionOrder(mt, idx), "the index is the insertion order")
			}
			idx, err := mt.sortedIndex(false)
			require.NoError(t, err)
			assert.Equal(t, wantKeys(recs), keysOf(mt, idx))
			// Equal keys in insertion order: the values are the ordinals.
			for i := 1; i < len(idx); i++ {
				a, b := mt.record(idx[i-1]), mt.record(idx[i])
				if slices.Equal(keyOf(a), keyOf(b)) {
					require.Less(t, binary.BigEndian.Uint32(a[recordSize(a)-4:]), binary.BigEndian.Uint32(b[recordSize(b)-4:]))
				}
			}
		})
	}
}

// Keys in no order stop being compared past maxBreaks.
func TestRandomKeysStopTheComparing(t *testing.T) {
	mt := &memTable{arena: arena{chunkSize: 64 << 10}}
	t.Cleanup(mt.reset)
	addBatch(t, mt, encode(randomRecords(5, 10_000, 9, 16)))
	assert.True(t, mt.outOfOrder)
	assert.Nil(t, mt.breaks)
	assert.Nil(t, mt.holes)
	assert.Nil(t, mt.lastKey)
}

// The older half split off for a spill and the records left each keep their own stretches,
// and the records left go on comparing with their own last key; rejoin puts the stretches back.
func TestStretchesAcrossSplitOlder(t *testing.T) {
	mt := &memTable{arena: arena{chunkSize: 64 << 10}}
	t.Cleanup(mt.reset)
	var batch []byte
	add := func(from, to int) {
		for i := from; i < to; i++ {
			batch = AppendRecord(batch, sqlLongKey(nil, uint64(i), false), make([]byte, 24))
		}
	}
	add(30_000, 40_000)
	add(10_000, 30_000) // a stretch from 10,000 on: in the older half
	add(0, 10_000)      // a stretch from 30,000 on: in the records left
	addBatch(t, mt, batch)
	require.Equal(t, []int{10_000, 30_000}, mt.breaks)
	old, ok := mt.splitOlder()
	require.True(t, ok)
	require.Greater(t, old.n, 10_000)
	require.Less(t, old.n, 30_000)
	assert.Equal(t, []int{10_000}, old.breaks)
	assert.Equal(t, []int{30_000 - old.n}, mt.breaks)
	oldIdx, ok := stretchIndexOf(t, &old)
	require.True(t, ok)
	assert.True(t, slices.IsSortedFunc(keysOf(&old, oldIdx), bytes.Compare))
	idx, ok := stretchIndexOf(t, mt)
	require.True(t, ok)
	assert.True(t, slices.IsSortedFunc(keysOf(mt, idx), bytes.Compare))

	mt.rejoin(&old)
	assert.Len(t, mt.breaks, 3, "where the records left started, too")
	idx, ok = stretchIndexOf(t, mt)
	require.True(t, ok)
	assert.True(t, slices.IsSortedFunc(keysOf(mt, idx), bytes.Compare))
	assert.Equal(t, 40_000, len(idx))

	old, ok = mt.splitOlder()
	require.True(t, ok)
	t.Cleanup(old.reset)
	breaks := len(mt.breaks)
	addBatch(t, mt, AppendRecord(nil, sqlLongKey(nil, 10_000, false), make([]byte, 24)))
	assert.Len(t, mt.breaks, breaks, "a key past the last one held")
	addBatch(t, mt, AppendRecord(nil, sqlLongKey(nil, 9_000, false), make([]byte, 24)))
	mt.startPendingStretches(&mt.arena)
	assert.Len(t, mt.breaks, breaks+1, "compared with the last record held")
}

// A sort whose input comes in key order, or in stretches in key order, gives what any sort gives,
// through spills of the older half, whole spills and the final merge; so does one whose order
// breaks in its last batch.
func TestInputInKeyOrderThroughSpills(t *testing.T) {
	sorted := reference(narrowRows(200_000, false)) // ~8 MB: spills at 2 MiB
	q := len(sorted) / 4
	stretches := slices.Concat(sorted[3*q:], sorted[2*q:3*q], sorted[q:2*q], sorted[:q])
	broken := slices.Clone(sorted)
	last := len(broken) - 1000
	broken[last], broken[len(broken)-1] = broken[len(broken)-1], broken[last]
	for name, recs := range map[string][]rec{"in order": sorted, "four stretches": stretches, "out of order at the end": broken} {
		t.Run(name, func(t *testing.T) {
			m, _ := newManager(t, 1<<30, nil)
			s := newSorter(t, m, 2<<20)
			addAll(t, s, recs, 16<<10)
			assert.Greater(t, s.Stats().Runs, int64(2))
			assertSorted(t, recs, drain(t, s, 8192))
		})
	}
}

// inStretches is n narrow rows (a long key, many repeated, and a value; of several sizes with
// odd) in k stretches in key order: the rows sorted, cut in k parts, the last part first, as a
// shuffle's blocks of a table stored by the key reach a sort.
func inStretches(n, k int, odd bool) []rec { return cutInStretches(reference(narrowRows(n, odd)), k) }

// cutInStretches is sorted cut in k parts, the last part first.
func cutInStretches(sorted []rec, k int) []rec {
	n := len(sorted)
	var out []rec
	for i := k - 1; i >= 0; i-- {
		out = append(out, sorted[i*n/k:(i+1)*n/k]...)
	}
	return out
}

// Past indexedFirst records, records held in stretches in key order count no index entry, and
// none is mapped to read them in order: they are merged from their stretches a block at a time,
// into buffers that cut blocks anywhere.
func TestManyRecordsInStretchesCountNoIndex(t *testing.T) {
	for _, tc := range []struct {
		odd bool
		k   int
	}{{false, 1}, {false, 40}, {true, 3}} {
		odd, k := tc.odd, tc.k
		{
			t.Run(fmt.Sprintf("odd=%v/stretches=%d", odd, k), func(t *testing.T) {
				m, _ := newManager(t, 1<<30, nil)
				mappedBefore := offheap.Mapped()
				s := newSorter(t, m, 64<<20)
				recs := inStretches(indexedFirst+15_000, k, odd)
				addAll(t, s, recs, 1<<20)
				require.Zero(t, s.Stats().Runs)
				assert.Len(t, s.mem.breaks, k-1)
				assert.Equal(t, s.mem.mapped+indexedFirst*entrySize+s.mem.spillCost, s.MemoryUsed(),
					"the first indexedFirst records count an entry, the others none")
				c, err := s.mem.cursor()
				require.NoError(t, err)
				assert.Nil(t, c.idx, "merged from the stretches")
				mapped := offheap.Mapped()
				got := drainEach(t, s, 1000, func() {
					if s.mem.n > 0 {
						assert.Equal(t, mapped, offheap.Mapped(), "no index mapped")
						checkMemory(t, s, mappedBefore, "reading")
					}
				})
				assertSorted(t, recs, got)
			})
		}
	}
}

// Records in stretches past indexedFirst go through the sort's spills: the older half's runs and
// whole runs written from their stretches, the final merge's reads of the records left in memory,
// and Spark's spill in the middle of that merge.
func TestRecordsInStretchesThroughSpills(t *testing.T) {
	for _, odd := range []bool{false, true} {
		t.Run(fmt.Sprintf("odd=%v", odd), func(t *testing.T) {
			m, _ := newManager(t, 1<<30, nil)
			mappedBefore := offheap.Mapped()
			s := newSorter(t, m, 5<<20)
			throughSpills(t, s, mappedBefore, inStretches(150_000, 4, odd), inStretches(indexedFirst+20_000, 3, odd), func() {
				require.False(t, s.mem.outOfOrder)
			})
		})
	}
}

// throughSpills adds first (~5 MB for a 5 MiB budget: a run of the older half) and spills, then
// adds more, held to the final merge, and checks held; then it reads every record back with a
// spill of those left in memory (Spark's, from the current one on) at the 100th Next, and
// asserts them sorted, with no more mapped since mappedBefore than counted.
func throughSpills(t *testing.T, s *Sorter, mappedBefore int64, first, more []rec, held func()) {
	t.Helper()
	addAll(t, s, first, 1<<20)
	_, err := s.Spill()
	require.NoError(t, err)
	addAll(t, s, more, 1<<20)
	require.GreaterOrEqual(t, s.Stats().Runs, int64(2))
	require.Greater(t, s.mem.n, indexedFirst)
	held()
	nexts := 0
	got := drainEach(t, s, 4096, func() {
		if nexts++; nexts == 100 {
			_, err := s.Spill()
			require.NoError(t, err)
		}
		checkMemory(t, s, mappedBefore, "merging")
	})
	assert.Zero(t, s.Stats().MergePasses-1)
	assertSorted(t, slices.Concat(first, more), got)
}

// orderLostLate is records in maxBreaks+1 stretches of 60 ascending keys, each below the one
// before, the last one going on past indexedFirst records, then tail records in no order, all
// below the last stretch's last key (the first below every other), with ties among them and
// with the stretches' keys.
func orderLostLate(tail int) (recs []rec, inOrder int) {
	for j := range maxBreaks + 1 {
		n := 60
		if j == maxBreaks {
			n = 10_000
		}
		for i := range n {
			recs = append(recs, rec{key: sqlLongKey(nil, uint64((maxBreaks+10-j)*1000+i), false), val: binary.LittleEndian.AppendUint32(nil, uint32(len(recs)))})
		}
	}
	inOrder = len(recs)
	r := rand.New(rand.NewPCG(5, 5))
	for i := range tail {
		k := uint64(r.IntN(19_000))
		if i == 0 {
			k = 0
		}
		recs = append(recs, rec{key: sqlLongKey(nil, k, false), val: binary.LittleEndian.AppendUint32(nil, uint32(len(recs)))})
	}
	return recs, inOrder
}

// Records that come out of order after more than indexedFirst in stretches count an index entry
// each from there on, and no more: those in stretches stay as they were (frozen), and are merged
// with the others, in memory, through the older half's spill (split before or after the frozen
// records end), a spill that fails and leaves them where they were, and whole spills.
func TestOrderLostPastIndexedFirstFreezesTheStretches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tail  int
		spill string
	}{
		{"in memory", 20_000, ""},
		{"older half within the stretches", 20_000, "refill"},
		{"older half past the stretches", 90_000, "refill"},
		{"a spill that fails", 20_000, "fail"},
		{"whole", 20_000, "whole"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, inOrder := orderLostLate(tc.tail)
			require.Greater(t, inOrder, indexedFirst)
			root := t.TempDir()
			if tc.spill == "fail" {
				root = fullTmpfs(t)
			}
			m := managerOver(t, root)
			mappedBefore := offheap.Mapped()
			s := newSorter(t, m, 256<<20)
			addAll(t, s, recs[:inOrder], 1<<20)
			require.False(t, s.mem.outOfOrder)
			require.Len(t, s.mem.breaks, maxBreaks)
			addAll(t, s, recs[inOrder:], 1<<20)
			assert.Zero(t, s.Stats().Runs)
			assert.Equal(t, inOrder, s.mem.frozen, "frozen where the order broke")
			assert.Equal(t, maxBreaks, len(s.mem.breaks))
			assert.Equal(t, s.mem.mapped+int64(indexedFirst+len(recs)-inOrder)*entrySize+s.mem.spillCost, s.MemoryUsed(),
				"an entry for each record out of order, none more")
			switch tc.spill {
			case "refill":
				_, err := s.SpillToRefill()
				require.NoError(t, err)
				require.Equal(t, int64(1), s.Stats().Runs)
			case "fail":
				held := s.MemoryUsed()
				_, err := s.SpillToRefill()
				require.Error(t, err)
				assert.Equal(t, held, s.MemoryUsed(), "the records back as they were")
				assert.Equal(t, inOrder, s.mem.frozen)
				// Their stretches too, and one more where the records left started.
				assert.Equal(t, maxBreaks+1, len(s.mem.breaks))
			case "whole":
				_, err := s.Spill()
				require.NoError(t, err)
				assert.Zero(t, s.mem.n)
			}
			checkMemory(t, s, mappedBefore, "adding")
			assertSorted(t, recs, drainEach(t, s, 3000, func() { checkMemory(t, s, mappedBefore, "reading") }))
		})
	}
}

// Past indexedFirst records, more than lazyBreaks stretches put the table out of order there.
func TestStretchesPastIndexedFirstAreFew(t *testing.T) {
	sorted := reference(narrowRows(indexedFirst+100*(lazyBreaks+10), false))
	recs := slices.Clone(sorted[:indexedFirst])
	for j := range lazyBreaks + 10 { // 100 records each, every stretch below the one before
		k := len(sorted) - 100*(j+1)
		recs = append(recs, sorted[k:k+100]...)
	}
	m, _ := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 256<<20)
	addAll(t, s, recs, 1<<20)
	assert.True(t, s.mem.outOfOrder)
	assert.Len(t, s.mem.breaks, lazyBreaks)
	assert.Equal(t, indexedFirst+100*(lazyBreaks+1), s.mem.frozen)
	assertSorted(t, recs, drain(t, s, 1<<20))
}

// A run of records in stretches whose disk fills up is written again on the other root from its
// start: the merge of the stretches starts again too.
func TestRealENOSPCRunOfStretchesIsWrittenAgain(t *testing.T) {
	small, good := faultenv.Tmpfs(t, "size=256k"), t.TempDir()
	m := managerOver(t, small, good)
	s := newSorter(t, m, 8<<20)
	recs := cutInStretches(reference(randomRecords(31, 200_000, 16, 64)), 3) // ~11 MB, random bytes: no codec makes a run fit the small disk
	addAll(t, s, recs, 1<<20)
	require.GreaterOrEqual(t, s.Stats().Runs, int64(2))
	assert.Positive(t, s.Stats().RewrittenRuns)
	assert.Empty(t, runFiles(t, small), "the run that failed on the small disk was released")
	assertSorted(t, recs, drain(t, s, 64<<10))
	require.NoError(t, s.Close())
	require.NoError(t, m.Close())
}

// outOfLine is sorted cut in k stretches, the last first (cutInStretches), with rows out of line
// among each stretch's, of the key that apart gives for the row j of a stretch: one after every
// 50th row, and with runs, three after every 1000th; never among a stretch's last rows. The keys
// of tail follow, in a stretch of their own (a shuffle block of nulls alone, say). It returns the
// rows, and how many are out of line.
func outOfLine(sorted []rec, k int, apart func(part []rec, j int) []byte, runs bool, tail []rec) (recs []rec, out int) {
	row := func(key []byte) rec {
		return rec{key: key, val: binary.LittleEndian.AppendUint64(make([]byte, 8), uint64(len(recs)))}
	}
	n := len(sorted)
	for i := k - 1; i >= 0; i-- {
		part := sorted[i*n/k : (i+1)*n/k]
		for j, r := range part {
			recs = append(recs, r)
			if j%50 != 25 || j+10 > len(part) {
				continue
			}
			count := 1
			if runs && j%1000 == 525 {
				count = 3
			}
			for range count {
				recs = append(recs, row(apart(part, j)))
				out++
			}
		}
	}
	for _, r := range tail {
		recs = append(recs, row(r.key))
	}
	return recs, out
}

// keysBelow is rows of the long keys from 0 below n, step apart, in order.
func keysBelow(n, step int) []rec {
	var recs []rec
	for k := 0; k < n; k += step {
		recs = append(recs, rec{key: sqlLongKey(nil, uint64(k), false), val: make([]byte, 16)})
	}
	return recs
}

// nulls is n rows of a null key first in the order.
func nulls(n int) []rec {
	recs := make([]rec, n)
	for i := range recs {
		recs[i].key = nullKey(0)
	}
	return recs
}

// nullKey is a null key as SQL encodes it, first in the order with flag 0, last with flag 2.
func nullKey(flag byte) []byte { return append([]byte{flag}, make([]byte, 8)...) }

// A row out of line with its stretch does not end it: a null key first in the order among rows
// stored by the key, a row that came late, or a null key last in the order (a spike), alone or a
// few in a row, is held apart and counts an entry, and the stretches count none past
// indexedFirst; the rows come out sorted and stable (ties with older and younger rows in
// stretches), through buffers that cut blocks anywhere, with no more memory mapped than counted.
// Fewer rows than indexedFirst are sorted with their holes by one index.
func TestRowsOutOfLineAreHeldApart(t *testing.T) {
	nullFirst := func([]rec, int) []byte { return nullKey(0) }
	late := func(part []rec, j int) []byte { return part[j-25].key } // below, and the ties of older rows
	lateBetween := func(part []rec, j int) []byte {                  // below, between two keys of its stretch
		k := slices.Clone(part[j-25].key)
		k[len(k)-1]++
		return k
	}
	for _, tc := range []struct {
		name  string
		n, k  int
		apart func([]rec, int) []byte
		runs  bool
		odd   bool
		tail  func(sorted []rec) []rec
	}{
		{"nulls first, one stretch, then nulls alone", indexedFirst + 15_000, 1, nullFirst, true, false, func([]rec) []rec { return nulls(2_000) }},
		{"nulls first, three stretches, rows of many sizes", indexedFirst + 15_000, 3, nullFirst, true, true, nil},
		{"rows that came late, then a stretch of their keys", indexedFirst + 15_000, 2, late, true, false, func(sorted []rec) []rec { return sorted }},
		{"rows that came late between keys, then a stretch of every key", 0, 2, lateBetween, true, false, func([]rec) []rec { return keysBelow(2*(indexedFirst+15_000), 1) }},
		{"nulls last, spikes alone and a few in a row", indexedFirst + 15_000, 2, func([]rec, int) []byte { return nullKey(2) }, true, false, nil},
		{"nulls first, fewer than indexedFirst, then nulls alone", 20_000, 2, nullFirst, true, false, func([]rec) []rec { return nulls(100) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sorted := keysBelow(2*(indexedFirst+15_000), 2)
			if tc.n > 0 {
				sorted = reference(narrowRows(tc.n, tc.odd))
			}
			var tail []rec
			if tc.tail != nil {
				tail = tc.tail(sorted)
			}
			recs, out := outOfLine(sorted, tc.k, tc.apart, tc.runs, tail)
			m, _ := newManager(t, 1<<30, nil)
			mappedBefore := offheap.Mapped()
			s := newSorter(t, m, 64<<20)
			addAll(t, s, recs, 1<<20)
			require.Zero(t, s.Stats().Runs)
			require.False(t, s.mem.outOfOrder)
			s.mem.startPendingStretches(&s.mem.arena)
			assert.Len(t, s.mem.breaks, tc.k-1+min(len(tail), 1))
			assert.Len(t, s.mem.holes, out, "every row out of line held apart")
			indexed := min(len(recs), indexedFirst+out)
			assert.Equal(t, s.mem.mapped+int64(indexed)*entrySize+s.mem.spillCost, s.MemoryUsed(),
				"an entry for each hole, and for the first indexedFirst rows in stretches")
			got := drainEach(t, s, 1000, func() {
				if s.mem.n > 0 {
					checkMemory(t, s, mappedBefore, "reading")
				}
			})
			assertSorted(t, recs, got)
		})
	}
}

// Rows held apart go through the sort's spills: the older half's runs (split among the holes)
// and whole runs, a spill that fails on a full disk and leaves them as they were, the final
// merge's reads of the rows left in memory, and Spark's spill in the middle of that merge.
func TestRowsHeldApartThroughSpills(t *testing.T) {
	withNulls := func(n, k int) []rec {
		recs, _ := outOfLine(reference(narrowRows(n, false)), k, func([]rec, int) []byte { return nullKey(0) }, true, nulls(500))
		return recs
	}
	for _, fails := range []bool{false, true} {
		t.Run(fmt.Sprintf("fails=%v", fails), func(t *testing.T) {
			root := t.TempDir()
			if fails {
				root = fullTmpfs(t)
			}
			m := managerOver(t, root)
			mappedBefore := offheap.Mapped()
			s := newSorter(t, m, 5<<20)
			recs := withNulls(indexedFirst+20_000, 3)
			if fails {
				addAll(t, s, recs, 1<<20) // within the budget: nothing spills until asked
				holes, held := slices.Clone(s.mem.holes), s.MemoryUsed()
				_, err := s.SpillToRefill()
				require.Error(t, err)
				assert.Equal(t, held, s.MemoryUsed(), "the rows back as they were")
				assert.Equal(t, holes, s.mem.holes)
				assertSorted(t, recs, drainEach(t, s, 4096, func() { checkMemory(t, s, mappedBefore, "reading") }))
				return
			}
			throughSpills(t, s, mappedBefore, withNulls(150_000, 4), recs, func() { require.NotEmpty(t, s.mem.holes) })
		})
	}
}

// Adding records never adds more to the memory counted than growth foresaw (an index entry a
// record, those of the spikes it may make holes, and the chunk it may need), and a run never
// passes its limit, whatever their order: rows held apart, their limit reached by a spike, spikes
// of eight added before the row that makes them holes, stretches started, and order lost before
// indexedFirst and past it; one by one, and by runs.
func TestAddGrowsMemoryAsForeseen(t *testing.T) {
	nullFirst := func([]rec, int) []byte { return nullKey(0) }
	withNulls, _ := outOfLine(reference(narrowRows(indexedFirst+20_000, false)), 3, nullFirst, true, nulls(1_000))
	var spikes []rec // in order past indexedFirst, then every other row a null last: too many holes
	for i := range 180_000 {
		key := sqlLongKey(nil, uint64(i), false)
		if i > 100_000 && i%2 == 1 {
			key = nullKey(2)
		}
		spikes = append(spikes, rec{key: key, val: make([]byte, 16)})
	}
	// In order past indexedFirst, then maxPending rows above, then one between, again and again.
	var spikesOfEight []rec
	for i := range indexedFirst + 100*(maxPending+1) {
		key := uint64(10 * i)
		if j := i - indexedFirst; j >= 0 && j%(maxPending+1) < maxPending {
			key = 1 << 40
		}
		spikesOfEight = append(spikesOfEight, rec{key: sqlLongKey(nil, key, false), val: make([]byte, 16)})
	}
	lost, _ := orderLostLate(5_000)
	for name, recs := range map[string][]rec{
		"keys in no order":           randomRecords(3, 20_000, 9, 24),
		"stretches with nulls first": withNulls,
		"spikes until too many":      spikes,
		"spikes of eight":            spikesOfEight,
		"order lost late":            lost,
	} {
		for _, byRuns := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/byRuns=%v", name, byRuns), func(t *testing.T) {
				mt := &memTable{arena: arena{chunkSize: 1 << 20}}
				t.Cleanup(mt.reset)
				batch := encode(recs)
				uniform, err := validate(batch)
				require.NoError(t, err)
				for off := 0; off < len(batch); {
					before, spikes := mt.memory(), mt.spikeEntries(mt.n)
					if byRuns {
						if taken, records := mt.addRun(batch[off:], before+1000*entrySize, uniform); taken > 0 {
							require.LessOrEqual(t, mt.memory()-before, int64(records+spikes)*entrySize, "a run of %d records at byte %d", records, off)
							require.LessOrEqual(t, mt.memory(), before+1000*entrySize, "a run of %d records at byte %d", records, off)
							off += taken
							continue
						}
					}
					size := recordSize(batch[off:])
					foreseen := mt.growth(size)
					require.NoError(t, mt.add(batch[off:off+size]))
					require.LessOrEqual(t, mt.memory()-before, foreseen, "the record at byte %d", off)
					off += size
				}
				if name == "spikes until too many" {
					assert.True(t, mt.outOfOrder)
					assert.Greater(t, mt.frozen, indexedFirst)
				}
			})
		}
	}
}

// Rows in order past indexedFirst count no entry; maxPending of them added by earlier batches,
// above the stretch, become holes when a row falls back under them: the add of that one row grows
// the count by their entries too, and AddWithin, held to what the JVM was granted, asks for them
// before it takes the row, as a run's limit does.
func TestSpikesOfEarlierAddsAreForeseen(t *testing.T) {
	m, _ := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 256<<20)
	var recs []rec
	for i := range indexedFirst + 100 {
		recs = append(recs, rec{key: sqlLongKey(nil, uint64(10*i), false), val: make([]byte, 8)})
	}
	addAll(t, s, recs, 64<<10)
	last := uint64(10 * (indexedFirst + 99))
	for j := range maxPending {
		require.NoError(t, s.Add(AppendRecord(nil, sqlLongKey(nil, last+1000+uint64(j), false), make([]byte, 8))))
	}
	batch := AppendRecord(nil, sqlLongKey(nil, last+1, false), make([]byte, 8))
	// A run with room for one entry left takes no record: it might make the spikes holes.
	limit := s.mem.memory() + entrySize
	taken, _ := s.mem.addRun(batch, limit, len(batch))
	assert.Zero(t, taken)
	assert.LessOrEqual(t, s.mem.memory(), limit)
	before := s.MemoryUsed()
	took, need, err := s.AddWithin(batch, limit)
	require.NoError(t, err)
	assert.Zero(t, took, "granted one entry, the row is not taken")
	assert.Equal(t, before, s.MemoryUsed())
	assert.Equal(t, before+int64(1+maxPending)*entrySize, need, "the row's entry and the spikes'")
	took, _, err = s.AddWithin(batch, need)
	require.NoError(t, err)
	assert.Equal(t, len(batch), took)
	require.Len(t, s.mem.holes, maxPending)
	assert.Equal(t, int64(maxPending)*entrySize, s.MemoryUsed()-before, "the spikes' entries (the row, in its stretch, counts none)")
	assert.LessOrEqual(t, s.MemoryUsed(), need)
}
