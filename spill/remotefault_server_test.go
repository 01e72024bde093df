//go:build s3server

package spill_test

// The remote tier when its store fails, against real servers (make test-remote): an s3proxy of
// the test's own, killed with SIGKILL mid-upload and mid-read and started again on the same port
// and data (spill/internal/s3server); and, for what a real server cannot do on demand (answer
// 503 SlowDown, hold a response, cut or stall a body), the fault proxy in front of the shared
// server (spill/internal/faultproxy), which passes every other request to it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
	"github.com/spillway/spillway/spill/internal/faultproxy"
	"github.com/spillway/spillway/spill/internal/s3server"
	"github.com/spillway/spillway/spill/s3store"
)

// hangBound bounds every call a test expects to fail: a failure must come as an error, never as
// a hang of the test.
const hangBound = 60 * time.Second

// within runs call and returns its error, failing the test if it has not returned in d.
func within(t *testing.T, d time.Duration, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("the call did not return within %v: it hangs", d)
		return nil
	}
}

// ownStore is a store on a server of the test's own (its whole bucket is the test's).
func ownStore(t *testing.T, srv *s3server.Server) *s3store.Store {
	t.Helper()
	s, err := s3store.New(s3store.Config{
		URI: "s3a://" + s3server.Bucket + "/spill", Endpoint: srv.Endpoint,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Region: "us-east-1", PathStyle: true,
	})
	require.NoError(t, err)
	return s
}

// ownBackend is every file the server's filesystem backend holds in the bucket, by path under
// it. s3proxy keeps an upload in progress as files of its own beside the objects: a file named by
// the upload id, and .mpus-<upload id>-<key>-stub and .mpus-<upload id>-<key>-<part number> for
// each part sent. S3 lists none of them, and the backend answers 501 to ListMultipartUploads, so
// this is the only place where the parts an abort failed to drop show.
func ownBackend(t *testing.T, srv *s3server.Server) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(srv.Data, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(srv.Data, path)
		files = append(files, rel)
		return err
	})
	require.NoError(t, err)
	return files
}

// faultRemote is a Remote whose calls are bounded by timeout.
func faultRemote(t *testing.T, s spill.ObjectStore, timeout time.Duration) *spill.Remote {
	t.Helper()
	rt, err := spill.NewRemote(spill.RemoteConfig{Store: s, Limit: 1 << 30, LimitSetting: "test.remote.maxSize",
		Application: "test-faults", CallTimeout: timeout})
	require.NoError(t, err)
	return rt
}

// requireRemoteError requires err to be a *spill.RemoteError of the call op on the file f.
func requireRemoteError(t *testing.T, err error, op string, f *spill.File) *spill.RemoteError {
	t.Helper()
	var re *spill.RemoteError
	require.ErrorAs(t, err, &re, "a *spill.RemoteError: %v", err)
	assert.Equal(t, op, re.Op, "the failed call: %v", err)
	assert.Equal(t, f.Path(), re.Location, "the object: %v", err)
	assert.Contains(t, err.Error(), "remote "+op+" "+f.Path(), "the message names the call and the object")
	return re
}

