package extsort

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spillway/spillway/spill"
)

const (
	// writeBufSize batches run writes: every spill.File.Write is a syscall.
	writeBufSize = 256 << 10
	// A run's read-ahead buffer: as large as maxReadBuf when the budget allows, never smaller
	// than minReadBuf so that a merge of many runs does not crawl through tiny reads. A merge
	// opens only as many runs as their buffers fit in the budget, and merges in more passes
	// when there are more runs than that.
	minReadBuf = 4 << 10
	maxReadBuf = 64 << 10
	// reserveShare bounds the memory Add keeps free for the final merge's read buffers: at most
	// 1/reserveShare of the budget, so that the runs stay nearly a budget's worth each.
	reserveShare = 64
)

// run is one sorted run on disk: its records, in order, across one or more segment files. A run
// has more than one segment only when a disk filled up while it was written: the records
// written so far stay in the full disk's file, and the rest go to a new file on another disk.
// Every segment ends at a record boundary.
type run struct {
	files     []*spill.File // segments in order; a slot is nil once that file is released
	maxRecord int64         // the run's largest record, encoded: its read buffer may grow to it
}

// cost is the memory a merge plans for reading r: a minimal read buffer, or r's largest record
// if that is larger.
func (r *run) cost() int64 { return max(minReadBuf, r.maxRecord) }

func (r *run) size() int64 {
	var n int64
	for _, f := range r.files {
		if f != nil {
			n += f.Size()
		}
	}
	return n
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
	// Reading the run back takes a maxReadBuf buffer, grown to the largest record if need be:
	// spilling less than that would free nothing.
	if src == nil || s.mem.memory() <= max(maxReadBuf, s.maxRecord) {
		return 0, nil
	}
	before := s.memoryUsed()
	r, err := s.writeRun(src.idx[src.pos-1:]) // from the current record on
	if err != nil {
		return 0, err
	}
	s.runs = append(s.runs, r)
	s.runsCost += r.cost()
	src.run = s.openRun(r, maxReadBuf)
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
	s.stats.SpilledMemory += freed
}

// writeRun writes the in-memory records of idx, in order, as a new run. A run that fails is
// released. Its write buffer (at most writeBufSize) lives only during the call.
func (s *Sorter) writeRun(idx []entry) (*run, error) {
	w, err := s.newRunWriter(int(min(writeBufSize, s.mem.arena)))
	if err != nil {
		return nil, err
	}
	for _, e := range idx {
		rec := s.mem.record(e)
		if err = w.write(rec[:recordSize(rec)]); err != nil {
			break
		}
	}
	if err == nil {
		err = w.flush()
	}
	if err != nil {
		s.releaseRun(w.run)
		return nil, fmt.Errorf("extsort: writing a sorted run of %d records: %w", len(idx), err)
	}
	return w.run, nil
}

// releaseRun releases every segment of r still held. A file whose delete fails is kept for Close
// to try again (and the manager's Close deletes it in any case); it does not fail the sort.
func (s *Sorter) releaseRun(r *run) {
	for i, f := range r.files {
		if f != nil {
			s.release(f)
			r.files[i] = nil
		}
	}
}

func (s *Sorter) release(f *spill.File) {
	if err := f.Release(); err != nil && !errors.Is(err, spill.ErrFileReleased) {
		s.unreleased = append(s.unreleased, f)
	}
}

// runWriter writes one run through a buffer. When a write finds its disk full (spill.RootFull),
// that disk has left the manager's rotation and the write was undone whole: the writer goes on
// in a new segment file on another disk, so neither the records in memory nor a merge's
// already consumed inputs are needed again.
type runWriter struct {
	s   *Sorter
	run *run
	buf []byte
}

func (s *Sorter) newRunWriter(bufSize int) (*runWriter, error) {
	f, err := s.m.CreateFile()
	if err != nil {
		return nil, fmt.Errorf("extsort: creating a run file: %w", err)
	}
	return &runWriter{s: s, run: &run{files: []*spill.File{f}}, buf: make([]byte, 0, bufSize)}, nil
}

func (w *runWriter) write(rec []byte) error {
	w.run.maxRecord = max(w.run.maxRecord, int64(len(rec)))
	if len(w.buf)+len(rec) > cap(w.buf) {
		if err := w.flush(); err != nil {
			return err
		}
		if len(rec) >= cap(w.buf) {
			return w.put(rec) // no point copying a record as large as the buffer
		}
	}
	w.buf = append(w.buf, rec...)
	return nil
}

func (w *runWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.put(w.buf)
	w.buf = w.buf[:0]
	return err
}

// put appends p, whole records, to the run's last segment, or to a new one if that disk is full.
func (w *runWriter) put(p []byte) error {
	for {
		last := len(w.run.files) - 1
		f := w.run.files[last]
		before := f.Size()
		_, err := f.Write(p)
		// A failed write left the file as it was, unless its tail could not be truncated (the
		// size then counts the failed bytes): such a file is not a segment to keep.
		if err == nil || !spill.RootFull(err) || f.Size() != before {
			return err
		}
		next, cerr := w.s.m.CreateFile()
		if cerr != nil {
			return fmt.Errorf("extsort: creating a run file on another disk after %v: %w", err, cerr)
		}
		if before == 0 {
			w.s.release(f)
			w.run.files[last] = next
		} else {
			w.run.files = append(w.run.files, next)
		}
	}
}

// runReader reads a run's records through a read-ahead buffer, releasing each segment file as
// soon as it has been read.
type runReader struct {
	s        *Sorter
	run      *run
	seg      int   // run.files[seg] is the segment being read
	size     int64 // that segment's length
	next     int64 // its offset of the next byte to read into buf
	buf      []byte
	pos, end int // buf[pos:end] is read from the file but not yet returned
}

