package plan

import (
	"github.com/spillway/spillway/plan/extsort"
)

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

// Sort returns a live sort by handle.
func (r *Registry) Sort(sh uint64) (*extsort.Sorter, error) {
	e, ok := r.sorts.get(sh)
	if !ok {
		return nil, &HandleError{What: "sort", Handle: sh}
	}
	return e.sorter, nil
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
