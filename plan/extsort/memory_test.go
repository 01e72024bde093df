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

// goHeapObjects is the bytes of live and not-yet-swept objects on the Go heap.
func goHeapObjects() int64 {
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
			runtime.GC()
			heapBefore, mappedBefore := goHeapObjects(), offheap.Mapped()
			s, err := New(m, budget)
			require.NoError(t, err)
			var batch []byte
			value := make([]byte, 100)
			var peakHeap, peakMapped int64
			for i := range tc.records {
				key := sqlLongKey(nil, uint64(i*7919%tc.records), false)
				batch = AppendRecord(batch, key, value)
				if len(batch) > 1<<20 {
					require.NoError(t, s.Add(batch))
					batch = batch[:0]
					checkMemory(t, s, mappedBefore, "adding")
					peakHeap, peakMapped = max(peakHeap, goHeapObjects()), max(peakMapped, offheap.Mapped())
				}
			}
			require.NoError(t, s.Add(batch))
			dst := make([]byte, 1<<20)
			for n := 1; n > 0; {
				n, err = s.Next(dst)
				require.NoError(t, err)
				checkMemory(t, s, mappedBefore, "merging")
				peakHeap, peakMapped = max(peakHeap, goHeapObjects()), max(peakMapped, offheap.Mapped())
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
