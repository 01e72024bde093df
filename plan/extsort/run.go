package extsort

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/spillway/spillway/spill"
)

const (
	// writeBufSize batches run writes: every spill.File.Write is a syscall.
	writeBufSize = 256 << 10
	// A run's read-ahead buffer: as large as maxReadBuf when the budget allows, never smaller
	// than minReadBuf so that a merge of many runs does not crawl through tiny reads.
	minReadBuf = 4 << 10
	maxReadBuf = 64 << 10
)

// spill writes the in-memory records as one sorted run and frees them.
func (s *Sorter) spill() (int64, error) {
	if s.mem.n == 0 {
		return 0, nil
	}
	f, err := s.writeRun(s.mem.sortedIndex())
	if err != nil {
		return 0, err
	}
	freed := s.mem.memory()
	s.runs = append(s.runs, f)
	s.mem.reset()
	s.countRun(f, freed)
	return freed, nil
}

// spillTail spills, during the merge, the in-memory records not yet returned. The tail source
// becomes a reader of the new run; its current record, and so the heap order, is unchanged.
func (s *Sorter) spillTail() (int64, error) {
	src := s.tail
	if src == nil || s.mem.memory() <= maxReadBuf {
		return 0, nil // reading the run back would take as much memory as it frees
	}
	before := s.memoryUsed()
	f, err := s.writeRun(src.idx[src.pos-1:]) // from the current record on
	if err != nil {
		return 0, err
	}
	s.runs = append(s.runs, f)
	src.run = &runReader{f: f, slot: len(s.runs) - 1, size: f.Size(), buf: make([]byte, maxReadBuf)}
	src.idx, s.tail = nil, nil
	s.mem.reset()
	if err := s.advance(src); err != nil {
		s.err = err
		return 0, err
	}
	freed := before - s.memoryUsed()
	s.countRun(f, freed)
	return freed, nil
}

func (s *Sorter) countRun(f *spill.File, freed int64) {
	s.stats.Runs++
	s.stats.SpilledBytes += f.Size()
	s.stats.SpilledMemory += freed
}

// writeRun writes the records of idx, in order, to a new run file. A file that fails is released.
// A write that finds its local dir full (spill.RootFull) has taken that dir out of the manager's
// rotation, and the records are still in memory: the run is written again into a new file, on
// another dir, until one takes it or CreateFile reports that no dir is left.
func (s *Sorter) writeRun(idx []entry) (*spill.File, error) {
	for {
		f, err := s.m.CreateFile()
		if err != nil {
			return nil, fmt.Errorf("extsort: creating a run file: %w", err)
		}
		err = s.writeRunTo(f, idx)
		if err == nil {
			return f, nil
		}
		if rerr := f.Release(); rerr != nil {
			err = errors.Join(err, rerr) // the manager deletes the file at its Close
		}
		if !spill.RootFull(err) {
			return nil, fmt.Errorf("extsort: writing a sorted run of %d records: %w", len(idx), err)
		}
	}
}

func (s *Sorter) writeRunTo(f *spill.File, idx []entry) error {
	w := runWriter{f: f, buf: make([]byte, 0, min(writeBufSize, s.mem.arena))}
	for _, e := range idx {
		rec := s.mem.record(e)
		if err := w.write(rec[:recordSize(rec)]); err != nil {
			return err
		}
	}
	return w.flush()
}

type runWriter struct {
	f   *spill.File
	buf []byte
}

func (w *runWriter) write(rec []byte) error {
	if len(w.buf)+len(rec) > cap(w.buf) {
		if err := w.flush(); err != nil {
			return err
		}
		if len(rec) >= cap(w.buf) {
			_, err := w.f.Write(rec) // no point copying a record as large as the buffer
			return err
		}
	}
	w.buf = append(w.buf, rec...)
	return nil
}

func (w *runWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.f.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}

// runReader reads a run's records through a read-ahead buffer.
type runReader struct {
	f        *spill.File
	slot     int   // the file's index in Sorter.runs
	size     int64 // the run's length
	next     int64 // file offset of the next byte to read into buf
	buf      []byte
	pos, end int // buf[pos:end] is read from the file but not yet returned
}

// read returns the next record, valid until the following call, or nil at the end of the run.
func (r *runReader) read() ([]byte, error) {
	if r.end-r.pos < headerSize {
		if r.pos == r.end && r.next == r.size {
			return nil, nil
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

// fill makes buf[pos:end] hold at least need bytes, reading as far ahead as the buffer allows.
// A record larger than the buffer grows it.
func (r *runReader) fill(need int64) error {
	have := r.end - r.pos
	if need-int64(have) > r.size-r.next {
		return fmt.Errorf("extsort: run file %s is corrupt: a record at offset %d runs past its end", r.f.Path(), r.next-int64(have))
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
	n, err := r.f.ReadAt(r.buf[have:have+want], r.next)
	if n < want {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("extsort: reading run file %s: %w", r.f.Path(), err)
	}
	r.end += n
	r.next += int64(n)
	return nil
}

// source is one input of the merge: a run, or the sorted in-memory records (the tail).
type source struct {
	ord int    // runs by age, the tail after them: breaks ties between equal keys
	rec []byte // the current record; nil once the source is exhausted
	key []byte // the current record's key

	run *runReader // nil while the source is the in-memory tail
	idx []entry    // the tail's sorted index
	pos int        // idx[pos-1] is the tail's current record
}

// startMerge ends the input: it sorts the in-memory records and opens every run.
func (s *Sorter) startMerge() error {
	s.merging = true
	bufSize := int(max(minReadBuf, min(maxReadBuf, (s.budget-s.mem.memory())/int64(max(1, len(s.runs))))))
	for i, f := range s.runs {
		src := &source{ord: i, run: &runReader{f: f, slot: i, size: f.Size(), buf: make([]byte, bufSize)}}
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
	for i := len(s.heap)/2 - 1; i >= 0; i-- {
		s.siftDown(i)
	}
	return nil
}

// advance moves src to its next record. An exhausted run's file is released at once, and an
// exhausted tail's memory freed. Only a run's read can fail.
func (s *Sorter) advance(src *source) error {
	if src.run != nil {
		rec, err := src.run.read()
		if err != nil {
			return err
		}
		src.rec = rec
		if rec == nil {
			src.key = nil
			// A failed delete does not fail the sort: the slot stays set, so Close tries again
			// and reports it (and the manager's Close deletes the file in any case).
			if src.run.f.Release() == nil {
				s.runs[src.run.slot] = nil
			}
			src.run.buf = nil
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

func (s *Sorter) less(a, b *source) bool {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c < 0
	}
	return a.ord < b.ord
}

func (s *Sorter) siftDown(i int) {
	h := s.heap
	for {
		least := i
		if l := 2*i + 1; l < len(h) && s.less(h[l], h[least]) {
			least = l
		}
		if r := 2*i + 2; r < len(h) && s.less(h[r], h[least]) {
			least = r
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}
