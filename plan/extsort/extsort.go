package extsort

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/spillway/spillway/plan/offheap"
	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
)

const (
	headerSize = 8             // u32 keyLen | u32 valueLen
	maxLen     = math.MaxInt32 // the largest key or value length a batch may give
)

var (
	// ErrClosed is returned by every method but Close, MemoryUsed and Stats once Close was called.
	ErrClosed = errors.New("extsort: the sorter is closed")
	// ErrAddAfterNext is returned by Add once Next has been called: Next ends the input.
	ErrAddAfterNext = errors.New("extsort: Add called after Next; add every batch before the first Next")
)

// ConfigError is an invalid argument to New.
type ConfigError struct {
	Reason string // what is wrong and what to pass instead
}

func (e *ConfigError) Error() string { return "extsort: " + e.Reason }

// BatchError is a malformed batch. Add returns it having added nothing, and the sorter stays
// usable.
type BatchError struct {
	Offset int    // byte offset in the batch where the bad record, or bad length, starts
	Reason string // what is wrong there
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("extsort: malformed batch at byte %d: %s (a record is u32 keyLen | u32 valueLen | key | value, little-endian)", e.Offset, e.Reason)
}

// RecordTooLargeError is returned by Next when the next record alone does not fit in dst. The
// record is not consumed: call Next again with a buffer of at least Need bytes.
type RecordTooLargeError struct {
	Need int // bytes the next record takes in the output batch, header included
}

func (e *RecordTooLargeError) Error() string {
	return fmt.Sprintf("extsort: the next record takes %d bytes, more than the output buffer holds; call Next again with a buffer of at least %d bytes", e.Need, e.Need)
}

// Stats counts what a sorter has done.
type Stats struct {
	Records int64 // records added
	Runs    int64 // sorted runs spilled from memory
	// SpilledBytes is what those runs take on disk: compressed, sealed and framed as the
	// manager's spill.Format says (Spark's diskBytesSpilled).
	SpilledBytes int64
	// SpilledLogicalBytes is the records' bytes written to those runs, before compression.
	SpilledLogicalBytes int64
	// SpilledMemory is the records' memory freed by spills (Spark's memoryBytesSpilled): arena
	// and index, not the spill writer's reservation they give back too.
	SpilledMemory int64

	// MergePasses is how many times the merge went through spilled data: 0 when nothing was
	// spilled, 1 when the runs were merged straight into the output, more when there were
	// too many runs for the memory and intermediate passes merged them into fewer first.
	MergePasses       int64
	IntermediateRuns  int64 // runs written by intermediate passes (not counted in Runs)
	IntermediateBytes int64 // bytes on disk written to them (not counted in SpilledBytes)
	// RewrittenRuns counts runs written again from the start in a new file, on another disk,
	// because the disk under them filled up (see spill.RootFull).
	RewrittenRuns int64
	// RemoteRuns counts the runs, intermediate ones included, that went to the manager's remote
	// tier (spill.Remote) because no local dir could take them; RemoteBytes is their bytes in
	// the store (among SpilledBytes and IntermediateBytes).
	RemoteRuns  int64
	RemoteBytes int64
}

// Sorter is one external sort. It is safe for concurrent use: Spark may ask it to Spill from
// another thread while the task adds or reads. All methods serialize on one mutex.
type Sorter struct {
	mu     sync.Mutex
	m      *spill.Manager
	budget int64

	mem       memTable // records held in memory, in insertion order
	maxRecord int64    // the largest record added, encoded: a read buffer may grow to it
	runs      []*run   // sorted runs, oldest first
	halves    int      // runs written of the older half of the records (spill)
	runsCost  int64    // the sum of the runs' costs: the memory a merge of them all plans for
	chunk     int      // the chunk size of the run files
	readCost  int64    // what a run's chunk reader holds at most (chunkfile.ReaderMemory)
	writeCost int64    // what a run's writer holds at most (chunkfile.WriterMemory)
	stats     Stats

	// unreleased are run files whose delete failed: Close tries again (and the manager's Close
	// deletes them in any case).
	unreleased []*spill.File

	merging bool      // Next has been called: input is over
	heap    []*source // final merge sources not yet exhausted, a min-heap by (key, ord)
	tail    *source   // the in-memory source while it is still in memory and not exhausted
	pass    *pass     // the intermediate merge in progress, if any

	onMergeStep func() // a test hook, called after each record an intermediate pass writes

	err    error // why the sort broke; every later call but Close fails with it
	closed bool
}