// The server is killed (SIGKILL) while a file's multipart upload is in progress, one part sent:
// the next part fails with an error naming the call and the object, within the client's retries
// (no hang, well inside the call timeout), and the file takes no more writes. The upload's abort
// fails too while the server is down, so its part stays in the backend; releasing the file then
// fails, naming the abort, and keeps its bytes counted. Once the server is back, releasing
// again aborts the upload: no object is listed, no part is left in the backend, every budget is 0.
func TestRemoteServerKilledMidUpload(t *testing.T) {
	srv := s3server.Start(t)
	s := ownStore(t, srv)
	rt := faultRemote(t, s, 30*time.Second)
	m, shared := remoteManager(t, []string{t.TempDir()}, givenUp(), rt, nil)

	data := spillData(3*spill.RemotePartSize, 11)
	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	f := w.File()
	require.True(t, f.Remote())
	first := spill.RemotePartSize + 1<<20
	_, err = w.Write(data[:first])
	require.NoError(t, err)
	spill.RemotePartSent(f) // sent in the background
	require.Empty(t, objects(t, s), "no object before the upload completes")
	require.NotEmpty(t, ownBackend(t, srv), "the upload's first part is in the backend")

	srv.Kill()
	start := time.Now()
	err = within(t, hangBound, func() error {
		if _, err := w.Write(data[first:]); err != nil {
			return err
		}
		return w.Close()
	})
	elapsed := time.Since(start)
	re := requireRemoteError(t, err, "upload part", f)
	assert.Less(t, elapsed, rt.CallTimeout(), "the client's retries end it, not the call timeout")
	assert.NotErrorIs(t, re, context.DeadlineExceeded)
	_, err = w.Write([]byte("more"))
	assert.Error(t, err, "a file whose upload failed takes no more writes")
	w.Discard()

	used := m.Used()
	assert.Positive(t, used)
	err = within(t, hangBound, f.Release)
	requireRemoteError(t, err, "abort upload", f)
	assert.Equal(t, used, m.Used(), "a file whose parts may be in the store stays counted")
	assert.Equal(t, used, rt.Used())

	srv.Restart()
	left := ownBackend(t, srv)
	t.Logf("the backend after the restart: %q", left)
	assert.NotEmpty(t, left, "the part sent before the kill outlived it")
	require.NoError(t, f.Release(), "with the server back, release aborts the upload")
	assert.Empty(t, objects(t, s))
	assert.Empty(t, ownBackend(t, srv), "no part of the aborted upload is left in the backend")
	assert.Zero(t, m.Used())
	assert.Zero(t, rt.Used())
	assert.Zero(t, shared.Used())
	require.NoError(t, m.Close())
	assert.Empty(t, ownBackend(t, srv))
}

// The server is killed while a reader of a three-part remote file is part way: the read fails
// with an error naming the get and the object, within the client's retries. Once the server is
// back, the file reads back whole and verified (sealed chunks), and its release leaves nothing.
func TestRemoteServerKilledMidRead(t *testing.T) {
	srv := s3server.Start(t)
	s := ownStore(t, srv)
	rt := faultRemote(t, s, 30*time.Second)
	m, shared := remoteManager(t, []string{t.TempDir()}, givenUp(), rt, nil)

	data := spillData(2*spill.RemotePartSize+3<<20, 12)
	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	f := w.File()
	writeFramed(t, w, data)
	require.Len(t, objects(t, s), 1)

	r, err := f.OpenReader(spill.ReaderOptions{})
	require.NoError(t, err)
	head := make([]byte, 1<<20)
	_, err = io.ReadFull(r, head)
	require.NoError(t, err)
	require.Equal(t, data[:len(head)], head)

	srv.Kill()
	start := time.Now()
	var read int64
	err = within(t, hangBound, func() error {
		n, err := io.Copy(io.Discard, r)
		read = n
		return err
	})
	require.Error(t, err, "the read of a file whose server is gone fails")
	requireRemoteError(t, err, "get", f)
	assert.Less(t, time.Since(start), rt.CallTimeout(), "the client's retries end it, not the call timeout")
	assert.Less(t, int64(len(head))+read, int64(len(data)), "the reader did not reach the end")
	require.NoError(t, r.Close())

	srv.Restart()
	assert.Equal(t, data, readAll(t, f, spill.ReaderOptions{}), "once the server is back the file reads back whole")
	require.NoError(t, f.Release())
	assert.Empty(t, objects(t, s))
	assert.Empty(t, ownBackend(t, srv))
	assert.Zero(t, m.Used())
	assert.Zero(t, shared.Used())
}

// The server restarts (killed, started again on its port and data) between a run's write and
// its read: the file written before reads back whole, in order and from offsets in each part,
// verified by its seal; release removes it.
func TestRemoteServerRestartedBetweenWriteAndRead(t *testing.T) {
	srv := s3server.Start(t)
	s := ownStore(t, srv)
	rt := faultRemote(t, s, 30*time.Second)
	m, _ := remoteManager(t, []string{t.TempDir()}, givenUp(), rt, nil)

	data := spillData(2*spill.RemotePartSize+5<<20, 13)
	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	f := w.File()
	writeFramed(t, w, data)

	srv.Kill()
	srv.Restart()
	assert.Equal(t, data, readAll(t, f, spill.ReaderOptions{Synchronous: true}))
	r, err := f.OpenReader(spill.ReaderOptions{})
	require.NoError(t, err)
	for _, off := range []int64{2*spill.RemotePartSize + 77, 12345, spill.RemotePartSize - 3} {
		_, err := r.Seek(off, io.SeekStart)
		require.NoError(t, err)
		got := make([]byte, 300000)
		_, err = io.ReadFull(r, got)
		require.NoError(t, err)
		require.Equal(t, data[off:off+int64(len(got))], got, "the range at %d", off)
	}
	require.NoError(t, r.Close())
	require.NoError(t, f.Release())
	assert.Empty(t, objects(t, s))
	assert.Empty(t, ownBackend(t, srv))
}

