package spill

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/spillway/spillway/spill/chunkfile"
)

// File is one spill file. Writes append. It is safe for concurrent use, though a spill file is
// normally written by one goroutine and then read back.
type File struct {
	m    *Manager
	dir  *planDir // the dir it was made in, through which it is removed; nil for a remote file
	name string
	path string
	obj  *remoteFile    // the object of a remote file (also its h); nil for a local one
	key  *chunkfile.Key // the key a remote file is sealed with

	mu      sync.Mutex
	h       Handle // nil once released
	size    int64  // bytes written and counted against the limit
	broken  error  // non-nil once a failed write's tail could not be truncated: no more writes
	framing int    // framingRaw, framingWriting or framingFinished
	gone    bool   // deleted from disk, its bytes given back
}

// Path is the file's absolute path.
func (f *File) Path() string { return f.path }

// Size is the number of bytes written to the file.
func (f *File) Size() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.size
}

// Write appends p whole or not at all. Its bytes are reserved against the manager's limit before
// the write; if the limit would be passed it fails with a *LimitError and writes nothing. If the
// write itself fails, the file is truncated back to its size before the write, whatever the OS
// reported (a failed pwrite may have put part of p on disk and still report nothing written), and
// every byte is given back, so usage never drifts and a reader never sees a failed write's tail.
// A write that fails because the disk is full, over quota or read-only (see RootFull) also takes
// the file's local dir out of the manager's rotation: new files go to its other dirs, and to this
// one again once it has room (placement.go).
func (f *File) Write(p []byte) (int, error) {
	err := f.appendBytes(int64(len(p)), func(off int64) error {
		_, err := f.h.WriteAt(p, off)
		return err
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// copyChunk bounds the buffer WriteFrom copies through.
const copyChunk = 1 << 20

// copyBuffers are WriteFrom's copy buffers, reused: a large write allocates nothing per call.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyChunk); return &b }}

// sourceError is a failure of WriteFrom's reader, which is not the filesystem's.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// WriteFrom appends exactly n bytes read from r, whole or not at all, as Write does: n is
// reserved against the limits first, then the bytes are copied through a buffer of at most 1 MiB,
// so a write of any size allocates a bounded amount. If r or the file fails, or r ends early, the
// file is truncated back to its size before the call and n is given back.
func (f *File) WriteFrom(r io.Reader, n int64) error {
	return f.appendBytes(n, func(off int64) error {
		bp := copyBuffers.Get().(*[]byte)
		defer copyBuffers.Put(bp)
		buf := (*bp)[:min(n, copyChunk)]
		for left := n; left > 0; {
			chunk := buf[:min(left, int64(len(buf)))]
			if _, err := io.ReadFull(r, chunk); err != nil {
				return &sourceError{fmt.Errorf("spill: reading the bytes to write to %s: %w", f.path, err)}
			}
			if _, err := f.h.WriteAt(chunk, off); err != nil {
				return err
			}
			off += int64(len(chunk))
			left -= int64(len(chunk))
		}
		return nil
	})
}

// appendBytes reserves n bytes, lets write put them at the end of the file, and on failure
// truncates the file back and gives them back.
func (f *File) appendBytes(n int64, write func(off int64) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.h == nil:
		return ErrFileReleased
	case f.broken != nil:
		return f.broken
	case f.framing == framingFinished:
		return ErrFinished
	case n < 0:
		return &ConfigError{Reason: "a write of " + formatBytes(n) + "; give 0 or more bytes"}
	case n == 0:
		return nil
	}
	if err := f.reserve(n); err != nil {
		return err
	}
	if err := write(f.size); err != nil {
		if RootFull(err) && f.dir != nil {
			defer f.m.rootFull(f.dir.rootIndex, err, f.size) // once truncated: its free space counts
		}
		if terr := f.h.Truncate(f.size); terr != nil {
			// The tail stays on disk, so it stays counted, and the file takes no more writes: no
			// acknowledged byte is ever written after bytes nobody acknowledged.
			f.broken = fmt.Errorf("spill: %s holds the tail of a failed write (%v) that could not be truncated (%v); release it", f.path, err, terr)
			f.size += n
			return f.m.fsError(errors.Join(err, terr))
		}
		f.unreserve(n)
		if src := (*sourceError)(nil); errors.As(err, &src) {
			return src.err // the caller's source failed, not the filesystem
		}
		return f.m.fsError(err)
	}
	f.size += n
	f.m.stats().BytesWritten.Add(n)
	if f.obj != nil {
		f.m.stats().RemoteBytesWritten.Add(n)
	}
	return nil
}

// reserve takes n bytes of the manager's limits and, for a remote file, of the remote cap.
func (f *File) reserve(n int64) error {
	if err := f.m.reserve(n); err != nil {
		return err
	}
	if f.obj != nil {
		if err := f.obj.rt.reserve(n); err != nil {
			f.m.unreserve(n)
			f.m.stats().LimitFailures.Add(1)
			return err
		}
	}
	return nil
}

// unreserve gives back what reserve took.
func (f *File) unreserve(n int64) {
	f.m.unreserve(n)
	if f.obj != nil {
		f.obj.rt.unreserve(n)
	}
}

// Remote reports whether the file is in the remote tier, an object store, rather than in a
// local dir.
func (f *File) Remote() bool { return f.obj != nil }

// ReadAt reads from the file as io.ReaderAt does.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.h == nil {
		return 0, ErrFileReleased
	}
	return f.h.ReadAt(p, off)
}

// Release closes and deletes the file and gives its bytes back to the manager. If the delete
// fails the bytes stay counted and the manager's Close tries again. A second Release after a
// successful one returns ErrFileReleased.
func (f *File) Release() error {
	f.mu.Lock()
	err := f.discard()
	f.mu.Unlock()
	if err == nil {
		f.m.forget(f)
	}
	return err
}

// discard closes and deletes the file. f.mu must be held.
func (f *File) discard() error {
	if f.gone {
		return ErrFileReleased
	}
	if f.h != nil {
		// A close error cannot lose data that is about to be deleted.
		_ = f.h.Close()
		f.h = nil
	}
	if f.obj != nil {
		if err := f.obj.remove(); err != nil {
			return err // the bytes stay counted until the delete is done
		}
	} else if err := ignoreNotExist(f.dir.dir.Remove(f.name)); err != nil {
		return f.m.fsError(err)
	}
	f.gone = true
	f.unreserve(f.size)
	return nil
}