// New returns a sorter that spills through m and holds at most about memoryBudget bytes of
// records in memory. It touches no filesystem; the first spill creates the plan's dir.
func New(m *spill.Manager, memoryBudget int64) (*Sorter, error) {
	if m == nil {
		return nil, &ConfigError{Reason: "no spill manager given"}
	}
	if memoryBudget <= 0 {
		return nil, &ConfigError{Reason: fmt.Sprintf("memory budget is %d bytes; give a positive number of bytes", memoryBudget)}
	}
	chunk := runChunkSize(memoryBudget)
	// A run spilled from memory may be shuffled: its writer holds a chunk more a frame.
	spillCost := int64(chunkfile.WriterMemory(m.WriterOptions(runOptions(chunk, minShuffleRecord))))
	return &Sorter{
		m: m, budget: memoryBudget, mem: memTable{arena: arena{chunkSize: chunkSizeFor(memoryBudget)}, spillCost: spillCost},
		chunk:     chunk,
		readCost:  readerMemory(chunk),
		writeCost: int64(chunkfile.WriterMemory(m.WriterOptions(runOptions(chunk, 0)))),
	}, nil
}

// readerMemory is what a run's chunk reader holds at most: chunkfile.ReaderMemory's two buffers (a
// stored chunk with the next header, a decoded chunk), each taken from offheap, which rounds it.
func readerMemory(chunk int) int64 {
	stored := chunkfile.ReaderMemory(chunk) - chunk
	return int64(offheap.Size(stored) + offheap.Size(chunk))
}

// Add copies the records of batch into the sort: AddWithin with no limit but the budget.
func (s *Sorter) Add(batch []byte) error {
	_, _, err := s.AddWithin(batch, math.MaxInt64)
	return err
}

// AddWithin copies records of batch into the sort, in order, while holding the next one keeps
// MemoryUsed within limit (the memory the caller was granted for the sort: Spark's), and returns
// the bytes of batch it took, whole records: all of them, or, when the next record would take
// MemoryUsed past limit, those before it, and need, the MemoryUsed that holding the rest of batch
// needs (as far as the budget; at least what that record needs: a caller granted that much calls
// again with the rest). So the sort never holds more than it was granted, and the caller has
// nothing to foresee. The caller may reuse batch afterwards. The whole batch is
// checked first: if it is malformed, AddWithin returns a *BatchError, adds nothing, and the
// sorter stays usable. When holding a record would take MemoryUsed over the budget, it first
// spills what it holds as a sorted run (the first two times the older half of it, see the
// package doc), whatever limit is. If that spill fails, part of the batch may have been added, so
// the sorter is broken: the error (wrapping a *spill.LimitError, say) is returned, and every
// later call but Close fails.
func (s *Sorter) AddWithin(batch []byte, limit int64) (taken int, need int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return 0, 0, err
	}
	if s.merging {
		return 0, 0, ErrAddAfterNext
	}
	uniform, err := validate(batch)
	if err != nil {
		return 0, 0, err
	}
	for off := 0; off < len(batch); {
		// Most records go in by runs, each with one copy: those that fit in the last chunk's room
		// with neither the budget nor the limit reached, where the loop below would neither
		// spill nor map a chunk.
		if taken, records := s.mem.addRun(batch[off:], min(s.addLimit(), limit), uniform); records > 0 {
			s.maxRecord = max(s.maxRecord, int64(s.mem.maxRec))
			s.stats.Records += int64(records)
			off += taken
			continue
		}
		rec := batch[off : off+recordSize(batch[off:])]
		s.maxRecord = max(s.maxRecord, int64(len(rec)))
		if s.mem.n > 0 && s.mem.memory()+s.mem.growth(len(rec)) > s.addLimit() {
			if _, err := s.spill(true); err != nil {
				s.err = err
				return off, 0, err
			}
		}
		if need := s.mem.memory() + s.mem.growth(len(rec)); need > limit {
			return off, s.need(batch[off:], uniform, need), nil
		}
		if err := s.mem.add(rec); err != nil {
			s.err = fmt.Errorf("extsort: adding a record of %d bytes: %w", len(rec), err) // part of the batch is in
			return off, 0, s.err
		}
		s.stats.Records++
		off += len(rec)
	}
	return len(batch), 0, nil
}