// readThrough opens a reader of f and reads it to its end, returning the first error: that of
// the open (which reads the file's header) or of a read.
func readThrough(f *spill.File, opts spill.ReaderOptions) error {
	r, err := f.OpenReader(opts)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, r)
	return errors.Join(err, r.Close())
}

// chunkGet is a GET of more than 64 KiB: a chunk's, not a header's.
func chunkGet(r *http.Request) bool {
	var from, to int64
	_, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &from, &to)
	return faultproxy.Get(r) && err == nil && to-from >= 64<<10
}

// proxied is a store through the fault proxy p under the same bucket and prefix as direct, the
// test's store on the shared server, through which the test checks what the bucket holds.
func proxied(t testing.TB, p *faultproxy.Proxy, direct *s3store.Store) *s3store.Store {
	t.Helper()
	return proxiedCounting(t, p, direct, nil)
}

// proxiedCounting is proxied with onRetry called for each answer the client retries.
func proxiedCounting(t testing.TB, p *faultproxy.Proxy, direct *s3store.Store, onRetry func()) *s3store.Store {
	t.Helper()
	s, err := s3store.New(s3store.Config{
		URI: direct.Location(), Endpoint: p.URL, AccessKey: envOr(t, "SPILLWAY_S3_ACCESS_KEY"),
		SecretKey: envOr(t, "SPILLWAY_S3_SECRET_KEY"), Region: "us-east-1", PathStyle: true, OnRetry: onRetry,
	})
	require.NoError(t, err)
	return s
}

func envOr(t testing.TB, key string) string {
	t.Helper()
	v := os.Getenv(key)
	require.NotEmpty(t, v, "%s is not set: run through project/s3-server.sh", key)
	return v
}

func faultProxy(t testing.TB) *faultproxy.Proxy {
	t.Helper()
	return faultproxy.New(t, envOr(t, "SPILLWAY_S3_ENDPOINT"))
}

