package spill

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/spillway/spillway/spill/chunkfile"
)

// Format is how a manager frames its files (see package chunkfile and
// docs/design/spill-file-format.md). It is fixed when the manager is made. The zero Format frames
// with no compression and no encryption, each chunk checked by CRC-32C.
type Format struct {
	Codec chunkfile.Codec
	// Key seals every chunk with AES-GCM; nil leaves chunks in the clear. Take it from
	// ProcessKey: one key per size for the whole process, made once, never per plan.
	Key *chunkfile.Key
	// ChunkSize is the plaintext size of a framed file's chunks, 0 for chunkfile.DefaultChunkSize.
	ChunkSize int
}

// processKeys holds the process's keys, one per AES key size, each made when first asked for.
var processKeys [3]struct {
	once sync.Once
	key  *chunkfile.Key
	err  error
}

// ProcessKey returns the process's key of bits bits (128, 192 or 256), made by crypto/rand the
// first time it is asked for and then shared by every manager: spill files are read only by the
// process that wrote them, and a plan that never spills costs no key.
func ProcessKey(bits int) (*chunkfile.Key, error) {
	var i int
	switch bits {
	case 128:
		i = 0
	case 192:
		i = 1
	case 256:
		i = 2
	default:
		return nil, &ConfigError{Reason: fmt.Sprintf("an encryption key of %d bits; give 128, 192 or 256 (spark.io.encryption.keySizeBits)", bits)}
	}
	k := &processKeys[i]
	k.once.Do(func() { k.key, k.err = chunkfile.NewKey(bits) })
	return k.key, k.err
}

// zeroFormat is the format of a manager configured with none.
var zeroFormat Format

// Format is the manager's file format.
func (m *Manager) Format() Format { return *m.format }

// Writer writes a framed spill file: the bytes written to it are cut into chunks, compressed and
// sealed as the manager's Format says, and each chunk is appended to the File whole or not at all
// (File.Write), so the limits count the bytes on disk — compressed, with framing — reserved
// before each chunk and given back if it fails. Close must be called to write the last chunk; the
// file can then be read back with File.OpenReader. After a failed Write or Close the file holds
// its whole chunks only and takes no more writes: Release it. A Writer is not safe for concurrent
// use.
type Writer struct {
	f *File
	w *chunkfile.Writer
}

// CreateFramedFile creates a spill file, as CreateFile does, to be written through the returned
// Writer with the manager's Format.
func (m *Manager) CreateFramedFile() (*Writer, error) {
	return m.CreateFramedFileWith(FramedOptions{})
}

// CreateFramedFileWithChunkSize is CreateFramedFile with another chunk size (a power of two from
// chunkfile.MinChunkSize to chunkfile.MaxChunkSize, or 0 for the Format's): smaller chunks let a
// reader of many files at once, a merge, hold less memory per file.
func (m *Manager) CreateFramedFileWithChunkSize(chunkSize int) (*Writer, error) {
	return m.CreateFramedFileWith(FramedOptions{ChunkSize: chunkSize})
}

// FramedOptions say how CreateFramedFileWith frames one file beyond the manager's Format.
type FramedOptions struct {
	// ChunkSize is the file's chunk size: a power of two from chunkfile.MinChunkSize to
	// chunkfile.MaxChunkSize, or 0 for the Format's. Smaller chunks let a reader of many files at
	// once, a merge, hold less memory per file.
	ChunkSize int
	// RecordSize, for bytes that are records of one size, is that size (2 to the chunk size; 0
	// when they are not): the file is shuffled (chunkfile.Options.Shuffle), which stores the
	// records' like bytes side by side and so compresses them far better. Its Writer and Readers
	// hold one chunk more.
	RecordSize int
}