// need is what AddWithin says it needs granted when it stops before rest: the MemoryUsed that
// holding all of rest takes at most, as far as the budget (at addLimit the sort spills instead),
// and at least next, what its first record needs. Asked for the whole rest, a caller is granted
// memory in large steps, as Spark's sorts acquire pages, rather than a record at a time.
func (s *Sorter) need(rest []byte, uniform int, next int64) int64 {
	records := 0
	if uniform > 0 {
		records = len(rest) / uniform
	} else {
		for off := 0; off < len(rest); off += recordSize(rest[off:]) {
			records++
		}
	}
	return max(next, min(s.mem.memory()+s.mem.batchGrowth(len(rest), records), s.addLimit()))
}

// addLimit is the MemoryUsed that Add spills before passing: the budget less the merge reserve.
// The spill writer's reservation (memTable.spillCost) comes out of it, except in a budget under
// 8 times the reservation (under ~27 KiB), where it comes on top: taken from so little, it would
// leave room for a record or two a run.
func (s *Sorter) addLimit() int64 {
	limit := s.budget - s.mergeReserve()
	if s.mem.spillCost > s.budget/8 {
		limit += s.mem.spillCost
	}
	return limit
}

// Spill writes the records held in memory as one sorted run and frees their memory. It returns
// the bytes of memory freed: 0 if nothing was held, or if spilling would free nothing. During
// Next it spills the records not yet returned. If the run cannot be written, its file is
// released, the records stay in memory and the error is returned; the sort remains usable.
func (s *Sorter) Spill() (freed int64, err error) { return s.spillMemory(false) }

// SpillToRefill is Spill for a caller that adds more records at once: Spark spilling the sort to
// grant the sort's own next batch. The run's arena chunks are kept, emptied, for the next records
// to fill, as when Add spills at the budget, and stay counted in MemoryUsed, so it frees only the
// index, the spill writer's reservation (see MemoryUsed in the package doc) and the chunks past
// what the next run needs; and like Add's, the first two such spills write only the older half of
// the records, which frees the index of that half. With no records in memory it is Spill:
// the caller needs memory the sort holds, and only the spares are left to free.
func (s *Sorter) SpillToRefill() (freed int64, err error) { return s.spillMemory(true) }

func (s *Sorter) spillMemory(refill bool) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return 0, err
	}
	if s.merging {
		return s.spillTail()
	}
	before := s.mem.memory()
	if !refill || s.mem.n == 0 {
		s.mem.freeSpare(0) // chunks kept by earlier spills
	}
	_, err := s.spill(refill)
	return before - s.mem.memory(), err
}

// MemoryUsed is the bytes of memory the sorter holds (see the package doc): what the JVM side
// reports to Spark's memory manager.
func (s *Sorter) MemoryUsed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.memoryUsed()
}

func (s *Sorter) memoryUsed() int64 {
	used := s.mem.memory() + readBuffers(s.heap)
	if s.pass != nil {
		used += readBuffers(s.pass.heap) + s.pass.w.memory()
	}
	return used
}

func readBuffers(h []*source) int64 {
	var n int64
	for _, src := range h {
		if src.run != nil {
			n += src.run.memory()
		}
	}
	return n
}

// Stats returns the sorter's counters.
func (s *Sorter) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Next ends the input on its first call, then fills dst with as many whole records as fit, in
// sorted order, and returns the bytes filled, in the batch format. It returns 0 once every record
// has been returned. If the next record alone does not fit in dst, it returns 0 and a
// *RecordTooLargeError and consumes nothing. A run file is released as soon as it has been
// merged. When there are more runs than one merge may open within the budget, the first call
// first merges them in intermediate passes (see Memory in the package doc), which rewrites the
// spilled data once per pass. Any other error breaks the sorter; close it.
func (s *Sorter) Next(dst []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return 0, err
	}
	if !s.merging {
		if err := s.startMerge(); err != nil {
			s.err = err
			return 0, err
		}
	}
	if len(s.heap) == 1 && s.heap[0] == s.tail {
		return s.nextFromMemory(dst)
	}
	n := 0
	for len(s.heap) > 0 {
		top := s.heap[0]
		if len(top.rec) > len(dst)-n {
			if n == 0 {
				return 0, &RecordTooLargeError{Need: len(top.rec)}
			}
			break
		}
		n += copy(dst[n:], top.rec)
		if err := s.advance(top); err != nil {
			s.err = err
			return 0, err
		}
		if top.rec == nil {
			s.heap = pop(s.heap)
		}
		siftDown(s.heap, 0, sourceLess)
	}
	return n, nil
}