// A store that does not answer: a part upload held far past the call timeout fails at the
// timeout, with an error naming the call and the object whose cause is the deadline, and the
// upload is aborted at once (nothing left in the backend). A read whose response is held, and
// one whose body stalls part way, fail so too. A store that is slow but answers within the bound
// is no failure.
func TestRemoteSlowServerFailsWithinTheCallTimeout(t *testing.T) {
	const timeout = 4 * time.Second // an 8 MiB part on a busy machine takes a second or so
	direct := testStore(t)
	p := faultProxy(t)
	rt := faultRemote(t, proxied(t, p, direct), timeout)
	m, _ := remoteManager(t, []string{t.TempDir()}, givenUp(), rt, nil)

	// Slow, within the bound: every part and the completion answered 700 ms late.
	slowly := p.Inject(func(r *http.Request) bool { return faultproxy.PartUpload(r) || faultproxy.CompleteUpload(r) },
		0, faultproxy.Fault{Delay: 700 * time.Millisecond})
	data := spillData(2*spill.RemotePartSize+1<<20, 14)
	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	written := w.File()
	writeFramed(t, w, data)
	assert.Equal(t, 4, slowly.Injected(), "three parts and the completion were held")
	p.Clear()

	// A part held past the bound.
	p.Inject(faultproxy.PartUpload, 0, faultproxy.Fault{Delay: time.Hour})
	w, err = m.CreateFramedFile()
	require.NoError(t, err)
	f := w.File()
	start := time.Now()
	err = within(t, hangBound, func() error { // the part goes in the background: Close waits for it
		if _, err := w.Write(spillData(spill.RemotePartSize+1, 15)); err != nil {
			return err
		}
		return w.Close()
	})
	elapsed := time.Since(start)
	re := requireRemoteError(t, err, "upload part", f)
	assert.ErrorIs(t, re, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, elapsed, timeout, "the call was given its whole bound")
	assert.Less(t, elapsed, timeout+5*time.Second, "and no more than its bound, and the abort")
	assert.Len(t, objects(t, direct), 1, "only the file written before")
	assert.Len(t, backendFiles(t, direct), 1, "the held upload was aborted: none of its parts is left")
	w.Discard()
	require.NoError(t, f.Release())
	p.Clear()

	// A read whose response is held, then one whose body stalls after 1000 bytes.
	for _, fault := range []faultproxy.Fault{{Delay: time.Hour}, {StallBody: true, After: 1000}} {
		p.Inject(faultproxy.Get, 0, fault)
		start := time.Now()
		err = within(t, hangBound, func() error { return readThrough(written, spill.ReaderOptions{Synchronous: true}) })
		elapsed := time.Since(start)
		re := requireRemoteError(t, err, "get", written)
		assert.ErrorIs(t, re, context.DeadlineExceeded, "%+v", fault)
		assert.GreaterOrEqual(t, elapsed, timeout)
		assert.Less(t, elapsed, timeout+5*time.Second)
		p.Clear()
	}
	assert.Equal(t, data, readAll(t, written, spill.ReaderOptions{}), "the store answering again, the file reads back")
	require.NoError(t, m.Close())
	assert.Empty(t, objects(t, direct))
	assert.Empty(t, backendFiles(t, direct))
}

// requireSlowDown requires the store's error under err to be a 503 SlowDown.
func requireSlowDown(t *testing.T, err error) {
	t.Helper()
	var resp minio.ErrorResponse
	require.ErrorAs(t, err, &resp, "the store's own error: %v", err)
	assert.Equal(t, "SlowDown", resp.Code)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}

// A store that throttles (503 SlowDown) fewer times in a row than the client's retries: every
// kind of call of a write and a read is retried with backoff and succeeds; the file reads back
// whole. Each throttled call was sent exactly once more than it was throttled, and the store
// reported each retry.
func TestRemoteThrottledCallsAreRetried(t *testing.T) {
	direct := testStore(t)
	p := faultProxy(t)
	var retries atomic.Int64
	rt := faultRemote(t, proxiedCounting(t, p, direct, func() { retries.Add(1) }), 30*time.Second)
	m, _ := remoteManager(t, []string{t.TempDir()}, givenUp(), rt, nil)

	n := s3store.MaxRetries - 1
	kinds := map[string]func(*http.Request) bool{
		"start upload": faultproxy.StartUpload, "part": faultproxy.PartUpload,
		"complete": faultproxy.CompleteUpload, "put": faultproxy.Put, "get": faultproxy.Get,
	}
	rules := map[string]*faultproxy.Rule{}
	for kind, match := range kinds {
		rules[kind] = p.Inject(match, n, faultproxy.SlowDown)
	}
	start := time.Now()
	big := spillData(2*spill.RemotePartSize+1<<20, 16)
	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	writeFramed(t, w, big)
	small := spillData(100<<10, 17)
	ws, err := m.CreateFramedFile()
	require.NoError(t, err)
	writeFramed(t, ws, small)
	assert.Equal(t, big, readAll(t, w.File(), spill.ReaderOptions{Synchronous: true}))
	assert.Equal(t, small, readAll(t, ws.File(), spill.ReaderOptions{}))
	elapsed := time.Since(start)
	for kind, r := range rules {
		assert.Equal(t, n, r.Injected(), "%s was throttled %d times", kind, n)
	}
	assert.Equal(t, int64(n*len(kinds)), retries.Load(), "every throttled answer counts as a retry")
	// The first part: n answers of SlowDown, then the one that took it; then two parts more.
	assert.Len(t, p.Seen(faultproxy.PartUpload), n+1+2)
	assert.Len(t, p.Seen(faultproxy.StartUpload), n+1)
	assert.Less(t, elapsed, rt.CallTimeout(), "the backoff is bounded")
	require.NoError(t, m.Close())
	assert.Empty(t, objects(t, direct))
	assert.Empty(t, backendFiles(t, direct))
}

