package spill

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway/spillway/spill/chunkfile"
)

// The remote tier: when no local root can take a framed file (every root given up, out of the
// rotation, or with less than MinFreeSpace free), a manager configured with a Remote puts the file in an object store
// instead (docs/design/remote-tier.md). Such a file is the same *File to everyone above: written
// in order through a Writer, read in order or from any offset through Readers. Its bytes count
// against the manager's limit, the shared budget and the Remote's own cap; it is always sealed
// with AES-GCM under a key of the process (RemoteKeyBits when the Format has none), so a reader
// of the bucket learns nothing and any change is detected; its objects go when it is released,
// and every object under the plan's prefix when the manager is closed. A raw file (CreateFile:
// its path is handed out to be opened by the caller) is never remote.

// RemotePartSize is the size of every part of a remote file's multipart upload but the last,
// above S3's minimum part of 5 MiB; a file smaller than one part is sent by one PUT. A file being
// written holds at most two part buffers: the part filling and the one being sent in the
// background (RemoteWriterMemory).
const RemotePartSize = 8 << 20

// RemoteWriterMemory bounds what a remote file being written holds beside its Writer's chunk
// buffers: the part filling and the part in flight, RemotePartSize each. They come from a pool
// on the Go heap, and are given back when the file is finished, fails or is released.
const RemoteWriterMemory = 2 * RemotePartSize

// RemoteCallTimeout bounds each call to the object store, retries by the client included: a
// store that does not answer fails the spill with an error rather than hanging the task. It is
// the default of RemoteConfig.CallTimeout.
const RemoteCallTimeout = 2 * time.Minute

// RemoteKeyBits is the AES key size that seals remote files when the Format seals nothing.
const RemoteKeyBits = 256

// Remote is an object store behind a process's local roots, shared by its managers, with a cap
// over the bytes of all their remote files. Building one makes no call to the store.
type Remote struct {
	store   ObjectStore
	prefix  string // this process's prefix in the store: spillway-app-<application>/spillway-<random>/
	limit   int64
	setting string
	timeout time.Duration // each call's bound: RemoteConfig.CallTimeout
	used    atomic.Int64

	keyOnce sync.Once
	key     *chunkfile.Key
	keyErr  error
}

// RemoteConfig configures a Remote.
type RemoteConfig struct {
	Store ObjectStore // required
	// Limit is the bytes all remote files of the process may hold together; 0 refuses every
	// write to the store.
	Limit int64
	// LimitSetting names the configuration that sets Limit, for a *LimitError. Optional.
	LimitSetting string
	// Application names what the process works for (a Spark application, say): the processes of
	// one application share its prefix, which SweepApplications and RemoveApplication remove as
	// one (remotesweep.go). Required; letters, digits, '.', '_' and '-' (ApplicationName makes one).
	Application string
	// CallTimeout bounds each call to the store (a PUT, a part, a completion, an abort, a ranged
	// GET, a delete, the listing and removal of a plan's prefix), the client's retries and their
	// backoff included: a call still unanswered then fails with a *RemoteError whose cause is
	// context.DeadlineExceeded. 0 means RemoteCallTimeout; negative is a *ConfigError.
	CallTimeout time.Duration
}

// NewRemote returns a Remote over cfg.Store. It makes no call to the store: the caller checks
// the store first (s3store.Store.Probe, say).
func NewRemote(cfg RemoteConfig) (*Remote, error) {
	if cfg.Store == nil {
		return nil, &ConfigError{Reason: "no object store given for the remote tier"}
	}
	if cfg.Limit < 0 {
		return nil, &ConfigError{Reason: "the remote spill limit is negative (" + formatBytes(cfg.Limit) + "); give 0 or more bytes"}
	}
	if cfg.CallTimeout < 0 {
		return nil, &ConfigError{Reason: "the remote call timeout is negative (" + cfg.CallTimeout.String() + "); give 0 for the default or a positive duration"}
	}
	if err := checkApplication(cfg.Application); err != nil {
		return nil, err
	}
	timeout := cfg.CallTimeout
	if timeout == 0 {
		timeout = RemoteCallTimeout
	}
	prefix := ApplicationPrefix + cfg.Application + "/" + DirPrefix + crand.Text() + "/"
	return &Remote{store: cfg.Store, prefix: prefix, limit: cfg.Limit, setting: cfg.LimitSetting, timeout: timeout}, nil
}