// Close releases every run file still held and the memory. It is idempotent; a second call
// returns nil. It does not close the manager.
func (s *Sorter) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	// The final merge's open readers hold buffers off the Go heap (an intermediate pass closes its own).
	for _, src := range s.heap {
		if src.run != nil {
			src.run.close()
		}
	}
	var errs []error
	files := s.unreleased
	for _, r := range s.runs {
		files = append(files, r.file)
	}
	for _, f := range files {
		if f == nil {
			continue
		}
		// ErrFileReleased means the manager was closed first and has deleted the file already.
		if err := f.Release(); err != nil && !errors.Is(err, spill.ErrFileReleased) {
			errs = append(errs, err)
		}
	}
	s.runs, s.unreleased, s.heap, s.tail, s.pass = nil, nil, nil, nil, nil
	s.mem.reset()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("extsort: releasing run files: %w", err)
	}
	return nil
}

func (s *Sorter) check() error {
	if s.closed {
		return ErrClosed
	}
	if s.err != nil {
		return fmt.Errorf("extsort: the sort failed earlier and must be closed: %w", s.err)
	}
	return nil
}

// validate checks that batch is a whole number of well-formed records, without reading outside
// it. When every record has the first one's header (one key length and one value length: a SQL
// sort's rows of fixed-width columns), it returns their size, found with one independent load a
// record rather than a walk from header to header; else 0.
func validate(batch []byte) (uniform int, err error) {
	if len(batch) >= headerSize {
		h := binary.LittleEndian.Uint64(batch)
		if k, v := h&0xffffffff, h>>32; k <= maxLen && v <= maxLen {
			size := headerSize + int(k) + int(v)
			if len(batch)%size == 0 && sameHeaders(batch, size, h) {
				return size, nil
			}
		}
	}
	return 0, validateEach(batch)
}

// sameHeaders reports whether batch's records, if each had size bytes, would all have header h.
func sameHeaders(batch []byte, size int, h uint64) bool {
	for off := size; off < len(batch); off += size {
		if binary.LittleEndian.Uint64(batch[off:]) != h {
			return false
		}
	}
	return true
}

// validateEach is validate's walk from each record's header to the next.
func validateEach(batch []byte) error {
	ahead := 0
	for off := 0; off < len(batch); {
		ahead = prefetchWalk(batch, ahead, off)
		left := len(batch) - off
		if left < headerSize {
			return &BatchError{Offset: off, Reason: fmt.Sprintf("truncated record header: %d bytes left, a header takes %d", left, headerSize)}
		}
		k := uint64(binary.LittleEndian.Uint32(batch[off:]))
		v := uint64(binary.LittleEndian.Uint32(batch[off+4:]))
		if k > maxLen {
			return &BatchError{Offset: off, Reason: fmt.Sprintf("key length %d is over the maximum of %d (a negative JVM int?)", k, maxLen)}
		}
		if v > maxLen {
			return &BatchError{Offset: off, Reason: fmt.Sprintf("value length %d is over the maximum of %d (a negative JVM int?)", v, maxLen)}
		}
		if size := headerSize + k + v; size > uint64(left) {
			return &BatchError{Offset: off, Reason: fmt.Sprintf("record of %d bytes (%d-byte key, %d-byte value) runs past the end of the batch, which has %d bytes left", size, k, v, left)}
		}
		off += headerSize + int(k) + int(v)
	}
	return nil
}

// recordSize is the encoded size of the well-formed record that rec starts with.
func recordSize(rec []byte) int {
	return headerSize + int(binary.LittleEndian.Uint32(rec)) + int(binary.LittleEndian.Uint32(rec[4:]))
}

// AppendRecord appends one record in the batch format to dst and returns the extended slice. It
// panics if key or value is longer than math.MaxInt32 bytes.
func AppendRecord(dst, key, value []byte) []byte {
	if len(key) > maxLen || len(value) > maxLen {
		panic("extsort: key or value longer than math.MaxInt32 bytes")
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(key)))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(value)))
	dst = append(dst, key...)
	return append(dst, value...)
}
