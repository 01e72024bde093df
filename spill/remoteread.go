package spill

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"github.com/spillway/spillway/spill/chunkfile"
)

// How a Reader reads a remote file: a ranged GET per chunk would pay the store's latency once per
// chunk (64 KiB for a sort's run), and a GET's fixed cost more than its bytes. So a Reader of a
// remote file reads it in spans, each one ranged GET of ReaderOptions.RemoteSpan bytes, and while
// the chunks of one span are read the next span is fetched in the background: a Reader holds at
// most two spans (RemoteReaderMemory) and has at most one GET in flight.

// RemoteReadSpan is the bytes of each ranged GET of a remote file's Reader when
// ReaderOptions.RemoteSpan is 0: large enough that a GET's fixed cost is small beside its bytes
// and that the next span arrives, across a store's latency, before the current one is read. A
// Reader of a remote file holds two (RemoteReaderMemory) beside its chunk buffers.
const RemoteReadSpan = 8 << 20

// RemoteReaderMemory bounds what a Reader of a remote file of size bytes, read in spans of span
// bytes (0: RemoteReadSpan), holds beside its chunk buffers (chunkfile.ReaderMemory): the span
// being read and the next one, each no larger than the file. A local file's Reader holds none.
func RemoteReaderMemory(span int, size int64) int {
	if span <= 0 {
		span = RemoteReadSpan
	}
	return 2 * int(min(int64(span), size))
}

// remoteSpans serves a remote file's bytes to one chunkfile.Reader, which reads them in order
// (and, seeking, its chunk headers forward): ReadAt from the current span, and at its end from
// the next, fetched meanwhile. It is called by one goroutine at a time (the chunk reader's, or
// its read-ahead's), like the chunkfile.Reader it serves.
type remoteSpans struct {
	f       *File
	size    int64
	span    int
	buffers chunkfile.Buffers // nil: Go slices

	ctx    context.Context // cancelled by close: a fetch in flight gives up
	cancel context.CancelFunc

	cur   span         // the span read from now; data nil before the first
	ahead *spanFetch   // the next span, in flight or done; nil when none was started
	spare []byte       // a span buffer free for the next fetch
	held  atomic.Int64 // bytes of span buffers allocated and not freed: Memory, read from any goroutine
}

// span is bytes of the file from off.
type span struct {
	off  int64
	buf  []byte // the buffer, span bytes or the file's size
	data []byte // buf's bytes read from off
}

// spanFetch is a span being fetched by a goroutine; done is closed when n and err are set.
type spanFetch struct {
	off  int64
	buf  []byte
	n    int
	err  error
	done chan struct{}
}

func newRemoteSpans(f *File, size int64, span int, buffers chunkfile.Buffers) *remoteSpans {
	if span <= 0 {
		span = RemoteReadSpan
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &remoteSpans{f: f, size: size, span: span, buffers: buffers, ctx: ctx, cancel: cancel}
}

// ReadAt reads from the spans as io.ReaderAt does: the whole of p, or fewer bytes with io.EOF at
// the file's end, or the error of the GET of a span p needs.
func (r *remoteSpans) ReadAt(p []byte, off int64) (int, error) {
	total := 0
	for len(p) > 0 {
		if off >= r.size {
			return total, io.EOF
		}
		if c := r.cur; c.data != nil && off >= c.off && off < c.off+int64(len(c.data)) {
			n := copy(p, c.data[off-c.off:])
			p, off, total = p[n:], off+int64(n), total+n
			r.yieldToFetch()
			continue
		}
		if err := r.load(off); err != nil {
			return total, err
		}
	}
	return total, nil
}

// load makes the span that holds off current: the one fetched ahead if it does, else one
// fetched now. Either way the span after it is then fetched in the background.
func (r *remoteSpans) load(off int64) error {
	if a := r.ahead; a != nil {
		<-a.done
		r.ahead = nil
		if off < a.off || off >= a.off+int64(len(a.buf)) {
			r.spare = a.buf // read ahead for a reader that went elsewhere (a seek)
		} else if a.err != nil && !errors.Is(a.err, io.EOF) {
			r.spare = a.buf
			return a.err // the span off needs failed: no second GET behind the caller's back
		} else if off < a.off+int64(a.n) {
			r.spare = r.cur.buf
			r.cur = span{off: a.off, buf: a.buf, data: a.buf[:a.n]}
			r.fetchAhead(a.off + int64(a.n))
			return nil
		} else {
			r.spare = a.buf // the object ended early: fetched again below, which says so
		}
	}
	buf := r.cur.buf
	if buf == nil {
		buf, r.spare = r.spare, nil
	}
	if buf == nil {
		var err error
		if buf, err = r.alloc(); err != nil {
			return err
		}
	}
	n, err := r.fetch(buf, off)
	if n == 0 && err == nil {
		err = io.ErrUnexpectedEOF // the object is shorter than the file's size
	}
	if err != nil && (n == 0 || !errors.Is(err, io.EOF)) {
		r.cur = span{buf: buf}
		return err
	}
	r.cur = span{off: off, buf: buf, data: buf[:n]}
	r.fetchAhead(off + int64(n))
	return nil
}

// yieldToFetch lets the fetch in flight, if any, receive what has arrived (yieldToBackground).
func (r *remoteSpans) yieldToFetch() {
	if a := r.ahead; a != nil {
		yieldToBackground(a.done)
	}
}

// fetch reads the span from off into buf, as much of it as the file holds past off.
func (r *remoteSpans) fetch(buf []byte, off int64) (int, error) {
	return r.f.readRemote(r.ctx, buf[:min(int64(len(buf)), r.size-off)], off)
}

// fetchAhead starts the fetch of the span from off, unless the file ends before it. Without a
// buffer to spare (the allocator refused one) it fetches nothing: load fetches it when needed.
func (r *remoteSpans) fetchAhead(off int64) {
	if off >= r.size {
		return
	}
	buf := r.spare
	r.spare = nil
	if buf == nil {
		var err error
		if buf, err = r.alloc(); err != nil {
			return
		}
	}
	a := &spanFetch{off: off, buf: buf, done: make(chan struct{})}
	r.ahead = a
	go func() {
		defer close(a.done)
		a.n, a.err = r.fetch(a.buf, a.off)
	}()
}

func (r *remoteSpans) alloc() ([]byte, error) {
	n := int(min(int64(r.span), r.size))
	var b []byte
	if r.buffers == nil {
		b = make([]byte, n)
	} else {
		var err error
		if b, err = r.buffers.Alloc(n); err != nil {
			return nil, err
		}
	}
	r.held.Add(int64(len(b)))
	return b, nil
}

func (r *remoteSpans) free(b []byte) {
	if b == nil {
		return
	}
	r.held.Add(-int64(len(b)))
	if r.buffers != nil {
		r.buffers.Free(b)
	}
}

// memory is the bytes of span buffers held: at most RemoteReaderMemory.
func (r *remoteSpans) memory() int { return int(r.held.Load()) }

// close cancels a fetch in flight, waits for it, and frees the span buffers.
func (r *remoteSpans) close() {
	r.cancel()
	if a := r.ahead; a != nil {
		<-a.done
		r.free(a.buf)
		r.ahead = nil
	}
	r.free(r.cur.buf)
	r.free(r.spare)
	r.cur, r.spare = span{}, nil
}

// readRemote reads a remote file's bytes by one ranged GET, bounded by ctx and the call timeout.
func (f *File) readRemote(ctx context.Context, p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.h == nil {
		return 0, ErrFileReleased
	}
	return f.obj.readAt(ctx, p, off)
}
