package plan

import (
	"errors"
	"io"
	"sync"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
)

// ErrTmpFile is a tmp file's handle (CreateTmpFile: its bytes written as they come) given where
// a spill file's (CreateSpillFile: framed) is needed: a tmp file has no framing to finish, is
// not read through the service, and is released by ReleaseTmpFile.
var ErrTmpFile = errors.New("spillway: the file is a tmp file (createTmpFile); only a spill file (createSpillFile) is finished, read through the service and released with releaseSpillFile")

// ErrSpillFile is a spill file's handle given to ReleaseTmpFile, which releases tmp files only.
var ErrSpillFile = errors.New("spillway: the file is a spill file (createSpillFile); release it with releaseSpillFile")

// ErrReaderClosed is returned by a read after the reader's file failed to decode and was closed
// by the read that found it: every later read fails the same way.
var ErrReaderClosed = errors.New("spillway: the spill file reader is closed")

// ConfigureFormat sets the file format of the plans created from now on: codecName ("none",
// "lz4" or "zstd", as spark.spillway.compression.codec), zstdLevel (1 to 22, for zstd), and, when
// encrypt is on, AES-GCM with the process's key of keyBits bits (128, 192 or 256, made once per
// size and never written anywhere). Plans already created keep their format. A bad value is an
// *ArgumentError naming the valid ones; the format is then unchanged.
func (r *Registry) ConfigureFormat(codecName string, zstdLevel int, encrypt bool, keyBits int) error {
	codec, err := chunkfile.ParseCodec(codecName)
	if err != nil {
		return &ArgumentError{Reason: err.Error()}
	}
	if codec.String() != "none" && codec.String() != "lz4" { // zstd: the level is the caller's
		if codec, err = chunkfile.Zstd(zstdLevel); err != nil {
			return &ArgumentError{Reason: err.Error()}
		}
	}
	f := &spill.Format{Codec: codec}
	if encrypt {
		if f.Key, err = spill.ProcessKey(keyBits); err != nil {
			return err
		}
	}
	r.format.Store(f)
	return nil
}

// Format is the format plans created now take.
func (r *Registry) Format() spill.Format {
	if f := r.format.Load(); f != nil {
		return *f
	}
	return spill.Format{}
}

// CreateSpillFile creates a spill file for the plan: its writes are framed in the plan's format
// (compressed, sealed, each chunk checked). It returns its handle, a file handle like
// CreateTmpFile's. FinishWrite ends its writing, OpenReader reads it back, ReleaseSpillFile
// releases it.
func (r *Registry) CreateSpillFile(h uint64) (uint64, error) {
	p, err := r.lockLive(h)
	if err != nil {
		return 0, err
	}
	defer p.mu.Unlock()
	w, err := p.spill.CreateFramedFile()
	if err != nil {
		return 0, err
	}
	fh := r.files.add(&fileEntry{plan: p, file: w.File(), writer: w})
	p.own().files[fh] = struct{}{}
	return fh, nil
}

func (e *fileEntry) framed() bool { return e.writer != nil }

func (e *fileEntry) writeFramed(write func(w *spill.Writer) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return write(e.writer)
}

// FinishWrite writes a framed file's last chunk; the file can then be read and takes no more
// writes. Finishing twice returns the first result.
func (r *Registry) FinishWrite(fh uint64) error {
	e, ok := r.files.get(fh)
	if !ok {
		return &HandleError{What: "spill file", Handle: fh}
	}
	if !e.framed() {
		return ErrTmpFile
	}
	return e.writeFramed(func(w *spill.Writer) error { return w.Close() })
}

// FileSizes returns a framed file's plain bytes written and its bytes on disk.
func (r *Registry) FileSizes(fh uint64) (logical, stored int64, err error) {
	e, ok := r.files.get(fh)
	if !ok {
		return 0, 0, &HandleError{What: "file", Handle: fh}
	}
	if !e.framed() {
		size := e.file.Size()
		return size, size, nil
	}
	err = e.writeFramed(func(w *spill.Writer) error {
		logical, stored = w.LogicalSize()+int64(w.Buffered()), w.StoredSize()
		return nil
	})
	return logical, stored, err
}

type readerEntry struct {
	plan *Plan
	mu   sync.Mutex
	r    *spill.Reader // nil once closed
}

func (e *readerEntry) close() {
	e.mu.Lock()
	if e.r != nil {
		_ = e.r.Close()
		e.r = nil
	}
	e.mu.Unlock()
}

// OpenReader opens a finished framed file for reading from its start, with read-ahead (the
// next chunk is read and decoded while the caller consumes this one), and returns a reader
// handle. A file may have several readers. Readers are closed with CloseReader, or with the plan.
func (r *Registry) OpenReader(fh uint64) (uint64, error) {
	e, ok := r.files.get(fh)
	if !ok {
		return 0, &HandleError{What: "spill file", Handle: fh}
	}
	if !e.framed() {
		return 0, ErrTmpFile
	}
	rd, err := e.file.OpenReader(spill.ReaderOptions{})
	if err != nil {
		return 0, err
	}
	p := e.plan
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released { // the plan went while the file was opened: its files are gone
		_ = rd.Close()
		return 0, &HandleError{What: "spill file", Handle: fh}
	}
	rh := r.readers.add(&readerEntry{plan: p, r: rd})
	p.own().readers[rh] = struct{}{}
	return rh, nil
}

// Read reads the next bytes of a reader's file into dst and returns how many, or -1 at the
// end of the file. Every byte returned is from a chunk that verified; a file changed, cut,
// spliced, or sealed under another key fails with an error naming the file and the chunk
// (a *chunkfile.FormatError), and so does every later read.
func (r *Registry) Read(rh uint64, dst []byte) (int, error) {
	e, ok := r.readers.get(rh)
	if !ok {
		return 0, &HandleError{What: "spill file reader", Handle: rh}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.r == nil {
		return 0, ErrReaderClosed
	}
	if len(dst) == 0 {
		return 0, nil
	}
	n, err := e.r.Read(dst) // never 0 and no error for a non-empty dst
	if n > 0 {
		return n, nil // an error comes again with the next read, with nothing read
	}
	if err == io.EOF {
		return -1, nil
	}
	return 0, err
}

// CloseReader closes a reader and forgets its handle. A second close fails with a *HandleError.
func (r *Registry) CloseReader(rh uint64) error {
	e, ok := r.readers.take(rh)
	if !ok {
		return &HandleError{What: "spill file reader", Handle: rh}
	}
	e.plan.disown(func(o *owned) map[uint64]struct{} { return o.readers }, rh)
	e.close()
	return nil
}

// LiveReaders counts open readers, for leak checks.
func (r *Registry) LiveReaders() int { return r.readers.len() }
