package extsort

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/spillway/spillway/plan/offheap"
	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
)

// Sorted runs on disk: how they are written from memory, read back in order and released.

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
)

// runChunkSize is the chunk size of the runs of a sort with budget.
func runChunkSize(budget int64) int {
	c := minRunChunk
	for c < maxRunChunk && int64(2*c) <= budget/runChunkShare {
		c *= 2
	}
	return c
}

// remoteRunSpans is a remote run's span (spill.ReaderOptions.RemoteSpan) in chunks: a reader of
// a remote run fetches that many chunks by one ranged GET, the next span while it reads the
// current one, so a merge of many remote runs pays the store's latency once per span of each run,
// in the background, not once per chunk on the merge's thread. The two spans a reader holds
// (spill.RemoteReaderMemory) are counted in the run's cost: a merge of remote runs opens fewer of
// them in the same budget.
const remoteRunSpans = 8

// remoteRunSpan is the span of a reader of a remote run of chunk-sized chunks.
func remoteRunSpan(chunk int) int { return remoteRunSpans * chunk }

// maxRemoteRunSpans bounds, in chunks, the span of a remote run's reader in a merge whose budget
// leaves room beside its runs' costs (remoteSpanIn).
const maxRemoteRunSpans = 64

// remoteSpanIn is the span of each remote run's reader in a merge of runs that leave spare bytes
// of its budget beside their costs, remote of them remote: the merge gives the spare to their
// read-ahead, each run's two spans growing by an equal share of it, in whole chunks, up to
// maxRemoteRunSpans chunks. A merge of k runs reads each at 1/k of its speed, so spans of
// spare/2k hide the store's latency L at any speed up to spare/2L, however many runs there are.
func remoteSpanIn(chunk int, spare int64, remote int) int {
	base := remoteRunSpan(chunk)
	if remote == 0 || spare <= 0 {
		return base
	}
	share := spare / int64(remote)
	span := int(min(int64(base)+share/2/int64(chunk)*int64(chunk), int64(maxRemoteRunSpans*chunk)))
	for span > base && 2*int64(offheap.Size(span)-offheap.Size(base)) > share {
		span -= chunk // offheap rounds a span up: keep the share
	}
	return span
}

// remoteSpansCost is what a reader of a remote run holds beside its chunk buffers: two spans,
// taken from offheap (spill.RemoteReaderMemory for a run of a span or more).
func remoteSpansCost(chunk int) int64 { return 2 * int64(offheap.Size(remoteRunSpan(chunk))) }

// run is one sorted run on disk: its records, in order, in one framed spill file.
type run struct {
	file      *spill.File // nil once released
	readCost  int64       // what a reader of the file holds besides its record buffer (its spans too, if remote)
	maxRecord int64       // the run's largest record, encoded: the reader's record buffer grows to it
	logical   int64       // the run's bytes in memory, as written to the Writer
}

// cost is the memory a merge plans for reading r: a synchronous chunk reader and a record
// buffer as large as r's largest record.
func (r *run) cost() int64 { return r.readCost + int64(offheap.Size(int(r.maxRecord))) }

// size is the run's bytes on disk.
func (r *run) size() int64 {
	if r.file == nil {
		return 0
	}
	return r.file.Size()
}

// spill writes the in-memory records, or the older half of them, as one sorted run and returns
// the memory freed. With keep, their chunks stay as spares for the records that come next
// (memTable.reuse), as many as leave the next run room for as many records as this one under the
// budget; else every byte goes.
//
// The first two spills with keep write only the older half of the records (spillOlder), and the
// next records fill the half's chunks. A sort that runs out of its memory has learnt that its
// input is larger than the memory, not by how much; with M the records a budget holds, an input
// of x·M records (x > 1) writes ⌊x⌋·M of them with whole spills, and with two halves first ½·M
// when x < 1.5 and ⌊x⌋·M otherwise (the second half ends where the first whole spill would, and
// whole spills go on from there). So the sort never writes more, writes half as much when its
// input is less than one and a half budgets (a Spark task at the edge of its fair share of the
// pool), and otherwise makes one run more. Halves all the way down would save half a budget
// more often, but make twice as many runs: measured, large sorts lost up to a tenth.
func (s *Sorter) spill(keep bool) (int64, error) {
	if s.mem.n == 0 {
		return 0, nil
	}
	held := s.mem.memory()
	if keep && s.halves < 2 {
		if old, ok := s.mem.splitOlder(); ok {
			freed, err := s.spillOlder(&old, held)
			if err == nil {
				s.halves++
			}
			return freed, err
		}
	}
	c, err := s.mem.cursor()
	if err != nil {
		return 0, fmt.Errorf("extsort: sorting %d records in memory: %w", s.mem.n, err)
	}
	r, err := s.writeRun(&s.mem, nil, c)
	if err != nil {
		return 0, err
	}
	entries := int64(s.mem.indexed(s.mem.n))*entrySize + s.mem.spillCost // what the next run's records add to the spares
	s.runs = append(s.runs, r)
	s.runsCost += r.cost()
	if keep {
		s.mem.reuse()
		s.mem.freeSpare(s.addLimit() - entries)
	} else {
		s.mem.reset()
	}
	s.countRun(r, held)
	return held - s.mem.memory(), nil
}

