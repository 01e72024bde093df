package extsort

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/spillway/spillway/spill"
)

// The merge of the runs and the in-memory tail: whether the final merge fits in the budget, the
// intermediate passes that merge runs into fewer until it does, and the sources each merge reads.

const (
	// reserveShare bounds the memory Add keeps free for the final merge's read buffers: at most
	// 1/reserveShare of the budget, so that the runs stay nearly a budget's worth each.
	reserveShare = 64
	// maxMergeReaders bounds what the runs' readers of one merge may hold, whatever the budget:
	// about 500 runs of 128 KiB. A budget that follows a large grant of Spark (gigabytes) would
	// otherwise let one merge open thousands of runs at once, holding read buffers and file
	// descriptors no one granted; past it, intermediate passes merge the runs into fewer.
	maxMergeReaders = 64 << 20
)

// mergeBudget is what the readers (and an intermediate pass's writer) of one merge may hold:
// the budget, up to maxMergeReaders.
func (s *Sorter) mergeBudget() int64 { return min(s.budget, maxMergeReaders) }

// spillTail spills, during the merge, the in-memory records not yet returned. The tail source
// becomes a reader of the new run; its current record, and so the heap order, is unchanged.
func (s *Sorter) spillTail() (int64, error) {
	src := s.tail
	// Reading the run back takes a chunk reader and a record buffer: spilling no more than that
	// would free nothing.
	if src == nil || s.mem.memory()-s.mem.spillReserve() <= s.readCost+s.maxRecord {
		return 0, nil
	}
	before := s.memoryUsed()
	r, err := s.writeRun(&s.mem, src.rec, src.cur) // from the current record on
	if err != nil {
		return 0, err
	}
	s.runs = append(s.runs, r)
	s.runsCost += r.cost()
	rd, err := s.openRun(r, true, remoteRunSpan(s.chunk)) // in the memory the tail gave up
	if err != nil {
		s.err = err
		return 0, err
	}
	src.run = rd
	src.rec, src.key, src.cur, s.tail = nil, nil, nil, nil // nothing may point into the memory reset frees
	s.mem.reset()
	if err := s.advance(src); err != nil {
		s.err = err
		return 0, err
	}
	if s.stats.MergePasses == 0 {
		s.stats.MergePasses = 1 // the output is now merged from a run
	}
	freed := before - s.memoryUsed()
	s.countRun(r, freed)
	return freed, nil
}

// source is one input of a merge: a run, or the sorted in-memory records (the tail).
type source struct {
	ord int    // the input's age among the merge's inputs (the tail is youngest): breaks ties
	rec []byte // the current record; nil once the source is exhausted
	key []byte // the current record's key

	run *runReader // nil while the source is the in-memory tail
	cur *cursor    // the tail's records after its current one
}

// sourceLess orders the merge heap's sources by their current keys, then by age (ord), so that
// equal keys come out in the order they were added.
func sourceLess(a, b *source) bool {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c < 0
	}
	return a.ord < b.ord
}

// mergeReserve is the memory Add keeps free for the final merge's read buffers, so that the
// records still in memory at the end can stay there for it: the cost of every run, up to
// 1/reserveShare of the budget. Past that the final merge may have to spill them first.
func (s *Sorter) mergeReserve() int64 { return min(s.runsCost, s.budget/reserveShare) }

// finalFits reports whether the final merge may open every run next to tailMem bytes of
// records in memory: when their costs fit in the budget left and in the merge budget, or, with
// no records in memory,
// when there are two runs or fewer (a merge never opens fewer).
func (s *Sorter) finalFits(tailMem int64) bool {
	return s.runsCost <= min(s.budget-tailMem, s.mergeBudget()) || tailMem == 0 && len(s.runs) <= 2
}

// startMerge ends the input. When the runs' read buffers do not fit in the memory the in-memory
// records leave, those records are spilled too; when the runs are still too many for the final
// merge, intermediate passes merge them into fewer. Then it opens every run, and the in-memory
// records if they stayed, for the final merge.
func (s *Sorter) startMerge() error {
	s.merging = true
	s.mem.freeSpare(0) // what the records did not refill is the merge's now
	if len(s.runs) > 0 {
		if !s.finalFits(s.mem.memory()) {
			if _, err := s.spill(false); err != nil {
				return err
			}
		}
		if err := s.mergePasses(); err != nil {
			return err
		}
		s.stats.MergePasses++ // the final one, into the output
	}
	readers, err := s.openRuns(s.runs, true, min(s.budget-s.mem.memory(), s.mergeBudget())-s.runsCost)
	if err != nil {
		return err
	}
	for i, rd := range readers {
		s.heap = append(s.heap, &source{ord: i, run: rd}) // each closed by Close, read or not
	}
	for _, src := range s.heap {
		if err := s.advance(src); err != nil {
			return err
		}
	}
	if s.mem.n > 0 {
		c, err := s.mem.cursor()
		if err != nil {
			return fmt.Errorf("extsort: sorting %d records in memory: %w", s.mem.n, err)
		}
		s.tail = &source{ord: len(s.runs), cur: c}
		s.heap = append(s.heap, s.tail)
		_ = s.advance(s.tail) // the in-memory tail cannot fail
	}
	heapify(s.heap, sourceLess)
	return nil
}