// Location names the store, as its ObjectStore does.
func (rt *Remote) Location() string { return rt.store.Location() }

// Prefix is the process's prefix under the store's location: every object of this Remote's
// files has a key that starts with it.
func (rt *Remote) Prefix() string { return rt.prefix }

// Used is the number of bytes in the live remote files of all managers sharing rt.
func (rt *Remote) Used() int64 { return rt.used.Load() }

// Limit is the bytes all remote files may hold together.
func (rt *Remote) Limit() int64 { return rt.limit }

// sealKey is the key that seals remote files framed by f: the Format's, or the process's key of
// RemoteKeyBits, made on the first remote file.
func (rt *Remote) sealKey(f *Format) (*chunkfile.Key, error) {
	if f.Key != nil {
		return f.Key, nil
	}
	rt.keyOnce.Do(func() { rt.key, rt.keyErr = ProcessKey(RemoteKeyBits) })
	return rt.key, rt.keyErr
}

func (rt *Remote) reserve(n int64) error {
	for {
		u := rt.used.Load()
		if n > rt.limit-u {
			return &LimitError{Limit: rt.limit, Used: u, Request: n, Setting: rt.setting, Remote: true}
		}
		if rt.used.CompareAndSwap(u, u+n) {
			return nil
		}
	}
}

func (rt *Remote) unreserve(n int64) { rt.used.Add(-n) }

// CallTimeout is the bound of each call to the store (RemoteConfig.CallTimeout).
func (rt *Remote) CallTimeout() time.Duration { return rt.timeout }

// callContext bounds one call to the store, retries included.
func (rt *Remote) callContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), rt.timeout)
}

// RemoteError is a call to the object store that failed: which call, on which object (its
// location, never a credential), and the store's cause.
type RemoteError struct {
	Op       string // put, upload part, complete upload, get, delete, list
	Location string
	Err      error
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("spill: remote %s %s: %v", e.Op, e.Location, e.Err)
}

func (e *RemoteError) Unwrap() error { return e.Err }

// partBuffers are the remote files' part buffers, reused across files.
var partBuffers = sync.Pool{New: func() any { b := make([]byte, 0, RemotePartSize); return &b }}

// remoteFile is the Handle of a remote file: an object written in order, in parts of
// RemotePartSize, then read by ranges. A full part is sent in the background while the next one
// fills, one part in flight at most: the writer waits for it only when the next part is full, or
// at finish. File.mu guards it (but the part in flight, which only its goroutine touches until
// its done is closed).
type remoteFile struct {
	rt       *Remote
	stats    *Stats // its manager's: bytes read are counted there
	key      string
	location string

	buf      *[]byte   // bytes not yet sent, less than one part; nil once finished or dead
	sent     int64     // bytes handed to parts, the one in flight included
	upload   Upload    // nil until the first full part
	inFlight *partSend // the part being sent; nil when none is
	parts    int
	finished bool  // the object exists whole: readable, and Delete removes it
	dead     error // a part or the completion failed: the upload was aborted, no more writes
}

// partSend is a part sent by a goroutine of its own; done is closed once err is set.
type partSend struct {
	buf  *[]byte
	err  error
	done chan struct{}
}

var _ Handle = (*remoteFile)(nil)

// singleThread is whether Go runs goroutines on one thread (GOMAXPROCS 1 at start: an executor
// limited to one core).
var singleThread = runtime.GOMAXPROCS(0) == 1

// yieldToBackground lets a request in flight until done (a part being sent, a span being
// fetched) move the bytes waiting in its socket. On one thread the caller's compressing or
// decoding would hold it until the scheduler preempts it, so the request and the caller would take
// turns instead of overlapping. Called once a chunk, a cheap call; with more threads, none.
func yieldToBackground(done <-chan struct{}) {
	if !singleThread {
		return
	}
	select {
	case <-done:
	default:
		runtime.Gosched()
	}
}

