package extsort

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
)

const (
	// Runs are framed files (spill.Writer) of small chunks: a run open in a merge holds one
	// stored and one decoded chunk (chunkfile.ReaderMemory), so the chunk size sets how many
	// runs a merge may open in a budget. A run's chunk is the budget over runChunkShare, a power
	// of two from minRunChunk to maxRunChunk: a merge of about runChunkShare/2 runs fits in any
	// budget from 512 KiB to 32 MiB, and more in a larger one; and the merge reserve (1/64 of the
	// budget) holds the readers of a few runs.
	runChunkShare = 512
	minRunChunk   = chunkfile.MinChunkSize // 1 KiB
	maxRunChunk   = 64 << 10               // lz4's window; a reader holds about 128 KiB
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

// runChunkSize is the chunk size of the runs of a sort with budget.
func runChunkSize(budget int64) int {
	c := minRunChunk
	for c < maxRunChunk && int64(2*c) <= budget/runChunkShare {
		c *= 2
	}
	return c
}

// run is one sorted run on disk: its records, in order, in one framed spill file.
type run struct {
	file      *spill.File // nil once released
	readCost  int64       // what a reader of the file holds besides its record buffer
	maxRecord int64       // the run's largest record, encoded: the reader's record buffer grows to it
	logical   int64       // the run's bytes in memory, as written to the Writer
}

// cost is the memory a merge plans for reading r: a synchronous chunk reader and a record
// buffer as large as r's largest record.
func (r *run) cost() int64 { return r.readCost + r.maxRecord }

// size is the run's bytes on disk.
func (r *run) size() int64 {
	if r.file == nil {
		return 0
	}
	return r.file.Size()
}

// spill writes the in-memory records as one sorted run and frees them.
func (s *Sorter) spill() (int64, error) {
	if s.mem.n == 0 {
		return 0, nil
	}
	r, err := s.writeRun(s.mem.sortedIndex())
	if err != nil {
		return 0, err
	}
	freed := s.mem.memory()
	s.runs = append(s.runs, r)
	s.runsCost += r.cost()
	s.mem.reset()
	s.countRun(r, freed)
	return freed, nil
}

// spillTail spills, during the merge, the in-memory records not yet returned. The tail source
// becomes a reader of the new run; its current record, and so the heap order, is unchanged.
func (s *Sorter) spillTail() (int64, error) {
	src := s.tail
	// Reading the run back takes a chunk reader and a record buffer: spilling no more than that
	// would free nothing.
	if src == nil || s.mem.memory() <= s.readCost+s.maxRecord {
		return 0, nil
	}
	before := s.memoryUsed()
	r, err := s.writeRun(src.idx[src.pos-1:]) // from the current record on
	if err != nil {
		return 0, err
	}
	s.runs = append(s.runs, r)
	s.runsCost += r.cost()
	rd, err := s.openRun(r, true)
	if err != nil {
		s.err = err
		return 0, err
	}
	src.run = rd
	src.idx, s.tail = nil, nil
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

func (s *Sorter) countRun(r *run, freed int64) {
	s.stats.Runs++
	s.stats.SpilledBytes += r.size()
	s.stats.SpilledLogicalBytes += r.logical
	s.stats.SpilledMemory += freed
}

// writeRun writes the in-memory records of idx, in order, as a new run. When a disk fills up
// under it, the run is written again from the start in a new file: the full disk has left the
// manager's rotation (spill.RootFull), and the records are still in memory. A run that fails is
// released. Its writer's buffers live only during the call.
func (s *Sorter) writeRun(idx []entry) (*run, error) {
	for {
		w, err := s.newRunWriter()
		if err != nil {
			return nil, fmt.Errorf("extsort: writing a sorted run of %d records: %w", len(idx), err)
		}
		for _, e := range idx {
			rec := s.mem.record(e)
			if err = w.write(rec[:recordSize(rec)]); err != nil {
				break
			}
		}
		if err == nil {
			err = w.finish()
		}
		if err == nil {
			return w.run, nil
		}
		s.releaseRun(w.run)
		if !spill.RootFull(err) {
			return nil, fmt.Errorf("extsort: writing a sorted run of %d records: %w", len(idx), err)
		}
		s.stats.RewrittenRuns++
	}
}

// releaseRun releases r's file if it is still held. A file whose delete fails is kept for Close
// to try again (and the manager's Close deletes it in any case); it does not fail the sort.
func (s *Sorter) releaseRun(r *run) {
	if r.file != nil {
		s.release(r.file)
		r.file = nil
	}
}

func (s *Sorter) release(f *spill.File) {
	if err := f.Release(); err != nil && !errors.Is(err, spill.ErrFileReleased) {
		s.unreleased = append(s.unreleased, f)
	}
}

// runWriter writes one run through a framed spill file, which buffers a chunk.
type runWriter struct {
	run *run
	w   *spill.Writer
}

func (s *Sorter) newRunWriter() (*runWriter, error) {
	w, err := s.m.CreateFramedFileWithChunkSize(s.chunk)
	if err != nil {
		return nil, fmt.Errorf("extsort: creating a run file: %w", err)
	}
	return &runWriter{run: &run{file: w.File(), readCost: s.readCost}, w: w}, nil
}

func (w *runWriter) write(rec []byte) error {
	w.run.maxRecord = max(w.run.maxRecord, int64(len(rec)))
	_, err := w.w.Write(rec)
	return err
}

// finish writes the run's last chunk.
func (w *runWriter) finish() error {
	if err := w.w.Close(); err != nil {
		return err
	}
	w.run.logical = w.w.LogicalSize()
	return nil
}

// memory is what the writer holds: its chunk buffers.
func (w *runWriter) memory() int64 { return int64(w.w.Memory()) }

// runReader reads a run's records through a synchronous chunk reader (no read-ahead: a merge
// may hold thousands of runs open, each counted in the budget) into a record buffer that grows
// to the run's largest record.
type runReader struct {
	s            *Sorter
	run          *run
	rd           *spill.Reader // nil once the run is read to its end
	buf          []byte
	releaseAtEnd bool // release the file once read: the final merge, not an intermediate pass
}

func (s *Sorter) openRun(r *run, releaseAtEnd bool) (*runReader, error) {
	rd, err := r.file.OpenReader(spill.ReaderOptions{Synchronous: true})
	if err != nil {
		return nil, fmt.Errorf("extsort: opening a run: %w", err)
	}
	return &runReader{s: s, run: r, rd: rd, buf: make([]byte, headerSize), releaseAtEnd: releaseAtEnd}, nil
}

// memory is what the reader holds: its chunk buffers and its record buffer.
func (r *runReader) memory() int64 {
	if r.rd == nil {
		return int64(cap(r.buf))
	}
	return int64(r.rd.Memory() + cap(r.buf))
}

// read returns the next record, valid until the following call, or nil at the end of the run.
// Every byte comes from a verified chunk; a run file changed on disk gives an error naming the
// file and the chunk.
func (r *runReader) read() ([]byte, error) {
	if r.rd == nil {
		return nil, nil
	}
	n, err := io.ReadFull(r.rd, r.buf[:headerSize])
	if n == 0 && err == io.EOF {
		r.close()
		return nil, nil
	}
	if err != nil {
		return nil, r.fail(err)
	}
	size := headerSize + int64(binary.LittleEndian.Uint32(r.buf)) + int64(binary.LittleEndian.Uint32(r.buf[4:]))
	if size > r.run.maxRecord {
		// Verified chunks make this a bug rather than a disk fault; never allocate for it.
		return nil, fmt.Errorf("extsort: run file %s holds a record of %d bytes, larger than the largest written to it (%d)", r.run.file.Path(), size, r.run.maxRecord)
	}
	if int64(cap(r.buf)) < size {
		grown := make([]byte, size)
		copy(grown, r.buf[:headerSize])
		r.buf = grown
	}
	rec := r.buf[:size]
	if _, err := io.ReadFull(r.rd, rec[headerSize:]); err != nil {
		return nil, r.fail(err)
	}
	return rec, nil
}

func (r *runReader) fail(err error) error {
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return fmt.Errorf("extsort: run file %s ends inside a record", r.run.file.Path())
	}
	return fmt.Errorf("extsort: reading a run: %w", err)
}

// close drops the chunk reader and, in the final merge, releases the file.
func (r *runReader) close() {
	if r.rd != nil {
		_ = r.rd.Close()
		r.rd = nil
	}
	r.buf = nil
	if r.releaseAtEnd {
		r.s.releaseRun(r.run)
	}
}

// source is one input of a merge: a run, or the sorted in-memory records (the tail).
type source struct {
	ord int    // the input's age among the merge's inputs (the tail is youngest): breaks ties
	rec []byte // the current record; nil once the source is exhausted
	key []byte // the current record's key

	run *runReader // nil while the source is the in-memory tail
	idx []entry    // the tail's sorted index
	pos int        // idx[pos-1] is the tail's current record
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
	if len(s.runs) > 0 {
		if !s.finalFits(s.mem.memory()) {
			if _, err := s.spill(); err != nil {
				return err
			}
		}
		if err := s.mergePasses(); err != nil {
			return err
		}
		s.stats.MergePasses++ // the final one, into the output
	}
	for i, r := range s.runs {
		rd, err := s.openRun(r, true)
		if err != nil {
			return err
		}
		src := &source{ord: i, run: rd}
		s.heap = append(s.heap, src)
		if err := s.advance(src); err != nil {
			return err
		}
	}
	if s.mem.n > 0 {
		s.tail = &source{ord: len(s.runs), idx: s.mem.sortedIndex()}
		s.heap = append(s.heap, s.tail)
		_ = s.advance(s.tail) // the in-memory tail cannot fail
	}
	heapify(s.heap)
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
// on another disk.
func (s *Sorter) mergeGroup(i, g int) error {
	group := s.runs[i : i+g]
	var cost int64
	for _, r := range group {
		cost += r.cost()
	}
	for {
		out, err := s.mergeGroupOnce(group)
		if err == nil {
			for _, r := range group {
				s.releaseRun(r)
			}
			s.runs = slices.Replace(s.runs, i, i+g, out)
			s.runsCost += out.cost() - cost
			s.stats.IntermediateRuns++
			s.stats.IntermediateBytes += out.size()
			return nil
		}
		if !spill.RootFull(err) {
			// Say why there is a pass at all: its disk use comes on top of the runs'.
			return fmt.Errorf("extsort: merging %d runs into one, as %d runs are too many to merge at once in a memory budget of %d bytes: %w", g, len(s.runs), s.budget, err)
		}
		s.stats.RewrittenRuns++
	}
}

// mergeGroupOnce merges group into a new run, or releases what it wrote and fails.
func (s *Sorter) mergeGroupOnce(group []*run) (*run, error) {
	w, err := s.newRunWriter()
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
	for ord, r := range group {
		var rd *runReader
		if rd, err = s.openRun(r, false); err != nil {
			break
		}
		src := &source{ord: ord, run: rd}
		p.heap = append(p.heap, src)
		if err = s.advance(src); err != nil {
			break
		}
	}
	if err == nil {
		heapify(p.heap)
		err = s.mergeInto(p)
	}
	if err != nil {
		s.releaseRun(w.run)
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
		siftDown(p.heap, 0)
		if s.onMergeStep != nil {
			s.onMergeStep()
		}
	}
	return p.w.finish()
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
	if src.pos == len(src.idx) {
		src.rec, src.key, src.idx, s.tail = nil, nil, nil, nil
		s.mem.reset()
		return nil
	}
	rec := s.mem.record(src.idx[src.pos])
	src.pos++
	src.rec, src.key = rec[:recordSize(rec)], keyOf(rec)
	return nil
}

func less(a, b *source) bool {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c < 0
	}
	return a.ord < b.ord
}

func heapify(h []*source) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
}

// pop removes the heap's root, moving the last element there; the caller sifts it down.
func pop(h []*source) []*source {
	last := len(h) - 1
	h[0], h[last] = h[last], nil
	return h[:last]
}

func siftDown(h []*source, i int) {
	for {
		least := i
		if l := 2*i + 1; l < len(h) && less(h[l], h[least]) {
			least = l
		}
		if r := 2*i + 2; r < len(h) && less(h[r], h[least]) {
			least = r
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}