// spillOlder writes old, the older records split off s.mem (memTable.splitOlder), as a run, and
// gives their chunks to s.mem as spares. held is s.mem's memory before the split. If the run
// cannot be written, the records go back where they were.
func (s *Sorter) spillOlder(old *memTable, held int64) (int64, error) {
	c, err := old.cursor()
	if err != nil {
		s.mem.rejoin(old)
		return 0, fmt.Errorf("extsort: sorting %d records in memory: %w", old.n, err)
	}
	r, err := s.writeRun(old, nil, c)
	if err != nil {
		s.mem.rejoin(old)
		return 0, err
	}
	// The next records refill the spares, so the next run's entries are as many as all held now.
	entries := int64(s.mem.indexed(s.mem.n+old.n))*entrySize + s.mem.spillCost
	spilled := old.memory() // its records' arena and entries, and a writer's reservation countRun takes off
	s.runs = append(s.runs, r)
	s.runsCost += r.cost()
	old.reuse()
	s.mem.adoptSpares(old)
	s.mem.freeSpare(s.addLimit() - entries)
	s.countRun(r, spilled)
	return held - s.mem.memory(), nil
}

// countRun counts a run spilled from held bytes of memory (Spark's memoryBytesSpilled: the
// memory the records took, whether or not their chunks were kept for the next ones).
func (s *Sorter) countRun(r *run, held int64) {
	s.stats.Runs++
	s.stats.SpilledBytes += r.size()
	s.stats.SpilledLogicalBytes += r.logical
	s.stats.SpilledMemory += max(0, held-s.mem.spillCost) // the records' memory, not their writer's
	s.countRemote(r)
}

// countRemote counts r among the remote runs if it went to the remote tier.
func (s *Sorter) countRemote(r *run) {
	if r.file != nil && r.file.Remote() {
		s.stats.RemoteRuns++
		s.stats.RemoteBytes += r.size()
	}
}

