package extsort

import (
	"os"
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/plan/offheap"
)

// liveGoHeap is the bytes of live objects on the Go heap: read after a collection, since the
// metric counts dead objects not yet swept too, and how many there are depends on when the
// collector last ran (on a loaded machine, 10 MiB of a run writer's spent buffers).
func liveGoHeap() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// checkMemory asserts the package doc's bound at one moment: the sort's memory is mapped off the
// Go heap, no more than MemoryUsed says beyond one page (the index, counted at its exact size).
func checkMemory(t *testing.T, s *Sorter, mappedBefore int64, at string) {
	t.Helper()
	held := offheap.Mapped() - mappedBefore
	assert.LessOrEqual(t, held, s.MemoryUsed()+int64(os.Getpagesize()), "%s: mapped %d bytes, MemoryUsed %d", at, held, s.MemoryUsed())
}

// The sort's records, index and read buffers live off the Go heap: a sort of 96 MiB in memory
// and then merged from runs moves the Go heap by a few MiB at most, holds in mappings what
// MemoryUsed says, and gives it all back at the end, whether read to the end or not.
func TestLargeMemoryIsOffTheGoHeapAndGivenBack(t *testing.T) {
	const budget = 96 << 20
	for _, tc := range []struct {
		name    string
		records int
		readAll bool
	}{
		{"in memory, read to the end", 700_000, true},
		{"in memory, abandoned by a LIMIT", 700_000, false},
		{"spilled and merged, read to the end", 2_000_000, true},
		{"spilled and merged, abandoned by a LIMIT", 2_000_000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newManager(t, 1<<40, nil)
			heapBefore, mappedBefore := liveGoHeap(), offheap.Mapped()
			s, err := New(m, budget)
			require.NoError(t, err)
			var batch []byte
			value := make([]byte, 100)
			var peakHeap, peakMapped int64
			for i := range tc.records {
				key := sqlLongKey(nil, scrambled(i, tc.records), false)
				batch = AppendRecord(batch, key, value)
				if len(batch) > 1<<20 {
					require.NoError(t, s.Add(batch))
					batch = batch[:0]
					checkMemory(t, s, mappedBefore, "adding")
					peakHeap, peakMapped = max(peakHeap, liveGoHeap()), max(peakMapped, offheap.Mapped())
				}
			}
			require.NoError(t, s.Add(batch))
			dst := make([]byte, 1<<20)
			for n := 1; n > 0; {
				n, err = s.Next(dst)
				require.NoError(t, err)
				checkMemory(t, s, mappedBefore, "merging")
				peakHeap, peakMapped = max(peakHeap, liveGoHeap()), max(peakMapped, offheap.Mapped())
				if !tc.readAll {
					break
				}
			}
			assert.Greater(t, peakMapped-mappedBefore, int64(budget/2), "the records were in mapped memory")
			assert.Less(t, peakHeap-heapBefore, int64(8<<20), "the Go heap held bookkeeping only")
			require.NoError(t, s.Close())
			assert.Equal(t, mappedBefore, offheap.Mapped(), "every mapped byte given back")
		})
	}
}

// A sort that spills at its own budget refills the chunks of the run it wrote, emptied, rather
// than unmapping them and mapping new ones (which the kernel clears page by page): across its
// spills no more memory is mapped than after the first, MemoryUsed still counts every chunk, and
// the chunks not refilled go when the merge starts, and at Spill.
func TestSpillsAtTheBudgetRefillTheSameChunks(t *testing.T) {
	const budget = 32 << 20
	for _, spillAtEnd := range []bool{false, true} {
		m, _ := newManager(t, 1<<40, nil)
		mappedBefore := offheap.Mapped()
		s, err := New(m, budget)
		require.NoError(t, err)
		value := make([]byte, 100)
		var batch []byte
		var mappedAfterFirstRun int64
		const records = 1_000_000
		for i := range records {
			batch = AppendRecord(batch, sqlLongKey(nil, scrambled(i, records), false), value)
			if len(batch) > 1<<20 || i == records-1 {
				require.NoError(t, s.Add(batch))
				batch = batch[:0]
				checkMemory(t, s, mappedBefore, "adding")
				if st := s.Stats(); st.Runs == 1 && mappedAfterFirstRun == 0 {
					mappedAfterFirstRun = offheap.Mapped() - mappedBefore
				} else if st.Runs > 1 {
					assert.LessOrEqual(t, offheap.Mapped()-mappedBefore, mappedAfterFirstRun, "run %d mapped new chunks", st.Runs)
				}
			}
		}
		require.GreaterOrEqual(t, s.Stats().Runs, int64(3))
		assert.Greater(t, mappedAfterFirstRun, int64(budget/2), "the first run's chunks were kept for the next records")
		if spillAtEnd {
			_, err := s.Spill()
			require.NoError(t, err)
			assert.Zero(t, s.MemoryUsed(), "Spark's spill frees every chunk, spares too")
			assert.Equal(t, mappedBefore, offheap.Mapped())
		}
		dst := make([]byte, 1<<20)
		n, err := s.Next(dst)
		require.NoError(t, err)
		require.Positive(t, n)
		assert.Empty(t, s.mem.spare, "the merge frees the chunks not refilled")
		checkMemory(t, s, mappedBefore, "merging")
		require.NoError(t, s.Close())
		assert.Equal(t, mappedBefore, offheap.Mapped(), "every mapped byte given back")
	}
}