// CreateFramedFileWith is CreateFramedFile framed as o says.
func (m *Manager) CreateFramedFileWith(o FramedOptions) (*Writer, error) {
	chunkSize, recordSize := o.ChunkSize, o.RecordSize
	if chunkSize == 0 {
		chunkSize = m.format.ChunkSize
	}
	// Check the options before creating anything, so a bad size leaves no file behind.
	if chunkSize != 0 && (chunkSize < chunkfile.MinChunkSize || chunkSize > chunkfile.MaxChunkSize || chunkSize&(chunkSize-1) != 0) {
		return nil, &ConfigError{Reason: fmt.Sprintf("a chunk size of %d bytes; give a power of two from %d to %d, or 0 for %d", chunkSize, chunkfile.MinChunkSize, chunkfile.MaxChunkSize, chunkfile.DefaultChunkSize)}
	}
	if size := cmp.Or(chunkSize, chunkfile.DefaultChunkSize); recordSize < 0 || recordSize == 1 || recordSize > size {
		return nil, &ConfigError{Reason: fmt.Sprintf("records of %d bytes to shuffle; give 2 to the chunk size (%d), or 0 for bytes that are not records of one size", recordSize, size)}
	}
	f, err := m.createFile(true)
	if err != nil {
		return nil, err
	}
	opts := m.WriterOptions(o)
	if f.obj != nil {
		// Remote files are always sealed: the bucket's readers are not the executor.
		if opts.Key, err = f.obj.rt.sealKey(m.format); err != nil {
			_ = f.Release()
			return nil, err
		}
		f.key = opts.Key
	}
	w, err := chunkfile.NewWriter(f, opts)
	if err != nil {
		_ = f.Release()
		return nil, err
	}
	f.mu.Lock()
	f.framing = framingWriting
	f.mu.Unlock()
	return &Writer{f: f, w: w}, nil
}

// WriterOptions are the chunkfile options of a file framed as o says, for chunkfile.WriterMemory.
func (m *Manager) WriterOptions(o FramedOptions) chunkfile.Options {
	return chunkfile.Options{Codec: m.format.Codec, Key: m.format.Key, ChunkSize: cmp.Or(o.ChunkSize, m.format.ChunkSize), Shuffle: o.RecordSize}
}

// File is the file written.
func (w *Writer) File() *File { return w.f }

// Write frames p onto the file; see chunkfile.Writer.Write. It returns len(p) unless a chunk could
// not be appended; the error then names the file (and wraps a *LimitError, say).
func (w *Writer) Write(p []byte) (int, error) {
	before := w.w.LogicalSize()
	n, err := w.w.Write(p)
	// The counter is the process's, shared by every task's writes: touched only when a chunk
	// was appended, not on each of a sort's small writes (one per record).
	if appended := w.w.LogicalSize() - before; appended != 0 {
		w.f.m.stats().LogicalBytesWritten.Add(appended)
	}
	if err != nil {
		return n, fmt.Errorf("spill: writing %s: %w", w.f.path, err)
	}
	return n, nil
}

// Close writes the last chunk and marks the file finished, so that it can be read. It does not
// release the file. Closing twice returns the first Close's result.
func (w *Writer) Close() error {
	before := w.w.LogicalSize()
	err := w.w.Close()
	w.f.m.stats().LogicalBytesWritten.Add(w.w.LogicalSize() - before)
	if err != nil {
		return fmt.Errorf("spill: finishing %s: %w", w.f.path, err)
	}
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	if w.f.obj != nil {
		if w.f.h == nil {
			return ErrFileReleased
		}
		if err := w.f.obj.finish(); err != nil {
			return fmt.Errorf("spill: finishing %s: %w", w.f.path, err)
		}
	}
	w.f.framing = framingFinished
	return nil
}

// Discard gives up on the file without finishing it: the bytes buffered are dropped, and the
// Writer takes no more writes. Release the file after.
func (w *Writer) Discard() { w.w.Discard() }

// LogicalSize is the number of plain bytes appended in whole chunks so far.
func (w *Writer) LogicalSize() int64 { return w.w.LogicalSize() }

// StoredSize is the number of bytes the file takes on disk, as counted against the limits.
func (w *Writer) StoredSize() int64 { return w.w.StoredSize() }

// Buffered is the number of bytes written and not yet appended.
func (w *Writer) Buffered() int { return w.w.Buffered() }

// Memory is the bytes of buffers the Writer holds (chunkfile.WriterMemory bounds it).
func (w *Writer) Memory() int { return w.w.Memory() }