func newRemoteFile(rt *Remote, stats *Stats, key string) *remoteFile {
	return &remoteFile{rt: rt, stats: stats, key: key, location: rt.store.Location() + "/" + key, buf: partBuffers.Get().(*[]byte)}
}

// WriteAt appends p; off must be the bytes written so far (a Writer appends only). A full part
// is sent in the background; if it fails, the next WriteAt that fills a part, or finish, returns
// its error, the upload is aborted and the file takes no more writes.
func (h *remoteFile) WriteAt(p []byte, off int64) (int, error) {
	switch {
	case h.dead != nil:
		return 0, h.dead
	case h.buf == nil:
		return 0, ErrFinished
	case off != h.sent+int64(len(*h.buf)):
		return 0, fmt.Errorf("spill: remote file %s is written in order: a write at %d, its end is at %d", h.location, off, h.sent+int64(len(*h.buf)))
	}
	if ps := h.inFlight; ps != nil {
		select {
		case <-ps.done: // a part that failed fails this write, not only the next part's
			if err := h.wait(); err != nil {
				return 0, h.fail(err)
			}
		default:
			yieldToBackground(ps.done)
		}
	}
	for rest := p; len(rest) > 0; {
		b := *h.buf
		take := min(len(rest), RemotePartSize-len(b))
		*h.buf = append(b, rest[:take]...)
		rest = rest[take:]
		if len(*h.buf) == RemotePartSize {
			if err := h.sendPart(); err != nil {
				return 0, err
			}
		}
	}
	return len(p), nil
}

// sendPart starts sending the buffer as the next part, in the background, once the part before
// it is sent, starting the upload on the first; the file then fills a buffer of its own again.
func (h *remoteFile) sendPart() error {
	if err := h.wait(); err != nil {
		return h.fail(err)
	}
	if h.upload == nil {
		ctx, cancel := h.rt.callContext()
		u, err := h.rt.store.StartUpload(ctx, h.key)
		cancel()
		if err != nil {
			return h.fail(&RemoteError{Op: "start upload", Location: h.location, Err: err})
		}
		h.upload = u
	}
	ps := &partSend{buf: h.buf, done: make(chan struct{})}
	u, n := h.upload, h.parts+1
	go func() {
		defer close(ps.done)
		ctx, cancel := h.rt.callContext()
		defer cancel()
		if err := u.WritePart(ctx, n, *ps.buf); err != nil {
			ps.err = &RemoteError{Op: "upload part", Location: h.location, Err: err}
		}
	}()
	h.inFlight = ps
	h.parts++
	h.sent += int64(len(*h.buf))
	h.buf = partBuffers.Get().(*[]byte)
	return nil
}

// wait waits for the part in flight, if any, gives its buffer back, and returns its error.
func (h *remoteFile) wait() error {
	ps := h.inFlight
	if ps == nil {
		return nil
	}
	<-ps.done
	h.inFlight = nil
	*ps.buf = (*ps.buf)[:0]
	partBuffers.Put(ps.buf)
	return ps.err
}

// finish sends what is buffered and makes the object: one PUT if no part was sent, else the
// last part and the upload's completion.
func (h *remoteFile) finish() error {
	switch {
	case h.dead != nil:
		return h.dead
	case h.finished:
		return nil
	}
	if h.upload == nil {
		ctx, cancel := h.rt.callContext()
		defer cancel()
		if err := h.rt.store.Put(ctx, h.key, *h.buf); err != nil {
			return h.fail(&RemoteError{Op: "put", Location: h.location, Err: err})
		}
		h.sent += int64(len(*h.buf))
	} else {
		if len(*h.buf) > 0 {
			if err := h.sendPart(); err != nil {
				return err
			}
		}
		if err := h.wait(); err != nil {
			return h.fail(err)
		}
		ctx, cancel := h.rt.callContext()
		defer cancel()
		if err := h.upload.Complete(ctx); err != nil {
			return h.fail(&RemoteError{Op: "complete upload", Location: h.location, Err: err})
		}
		h.upload = nil
	}
	h.finished = true
	h.dropBuffer()
	return nil
}

// fail aborts the upload, if one was started (once its part in flight is done), and makes err the
// answer to every later write. An abort that fails (the store is down, say) keeps the upload, for
// remove to abort again.
func (h *remoteFile) fail(err error) error {
	_ = h.abort()
	h.dead = err
	h.dropBuffer()
	return err
}