// writeRun writes first, if not nil, then the records of t left to c, in order, as a new run.
// When a disk fills up under it, the run is written again from the start in a new file: the
// full disk has left the manager's rotation (spill.RootFull), and the records are still in
// memory. A run that fails is released. Its writer's buffers live only during the call. A run is
// written again at most as many times as there are local dirs: a full dir comes back to the
// rotation when it has room again or after spill.FullRootRecheck, and a run larger than every
// dir's room must fail rather than go round them for ever.
func (s *Sorter) writeRun(t *memTable, first []byte, c *cursor) (*run, error) {
	shuffle := s.shuffleSize(t.recordSize())
	records := c.remaining()
	if first != nil {
		records++
	}
	for rewrites := 0; ; rewrites++ {
		w, err := s.newRunWriter(shuffle)
		if err != nil {
			return nil, fmt.Errorf("extsort: writing a sorted run of %d records: %w", records, err)
		}
		err = w.writeFrom(first, c.clone())
		if err == nil {
			err = w.finish()
		}
		if err == nil {
			return w.run, nil
		}
		s.abandonRun(w)
		if !spill.RootFull(err) || rewrites == s.m.Roots().Len() {
			return nil, fmt.Errorf("extsort: writing a sorted run of %d records: %w", records, err)
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

// newRunWriter starts a run file; with shuffle (a record size, see shuffleSize) it is shuffled,
// and its reader holds a chunk more. A run that fails must be abandoned (abandonRun).
func (s *Sorter) newRunWriter(shuffle int) (*runWriter, error) {
	w, err := s.m.CreateFramedFileWith(runOptions(s.chunk, shuffle))
	if err != nil {
		return nil, fmt.Errorf("extsort: creating a run file: %w", err)
	}
	cost := s.readCost
	if shuffle != 0 {
		cost = s.shuffledReadCost()
	}
	if w.File().Remote() {
		cost += remoteSpansCost(s.chunk)
	}
	return &runWriter{run: &run{file: w.File(), readCost: cost}, w: w}, nil
}

// shuffleSize is the record size a run of records of recordSize bytes each (0: of several
// sizes) is shuffled by, or 0 for none. Records of one size are stored byte plane by byte plane
// (chunkfile.Options.Shuffle): a column of sorted keys, of small numbers or of null flags then
// lies in one piece, which lz4 shrinks about three times more, and faster. Only compressed runs
// are shuffled, and only when a chunk holds at least minShuffleRows records.
func (s *Sorter) shuffleSize(recordSize int) int {
	if recordSize < minShuffleRecord || recordSize > s.chunk/minShuffleRows || s.m.Format().Codec == chunkfile.None {
		return 0
	}
	return recordSize
}

// minShuffleRecord is the smallest record size a run is shuffled by (chunkfile.Options.Shuffle).
const minShuffleRecord = 2

// minShuffleRows is the fewest records a chunk must hold for its runs to be shuffled: planes of
// a few bytes gain nothing.
const minShuffleRows = 16

// shuffledReadCost is readCost for a shuffled run: its reader holds the planes of a chunk too.
func (s *Sorter) shuffledReadCost() int64 { return s.readCost + int64(offheap.Size(s.chunk)) }

func (w *runWriter) write(rec []byte) error {
	w.run.maxRecord = max(w.run.maxRecord, int64(len(rec)))
	_, err := w.w.Write(rec)
	return err
}

// runOptions frame a run of chunk-sized chunks, shuffled by shuffle (0: not).
func runOptions(chunk, shuffle int) spill.FramedOptions {
	return spill.FramedOptions{ChunkSize: chunk, RecordSize: shuffle}
}

// abandonRun gives up on w's run: once its chunks in flight are encoded (and dropped), its file
// is released.
func (s *Sorter) abandonRun(w *runWriter) {
	w.w.Discard()
	s.releaseRun(w.run)
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
// to the run's largest record. A remote run's reader fetches its next span ahead all the same
// (remoteRunSpans): one GET in flight and two spans, counted in the run's cost.
type runReader struct {
	s            *Sorter
	run          *run
	rd           *spill.Reader // nil once the run is read to its end
	buf          []byte
	releaseAtEnd bool // release the file once read: the final merge, not an intermediate pass
}

// openRun opens a reader of r; a remote run's reads span bytes by GET (remoteSpanIn).
func (s *Sorter) openRun(r *run, releaseAtEnd bool, span int) (*runReader, error) {
	// Its chunk buffers, like its record buffer, are off the Go heap: a merge may hold 64 MiB of them.
	rd, err := r.file.OpenReader(spill.ReaderOptions{Synchronous: true, Buffers: offheap.Allocator{}, RemoteSpan: span})
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
// file and the chunk. A record inside one chunk is returned where the chunk was decoded, with no
// copy; only one that straddles two chunks is copied into the record buffer.
func (r *runReader) read() ([]byte, error) {
	if r.rd == nil {
		return nil, nil
	}
	in, err := r.rd.Peek()
	if err == io.EOF {
		r.close()
		return nil, nil
	}
	if err != nil {
		return nil, r.fail(err)
	}
	if len(in) >= headerSize {
		size, err := r.sizeOf(in)
		if err != nil {
			return nil, err
		}
		if int64(len(in)) >= size {
			r.rd.Discard(int(size))
			return in[:size:size], nil
		}
	}
	if _, err := io.ReadFull(r.rd, r.buf[:headerSize]); err != nil {
		return nil, r.fail(err)
	}
	size, err := r.sizeOf(r.buf)
	if err != nil {
		return nil, err
	}
	if int64(cap(r.buf)) < size {
		grown, err := offheap.Alloc(int(size))
		if err != nil {
			return nil, fmt.Errorf("extsort: a buffer for a record of %d bytes: %w", size, err)
		}
		copy(grown, r.buf[:headerSize])
		offheap.Free(r.buf)
		r.buf = grown
	}
	rec := r.buf[:size]
	if _, err := io.ReadFull(r.rd, rec[headerSize:]); err != nil {
		return nil, r.fail(err)
	}
	return rec, nil
}

// sizeOf is the size of the record whose header hdr starts with, checked against the largest
// record written to the run.
func (r *runReader) sizeOf(hdr []byte) (int64, error) {
	size := headerSize + int64(binary.LittleEndian.Uint32(hdr)) + int64(binary.LittleEndian.Uint32(hdr[4:]))
	if size > r.run.maxRecord {
		// Verified chunks make this a bug rather than a disk fault; never allocate for it.
		return 0, fmt.Errorf("extsort: run file %s holds a record of %d bytes, larger than the largest written to it (%d)", r.run.file.Path(), size, r.run.maxRecord)
	}
	return size, nil
}

func (r *runReader) fail(err error) error {
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return fmt.Errorf("extsort: run file %s ends inside a record", r.run.file.Path())
	}
	return fmt.Errorf("extsort: reading a run: %w", err)
}

// close gives back the chunk reader's buffers and the record buffer and, in the final merge,
// releases the file. Idempotent.
func (r *runReader) close() {
	if r.rd != nil {
		_ = r.rd.Close()
		r.rd = nil
	}
	offheap.Free(r.buf)
	r.buf = nil
	if r.releaseAtEnd {
		r.s.releaseRun(r.run)
	}
}

// writeFrom writes first, if not nil, then every record left of c, in order.
func (w *runWriter) writeFrom(first []byte, c *cursor) error {
	if first != nil {
		if err := w.write(first); err != nil {
			return err
		}
	}
	if c.idx != nil {
		for rec := c.next(); rec != nil; rec = c.next() {
			if err := w.write(rec); err != nil {
				return err
			}
		}
		return nil
	}
	w.run.maxRecord = max(w.run.maxRecord, int64(c.t.maxRec))
	for sp := c.span(math.MaxInt); sp != nil; sp = c.span(math.MaxInt) {
		if _, err := w.w.Write(sp); err != nil {
			return err
		}
	}
	return nil
}