// Reader reads a finished framed file back: it decodes and verifies each chunk before returning
// its bytes, and fails with an error naming the file and the chunk (wrapping a
// *chunkfile.FormatError) for a file that is not what its Writer wrote. Close must be called. A
// Reader is not safe for concurrent use.
type Reader struct {
	f     *File
	r     *chunkfile.Reader
	spans *remoteSpans // a remote file's spans (remoteread.go); nil for a local file
}

// ReaderOptions tune a Reader.
type ReaderOptions struct {
	// Synchronous turns the chunk read-ahead off; see chunkfile.ReaderOptions.
	Synchronous bool
	// Buffers, if set, gives the Reader its chunk buffers and a remote file's span buffers; see
	// chunkfile.ReaderOptions.
	Buffers chunkfile.Buffers
	// RemoteSpan is the bytes of each ranged GET of a remote file (0: RemoteReadSpan): the Reader
	// holds two spans besides its chunk buffers, RemoteReaderMemory. Ignored for a local file.
	RemoteSpan int
}

// Framing states of a File.
const (
	framingRaw      = iota // written with Write or WriteFrom, if at all
	framingWriting         // a Writer is writing it
	framingFinished        // its Writer was closed: it can be read, and takes no more writes
)

// ErrNotFinished is returned by OpenReader for a file that is not a framed file whose Writer was
// closed.
var ErrNotFinished = errors.New("spill: the file is not a finished framed file; write it with a Writer from CreateFramedFile and Close the Writer before reading it")

// ErrFinished is returned by a write to a framed file once its Writer was closed.
var ErrFinished = errors.New("spill: the framed file is finished and takes no more writes")

// OpenReader opens the finished framed file for reading from its start. Any number of Readers
// may be open on a file; releasing the file makes them fail with ErrFileReleased.
func (f *File) OpenReader(opts ReaderOptions) (*Reader, error) {
	f.mu.Lock()
	framing, size, released := f.framing, f.size, f.h == nil
	f.mu.Unlock()
	switch {
	case released:
		return nil, ErrFileReleased
	case framing != framingFinished:
		return nil, ErrNotFinished
	}
	key := f.m.format.Key
	var src io.ReaderAt = f
	var spans *remoteSpans
	if f.obj != nil {
		key = f.key
		spans = newRemoteSpans(f, size, opts.RemoteSpan, opts.Buffers)
		src = spans
	}
	r, err := chunkfile.NewReader(src, size, key, chunkfile.ReaderOptions{Synchronous: opts.Synchronous, Buffers: opts.Buffers})
	if err != nil {
		if spans != nil {
			spans.close()
		}
		return nil, fmt.Errorf("spill: opening %s: %w", f.path, err)
	}
	return &Reader{f: f, r: r, spans: spans}, nil
}

// Read reads the file's plain bytes in order; io.EOF after the last.
func (r *Reader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("spill: reading %s: %w", r.f.path, err)
	}
	return n, err
}

// Peek returns the file's next plain bytes in place, up to the end of the current chunk; see
// chunkfile.Reader.Peek. io.EOF after the last.
func (r *Reader) Peek() ([]byte, error) {
	b, err := r.r.Peek()
	if err != nil && err != io.EOF {
		err = fmt.Errorf("spill: reading %s: %w", r.f.path, err)
	}
	return b, err
}

// Discard passes n of the bytes Peek returned; see chunkfile.Reader.Discard.
func (r *Reader) Discard(n int) { r.r.Discard(n) }

// Seek sets the logical position of the next Read; see chunkfile.Reader.Seek.
func (r *Reader) Seek(offset int64, whence int) (int64, error) {
	n, err := r.r.Seek(offset, whence)
	if err != nil {
		err = fmt.Errorf("spill: seeking in %s: %w", r.f.path, err)
	}
	return n, err
}

// Memory is the bytes of buffers the Reader holds now: its chunk buffers and, for a remote file,
// its span buffers (at most RemoteReaderMemory).
func (r *Reader) Memory() int {
	if r.spans != nil {
		return r.r.Memory() + r.spans.memory()
	}
	return r.r.Memory()
}

// File is the file read.
func (r *Reader) File() *File { return r.f }

// Close stops the read-ahead (a remote file's GET in flight too) and drops the buffers. It does
// not release the file.
func (r *Reader) Close() error {
	err := r.r.Close()
	if r.spans != nil {
		r.spans.close()
	}
	return err
}