// abort aborts the upload in progress, if any, once its part in flight is done (a part that
// lands after the abort would be left in the store). If the abort fails the upload is kept: its
// parts are in the store, and only an abort (or the bucket's lifecycle rule for incomplete
// multipart uploads) removes them.
func (h *remoteFile) abort() error {
	_ = h.wait() // the upload fails either way
	if h.upload == nil {
		return nil
	}
	ctx, cancel := h.rt.callContext()
	defer cancel()
	if err := h.upload.Abort(ctx); err != nil {
		return &RemoteError{Op: "abort upload", Location: h.location, Err: err}
	}
	h.upload = nil
	return nil
}

func (h *remoteFile) dropBuffer() {
	if h.buf != nil {
		*h.buf = (*h.buf)[:0]
		partBuffers.Put(h.buf)
		h.buf = nil
	}
}

// ReadAt reads by one ranged GET; only a finished file can be read.
func (h *remoteFile) ReadAt(p []byte, off int64) (int, error) {
	return h.readAt(context.Background(), p, off)
}

// readAt is ReadAt bounded by ctx as well as by the call timeout.
func (h *remoteFile) readAt(ctx context.Context, p []byte, off int64) (int, error) {
	if !h.finished {
		return 0, ErrNotFinished
	}
	ctx, cancel := context.WithTimeout(ctx, h.rt.timeout)
	defer cancel()
	n, err := h.rt.store.ReadAt(ctx, h.key, p, off)
	h.stats.RemoteBytesRead.Add(int64(n))
	if err != nil && !errors.Is(err, io.EOF) {
		return n, &RemoteError{Op: "get", Location: h.location, Err: err}
	}
	return n, err
}

// Truncate serves File's undo of a failed write: a remote file that failed was aborted and
// holds nothing, so there is nothing past size to remove.
func (h *remoteFile) Truncate(size int64) error {
	if h.dead == nil && h.buf != nil && size != h.sent+int64(len(*h.buf)) {
		return fmt.Errorf("spill: remote file %s cannot be truncated to %d bytes", h.location, size)
	}
	return nil
}

// Close drops the buffer and aborts an unfinished upload; the object, if any, stays until remove,
// and so does an upload whose abort failed.
func (h *remoteFile) Close() error {
	err := h.abort()
	h.dropBuffer()
	return err
}

// remove aborts an upload still in progress (one whose abort failed before included) and deletes
// the object, if one was made. While either fails the file keeps its bytes counted, and a later
// Release or the manager's Close tries again.
func (h *remoteFile) remove() error {
	h.dropBuffer()
	if err := h.abort(); err != nil {
		return err
	}
	if !h.finished {
		return nil
	}
	ctx, cancel := h.rt.callContext()
	defer cancel()
	if err := h.rt.store.Delete(ctx, h.key); err != nil {
		return &RemoteError{Op: "delete", Location: h.location, Err: err}
	}
	h.finished = false
	return nil
}

// createRemote creates a remote file under the manager's prefix in the store, making the
// prefix's name on the first (a prefix costs no call to the store). m.mu must be held.
func (m *Manager) createRemote(s *spillState) *File {
	if s.remotePrefix == "" {
		s.remotePrefix = m.remote.prefix + DirPrefix + crand.Text() + "/"
	}
	name := "spill-" + crand.Text()
	h := newRemoteFile(m.remote, m.stats(), s.remotePrefix+name)
	f := &File{m: m, name: name, path: h.location, h: h, obj: h}
	s.files[f] = struct{}{}
	if !s.spilled {
		s.spilled = true
		m.stats().PlansSpilled.Add(1)
	}
	m.stats().FilesCreated.Add(1)
	m.stats().RemoteFilesCreated.Add(1)
	return f
}

// removeRemotePrefix deletes every object left under the manager's prefix (a delete that failed
// at a file's release, say), after its files were discarded.
func (m *Manager) removeRemotePrefix(prefix string) error {
	ctx, cancel := m.remote.callContext()
	defer cancel()
	_, err := removeUnder(ctx, m.remote.store, prefix)
	return err
}
