package plan

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/spillway/spillway/plan/extsort"
	"github.com/spillway/spillway/plan/offheap"
)

// SortMemoryCacheIdleKey is the Spark setting of ConfigureMemoryCache.
const SortMemoryCacheIdleKey = "spark.spillway.sort.memoryCacheIdle"

// ConfigureMemoryCache sets, for the whole process, how long the memory a sort freed stays
// mapped for the next sorts, unused (offheap's cache of freed buffers; idleMillis 0 turns it off).
// A negative value is an *ArgumentError; the setting is then unchanged.
func (r *Registry) ConfigureMemoryCache(idleMillis int64) error {
	if idleMillis < 0 {
		return &ArgumentError{Reason: fmt.Sprintf("%s is %d ms; give 0 (no cache) or a time such as 60s", SortMemoryCacheIdleKey, idleMillis)}
	}
	// A Duration holds about 292 years: a longer time is that long.
	return offheap.SetCacheIdle(time.Duration(min(idleMillis, int64(math.MaxInt64/time.Millisecond))) * time.Millisecond)
}

type sortEntry struct {
	plan   *Plan
	sorter *extsort.Sorter
}

// CreateSort starts an external sort owned by the plan: it holds up to memoryBudget bytes of
// records in memory and spills sorted runs through the plan's spill manager, under its limit.
// Releasing the plan closes the sort.
func (r *Registry) CreateSort(h uint64, memoryBudget int64) (uint64, error) {
	p, err := r.lockLive(h)
	if err != nil {
		return 0, err
	}
	defer p.mu.Unlock()
	s, err := extsort.New(&p.spill, memoryBudget)
	if err != nil {
		return 0, err
	}
	sh := r.sorts.add(&sortEntry{plan: p, sorter: s})
	p.own().sorts[sh] = struct{}{}
	return sh, nil
}

func (r *Registry) sorter(sh uint64) (*extsort.Sorter, error) {
	e, ok := r.sorts.get(sh)
	if !ok {
		return nil, &HandleError{What: "sort", Handle: sh}
	}
	return e.sorter, nil
}

// SortAdd copies records of batch into the sort, within limit, the memory the caller was granted
// for it, and returns the bytes of batch taken, whole records, and the sort's state after the add,
// its MemoryNeeded set when it stopped short; see extsort.Sorter.AddWithin. A negative limit is an
// *ArgumentError.
func (r *Registry) SortAdd(sh uint64, batch []byte, limit int64) (taken int, st SortStats, err error) {
	if limit < 0 {
		return 0, SortStats{}, &ArgumentError{Reason: fmt.Sprintf("the memory limit %d must not be negative", limit)}
	}
	s, err := r.sorter(sh)
	if err != nil {
		return 0, SortStats{}, err
	}
	taken, need, err := s.AddWithin(batch, limit)
	return taken, SortStats{Stats: s.Stats(), MemoryUsed: s.MemoryUsed(), MemoryNeeded: need}, err
}

// SortSpill writes the records the sort holds in memory as a sorted run and returns the bytes of
// memory freed; see extsort.Sorter.Spill. With refill, the sort keeps its arena for the records
// that come next; see extsort.Sorter.SpillToRefill.
func (r *Registry) SortSpill(sh uint64, refill bool) (int64, error) {
	s, err := r.sorter(sh)
	if err != nil {
		return 0, err
	}
	if refill {
		return s.SpillToRefill()
	}
	return s.Spill()
}

// SortMemoryUsed is the bytes of memory the sort holds now.
func (r *Registry) SortMemoryUsed(sh uint64) (int64, error) {
	s, err := r.sorter(sh)
	if err != nil {
		return 0, err
	}
	return s.MemoryUsed(), nil
}

// SortNext fills dst with whole records in sorted order and returns the bytes filled, 0 at the
// end; see extsort.Sorter.Next. If the next record alone does not fit in dst, it returns need,
// the size of a buffer that holds it, and consumes nothing.
func (r *Registry) SortNext(sh uint64, dst []byte) (n, need int, err error) {
	s, err := r.sorter(sh)
	if err != nil {
		return 0, 0, err
	}
	n, err = s.Next(dst)
	if tooLarge := (*extsort.RecordTooLargeError)(nil); errors.As(err, &tooLarge) {
		return 0, tooLarge.Need, nil
	}
	return n, 0, err
}

// SortStats is what a sort has done, and the memory it holds now.
type SortStats struct {
	extsort.Stats
	MemoryUsed int64
	// MemoryNeeded, after a SortAdd that stopped short of its batch at its limit, is the memory
	// the sort needs granted to take the rest of the batch (see extsort.Sorter.AddWithin);
	// otherwise 0.
	MemoryNeeded int64
}

// SortStatsLayout is the order of NativeSpill.sortStats' array, by name (the JVM finds a value by
// its name: NativeSpill.sortStatsNames). Append only: clients that predate a value read the array
// by position.
var SortStatsLayout = []struct {
	Name  string
	Value func(*SortStats) int64
}{
	{"records", func(s *SortStats) int64 { return s.Records }},
	{"runs", func(s *SortStats) int64 { return s.Runs }},
	{"spilledBytes", func(s *SortStats) int64 { return s.SpilledBytes }},
	{"spilledMemory", func(s *SortStats) int64 { return s.SpilledMemory }},
	{"memoryUsed", func(s *SortStats) int64 { return s.MemoryUsed }},
	{"spilledLogicalBytes", func(s *SortStats) int64 { return s.SpilledLogicalBytes }},
	{"mergePasses", func(s *SortStats) int64 { return s.MergePasses }},
	{"memoryNeeded", func(s *SortStats) int64 { return s.MemoryNeeded }},
	{"remoteRuns", func(s *SortStats) int64 { return s.RemoteRuns }},
	{"remoteBytes", func(s *SortStats) int64 { return s.RemoteBytes }},
}

// SortStats returns the sort's counters.
func (r *Registry) SortStats(sh uint64) (SortStats, error) {
	s, err := r.sorter(sh)
	if err != nil {
		return SortStats{}, err
	}
	return SortStats{Stats: s.Stats(), MemoryUsed: s.MemoryUsed()}, nil
}

// ReleaseSort closes a sort: its run files are deleted and its memory dropped.
func (r *Registry) ReleaseSort(sh uint64) error {
	e, ok := r.sorts.take(sh)
	if !ok {
		return &HandleError{What: "sort", Handle: sh}
	}
	e.plan.disown(func(o *owned) map[uint64]struct{} { return o.sorts }, sh)
	return e.sorter.Close()
}