// A store that keeps throttling: the write fails once the client's retries are spent (exactly
// s3store.MaxRetries requests, with backoff between them, well inside the call timeout), with an
// error naming the call and the object and carrying the store's SlowDown; the upload is
// aborted. A read throttled so fails the same way.
func TestRemoteThrottlingBeyondTheRetriesFails(t *testing.T) {
	direct := testStore(t)
	p := faultProxy(t)
	rt := faultRemote(t, proxied(t, p, direct), 30*time.Second)
	m, _ := remoteManager(t, []string{t.TempDir()}, givenUp(), rt, nil)

	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	written := w.File()
	data := spillData(1<<20, 18)
	writeFramed(t, w, data)

	parts := p.Inject(faultproxy.PartUpload, 0, faultproxy.SlowDown)
	w, err = m.CreateFramedFile()
	require.NoError(t, err)
	f := w.File()
	start := time.Now()
	err = within(t, hangBound, func() error { // the part goes in the background: Close waits for it
		if _, err := w.Write(spillData(spill.RemotePartSize+1, 19)); err != nil {
			return err
		}
		return w.Close()
	})
	elapsed := time.Since(start)
	requireRemoteError(t, err, "upload part", f)
	requireSlowDown(t, err)
	assert.Equal(t, s3store.MaxRetries, parts.Injected(), "the part was sent MaxRetries times, no more")
	seen := p.Seen(faultproxy.PartUpload)
	require.Len(t, seen, s3store.MaxRetries)
	// Backoff: each wait is at most min(1 s, 200 ms * 2^i) with full jitter (minio-go), so the
	// retries take at most about 3.4 s beside the requests themselves.
	assert.Less(t, seen[len(seen)-1].At.Sub(seen[0].At), 5*time.Second)
	assert.Less(t, elapsed, rt.CallTimeout(), "the retries' bound ends it, not the call timeout")
	assert.Len(t, p.Seen(faultproxy.AbortUpload), 1, "the upload was aborted")
	assert.Len(t, backendFiles(t, direct), 1, "no part of it is left")
	w.Discard()
	require.NoError(t, f.Release())

	gets := p.Inject(faultproxy.Get, 0, faultproxy.SlowDown)
	err = within(t, hangBound, func() error { return readThrough(written, spill.ReaderOptions{Synchronous: true}) })
	requireRemoteError(t, err, "get", written)
	requireSlowDown(t, err)
	assert.Equal(t, s3store.MaxRetries, gets.Injected(), "the read's get was sent MaxRetries times")
	p.Clear()
	assert.Equal(t, data, readAll(t, written, spill.ReaderOptions{}))
	require.NoError(t, m.Close())
	assert.Empty(t, objects(t, direct))
	assert.Empty(t, backendFiles(t, direct))
}

// A response whose body is cut part way (the connection dropped, as a server dying mid-response
// drops it): the read fails with an error naming the get and the object, never as a file that
// ends early, which a reader would take for a cut or corrupt file.
func TestRemoteCutResponseIsARemoteError(t *testing.T) {
	direct := testStore(t)
	p := faultProxy(t)
	rt := faultRemote(t, proxied(t, p, direct), 30*time.Second)
	m, _ := remoteManager(t, []string{t.TempDir()}, givenUp(), rt, nil)
	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	data := spillData(1<<20, 20)
	writeFramed(t, w, data)

	cut := p.Inject(chunkGet, 1, faultproxy.Fault{CutBody: true, After: 1000})
	err = within(t, hangBound, func() error { return readThrough(w.File(), spill.ReaderOptions{Synchronous: true}) })
	require.Equal(t, 1, cut.Injected(), "a chunk's get was cut")
	requireRemoteError(t, err, "get", w.File())
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Contains(t, err.Error(), "the response ended after 1000 of its")
	var format *chunkfile.FormatError
	assert.NotErrorAs(t, err, &format, "not a file that was cut")
	assert.Equal(t, data, readAll(t, w.File(), spill.ReaderOptions{}), "the object itself is whole")
	require.NoError(t, m.Close())
	assert.Empty(t, objects(t, direct))
}