// mergePasses merges runs until the final merge can open them all. Each pass goes through the
// runs from the oldest, merging contiguous groups, each into a new run that takes the group's
// place in age order, until the final merge fits. Merging only neighbours in age keeps the sort
// stable: within a group, equal keys come out oldest run first, and every run outside it is
// older or younger than the whole group.
func (s *Sorter) mergePasses() error {
	for !s.finalFits(0) {
		s.stats.MergePasses++
		for i := 0; i < len(s.runs)-1 && !s.finalFits(0); i++ {
			if err := s.mergeGroup(i, s.groupSize(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// groupSize is how many runs from s.runs[i] on to merge into one: as many as fit in the merge
// budget beside the new run's writer, at least two, and no more than the final merge needs merged.
func (s *Sorter) groupSize(i int) int {
	budget := s.mergeBudget()
	excess := s.runsCost - budget // what merging must save: a group's cost becomes its largest
	var sum, largest int64
	g := 0
	for _, r := range s.runs[i:] {
		c := r.cost()
		if g >= 2 && (sum+c+s.writeCost > budget || sum-largest >= excess) {
			break
		}
		sum, largest, g = sum+c, max(largest, c), g+1
	}
	return g
}

// pass is the intermediate merge in progress: what it holds in memory.
type pass struct {
	heap []*source
	w    *runWriter
}

// mergeGroup merges s.runs[i:i+g] into one new run that replaces them. The inputs are released
// once the new run is whole, not as they are read: when a disk fills up under the new run (it
// has then left the manager's rotation), the group is merged again from the start into a file
// on another disk, at most as many times as there are local dirs
// (as writeRun).
func (s *Sorter) mergeGroup(i, g int) error {
	group := s.runs[i : i+g]
	var cost int64
	for _, r := range group {
		cost += r.cost()
	}
	for rewrites := 0; ; rewrites++ {
		out, err := s.mergeGroupOnce(group, s.mergeBudget()-cost-s.writeCost)
		if err == nil {
			for _, r := range group {
				s.releaseRun(r)
			}
			s.runs = slices.Replace(s.runs, i, i+g, out)
			s.runsCost += out.cost() - cost
			s.stats.IntermediateRuns++
			s.stats.IntermediateBytes += out.size()
			s.countRemote(out)
			return nil
		}
		if !spill.RootFull(err) || rewrites == s.m.Roots().Len() {
			// Say why there is a pass at all: its disk use comes on top of the runs'.
			return fmt.Errorf("extsort: merging %d runs into one, as %d runs are too many to merge at once in a memory budget of %d bytes: %w", g, len(s.runs), s.budget, err)
		}
		s.stats.RewrittenRuns++
	}
}

// openersAtOnce bounds the remote runs openRuns opens at once.
const openersAtOnce = 16

// countFunc is how many of xs f holds for.
func countFunc[T any](xs []T, f func(T) bool) int {
	n := 0
	for _, x := range xs {
		if f(x) {
			n++
		}
	}
	return n
}

// openRuns opens a reader of each run, or none and fails, the remote runs' spans grown by the
// spare bytes of the merge's budget beside the runs' costs (remoteSpanIn). The remote runs are
// opened openersAtOnce at a time: opening one waits for its first GET (its header and first
// span, spill.ReaderOptions.RemoteSpan), so a merge of many remote runs starts after a few of the
// store's latencies rather than one a run. The local ones are opened in order.
func (s *Sorter) openRuns(runs []*run, releaseAtEnd bool, spare int64) ([]*runReader, error) {
	span := remoteSpanIn(s.chunk, spare, countFunc(runs, func(r *run) bool { return r.file.Remote() }))
	readers := make([]*runReader, len(runs))
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	slots := make(chan struct{}, openersAtOnce)
	for i, r := range runs {
		if r.file.Remote() {
			wg.Add(1)
			slots <- struct{}{}
			go func() {
				defer func() { <-slots; wg.Done() }()
				readers[i], errs[i] = s.openRun(r, releaseAtEnd, span)
			}()
		} else if readers[i], errs[i] = s.openRun(r, releaseAtEnd, span); errs[i] != nil {
			break
		}
	}
	wg.Wait()
	if i := slices.IndexFunc(errs, func(err error) bool { return err != nil }); i >= 0 {
		for _, rd := range readers {
			if rd != nil {
				rd.releaseAtEnd = false // the runs stay the sort's: only the readers go
				rd.close()
			}
		}
		return nil, errs[i]
	}
	return readers, nil
}

// mergeGroupOnce merges group into a new run, or releases what it wrote and fails; spare is what
// the merge budget leaves beside the group's costs and the writer's.
func (s *Sorter) mergeGroupOnce(group []*run, spare int64) (*run, error) {
	w, err := s.newRunWriter(0) // its WriterMemory is planned for unshuffled
	if err != nil {
		return nil, err
	}
	p := &pass{w: w}
	s.pass = p
	defer func() {
		for _, src := range p.heap {
			if src.run != nil {
				src.run.close()
			}
		}
		s.pass = nil
	}()
	readers, err := s.openRuns(group, false, spare)
	for ord, rd := range readers {
		p.heap = append(p.heap, &source{ord: ord, run: rd}) // each closed by the defer, read or not
	}
	for _, src := range p.heap {
		if err = s.advance(src); err != nil {
			break
		}
	}
	if err == nil {
		heapify(p.heap, sourceLess)
		err = s.mergeInto(p)
	}
	if err != nil {
		s.abandonRun(w)
		return nil, err
	}
	return w.run, nil
}

func (s *Sorter) mergeInto(p *pass) error {
	for len(p.heap) > 0 {
		top := p.heap[0]
		if err := p.w.write(top.rec); err != nil {
			return err
		}
		if err := s.advance(top); err != nil {
			return err
		}
		if top.rec == nil {
			p.heap = pop(p.heap)
		}
		siftDown(p.heap, 0, sourceLess)
		if s.onMergeStep != nil {
			s.onMergeStep()
		}
	}
	return p.w.finish()
}

// nextFromMemory is Next when the in-memory records are the merge's only input (no run was
// spilled, or the last run is done): they are copied out in key order, with no heap to keep;
// when they all have one size, with no header read to size each, and when merged from their
// stretches, a block at a time. The state it leaves is advance's: the tail's current record is
// the first that did not fit, or the tail is gone when none is left.
func (s *Sorter) nextFromMemory(dst []byte) (int, error) {
	src := s.tail
	if len(src.rec) > len(dst) {
		return 0, &RecordTooLargeError{Need: len(src.rec)}
	}
	n := copy(dst, src.rec)
	c := src.cur
	if c.idx == nil {
		for sp := c.span(len(dst) - n); sp != nil; sp = c.span(len(dst) - n) {
			n += copy(dst[n:], sp)
		}
		if !c.done() { // the next record does not fit
			rec := c.next()
			src.rec, src.key = rec, keyOf(rec)
			return n, nil
		}
	} else {
		size := s.mem.recordSize()
		for pos := c.i; pos < len(c.idx); pos++ {
			if ahead := pos + prefetchAhead; ahead < len(c.idx) {
				s.mem.prefetch(c.idx[ahead])
			}
			rec := s.mem.record(c.idx[pos])
			l := size
			if l == 0 {
				l = recordSize(rec)
			}
			if l > len(dst)-n {
				c.i = pos + 1
				src.rec, src.key = rec[:l], keyOf(rec)
				return n, nil
			}
			n += copy(dst[n:], rec[:l])
		}
	}
	src.rec, src.key, src.cur, s.tail = nil, nil, nil, nil
	s.mem.reset()
	s.heap = pop(s.heap)
	return n, nil
}

// advance moves src to its next record. An exhausted run's files are released by its reader,
// and an exhausted tail's memory freed. Only a run's read can fail.
func (s *Sorter) advance(src *source) error {
	if src.run != nil {
		rec, err := src.run.read()
		if err != nil {
			return err
		}
		src.rec = rec
		if rec == nil {
			src.key = nil
			return nil
		}
		src.key = keyOf(rec)
		return nil
	}
	rec := src.cur.next()
	if rec == nil {
		src.rec, src.key, src.cur, s.tail = nil, nil, nil, nil
		s.mem.reset()
		return nil
	}
	src.rec, src.key = rec, keyOf(rec)
	return nil
}