func (s *Sorter) openRun(r *run, bufSize int) *runReader {
	rd := &runReader{s: s, run: r, buf: make([]byte, bufSize)}
	if len(r.files) > 0 {
		rd.size = r.files[0].Size()
	}
	return rd
}

// read returns the next record, valid until the following call, or nil at the end of the run.
func (r *runReader) read() ([]byte, error) {
	for r.end-r.pos < headerSize {
		if r.pos == r.end && r.next == r.size {
			if !r.nextSegment() {
				return nil, nil
			}
			continue
		}
		if err := r.fill(headerSize); err != nil {
			return nil, err
		}
	}
	// Sizes from a run can exceed 32-bit ints only if the file is corrupt; fill checks them.
	n := headerSize + int64(binary.LittleEndian.Uint32(r.buf[r.pos:])) + int64(binary.LittleEndian.Uint32(r.buf[r.pos+4:]))
	if int64(r.end-r.pos) < n {
		if err := r.fill(n); err != nil {
			return nil, err
		}
	}
	rec := r.buf[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return rec, nil
}

// nextSegment releases the segment just read and moves to the next one; at the end of the run
// it frees the buffer and returns false.
func (r *runReader) nextSegment() bool {
	if r.seg < len(r.run.files) {
		if f := r.run.files[r.seg]; f != nil {
			r.s.release(f)
			r.run.files[r.seg] = nil
		}
		r.seg++
	}
	if r.seg >= len(r.run.files) {
		r.buf = nil
		return false
	}
	r.size, r.next = r.run.files[r.seg].Size(), 0
	return true
}

// fill makes buf[pos:end] hold at least need bytes, reading as far ahead as the buffer allows.
// A record larger than the buffer grows it.
func (r *runReader) fill(need int64) error {
	f := r.run.files[r.seg]
	have := r.end - r.pos
	if need-int64(have) > r.size-r.next {
		return fmt.Errorf("extsort: run file %s is corrupt: a record at offset %d runs past its end", f.Path(), r.next-int64(have))
	}
	if need > int64(len(r.buf)) {
		grown := make([]byte, need)
		copy(grown, r.buf[r.pos:r.end])
		r.buf = grown
	} else {
		copy(r.buf, r.buf[r.pos:r.end])
	}
	r.pos, r.end = 0, have
	want := int(min(int64(len(r.buf)-have), r.size-r.next))
	n, err := f.ReadAt(r.buf[have:have+want], r.next)
	if n < want {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("extsort: reading run file %s: %w", f.Path(), err)
	}
	r.end += n
	r.next += int64(n)
	return nil
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
// records in memory: when their costs fit in the budget left, or, with no records in memory,
// when there are two runs or fewer (a merge never opens fewer).
func (s *Sorter) finalFits(tailMem int64) bool {
	return s.runsCost <= s.budget-tailMem || tailMem == 0 && len(s.runs) <= 2
}

// readBufSize is the read buffer to give each of runs sharing avail bytes: the largest, up to
// maxReadBuf, such that the runs' buffers, each grown to its run's largest record if that is
// larger, fit in avail together; minReadBuf when even that does not fit.
func readBufSize(runs []*run, avail int64) int {
	fits := func(buf int64) bool {
		var sum int64
		for _, r := range runs {
			sum += max(buf, r.maxRecord)
		}
		return sum <= avail
	}
	lo, hi := int64(minReadBuf), int64(maxReadBuf)
	if !fits(lo) {
		return minReadBuf
	}
	for lo < hi {
		if mid := (lo + hi + 1) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return int(lo)
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
	bufSize := readBufSize(s.runs, s.budget-s.mem.memory())
	for i, r := range s.runs {
		src := &source{ord: i, run: s.openRun(r, bufSize)}
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

// groupSize is how many runs from s.runs[i] on to merge into one: as many as fit in the budget
// with a minimal write buffer, at least two, and no more than the final merge needs merged.
func (s *Sorter) groupSize(i int) int {
	excess := s.runsCost - s.budget // what merging must save: a group's cost becomes its largest
	var sum, largest int64
	g := 0
	for _, r := range s.runs[i:] {
		c := r.cost()
		if g >= 2 && (sum+c+minReadBuf > s.budget || sum-largest >= excess) {
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

// mergeGroup merges s.runs[i:i+g] into one new run that replaces them. Each input's files are
// released as soon as they have been read.
func (s *Sorter) mergeGroup(i, g int) error {
	group := s.runs[i : i+g]
	var cost int64
	for _, r := range group {
		cost += r.cost()
	}
	// Buffers within the budget: the write buffer as large as a fair share allows, the read
	// buffers sharing the rest; when the inputs' costs leave too little for that, the write
	// buffer is the minimum (groupSize counted on it).
	write := max(minReadBuf, min(writeBufSize, s.budget/int64(g+1)))
	if cost+write > s.budget {
		write = minReadBuf
	}
	w, err := s.newRunWriter(int(write))
	if err != nil {
		return err
	}
	p := &pass{w: w}
	s.pass = p
	defer func() { s.pass = nil }()
	bufSize := readBufSize(group, s.budget-write)
	for ord, r := range group {
		src := &source{ord: ord, run: s.openRun(r, bufSize)}
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
		// Say why there is a pass at all: its disk use comes on top of the runs'.
		return fmt.Errorf("extsort: merging %d runs into one, as %d runs are too many to merge at once in a memory budget of %d bytes: %w", g, len(s.runs), s.budget, err)
	}
	s.runs = slices.Replace(s.runs, i, i+g, w.run)
	s.runsCost += w.run.cost() - cost
	s.stats.IntermediateRuns++
	s.stats.IntermediateBytes += w.run.size()
	return nil
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
	return p.w.flush()
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