// Spark spilling the sort for the sort's own next batch (SpillToRefill) keeps the run's chunks,
// emptied and counted, for the next records: they go in without a new mapping; the first two
// write the older half of the records. Asked again with nothing in memory, it frees the chunks,
// as Spill does: the caller needs that memory.
func TestSpillToRefillKeepsTheArenaForTheNextRecords(t *testing.T) {
	const budget = 512 << 20 // far above what is added: only the caller's spills write runs
	m, _ := newManager(t, 1<<40, nil)
	mappedBefore := offheap.Mapped()
	s, err := New(m, budget)
	require.NoError(t, err)
	value := make([]byte, 100)
	var batch []byte
	key := 0
	addMiB := func(mib int) {
		for range mib {
			batch = batch[:0]
			for len(batch) < 1<<20 {
				batch = AppendRecord(batch, sqlLongKey(nil, scrambled(key, 1_000_003), false), value)
				key++
			}
			require.NoError(t, s.Add(batch))
		}
	}
	addMiB(16)
	arena := s.mem.mapped
	mapped := offheap.Mapped() - mappedBefore
	freed, err := s.SpillToRefill()
	require.NoError(t, err)
	st := s.Stats()
	assert.Equal(t, int64(1), st.Runs)
	// The first spill that keeps the chunks writes the older half of the records (Sorter.spill), of one size here.
	spilled := st.SpilledLogicalBytes / int64(len(AppendRecord(nil, sqlLongKey(nil, 0, false), value)))
	assert.InDelta(t, st.Records/2, spilled, float64(st.Records)/8, "about half the records written")
	assert.Equal(t, arena+(st.Records-spilled)*entrySize+s.mem.spillCost, s.MemoryUsed(), "the arena is kept and counted")
	assert.Equal(t, spilled*entrySize, freed, "only the index of the records written is freed")
	addMiB(6) // the older half's chunks hold about 8 MiB
	assert.LessOrEqual(t, offheap.Mapped()-mappedBefore, mapped, "the next records filled the kept chunks")
	checkMemory(t, s, mappedBefore, "refilling")

	for s.mem.n > 0 { // the older half, then all
		runs := s.Stats().Runs
		_, err = s.SpillToRefill()
		require.NoError(t, err)
		require.Equal(t, runs+1, s.Stats().Runs)
		assert.Equal(t, arena, s.mem.mapped, "no chunk mapped or freed")
	}
	freed, err = s.SpillToRefill() // nothing in memory: the spares go
	require.NoError(t, err)
	assert.Equal(t, arena, freed)
	assert.Zero(t, s.MemoryUsed())
	assert.Equal(t, mappedBefore, offheap.Mapped())
	assert.GreaterOrEqual(t, s.Stats().Runs, int64(3))

	addMiB(1)
	dst := make([]byte, 1<<20)
	total := 0
	for {
		n, err := s.Next(dst)
		require.NoError(t, err)
		if n == 0 {
			break
		}
		for off := 0; off < n; off += recordSize(dst[off:]) {
			total++
		}
	}
	assert.Equal(t, int(s.Stats().Records), total, "every record comes back")
	require.NoError(t, s.Close())
	assert.Equal(t, mappedBefore, offheap.Mapped(), "every mapped byte given back")
}

// scrambled is the i-th of n keys in no order (a permutation with stretches in key order of two
// records or so: the sort stops looking for order within its first few thousand).
func scrambled(i, n int) uint64 { return uint64(i * 435761 % n) }
