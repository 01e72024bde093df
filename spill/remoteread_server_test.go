//go:build s3server

package spill_test

// How the remote tier moves bytes, against the real server through the fault proxy (make
// test-remote): a Reader fetches a remote file in spans, the next one ahead, and holds no more
// than RemoteReaderMemory of them; a Writer's full part is sent while the next one fills; a merge
// of remote runs (plan/extsort) counts the spans in its budget.

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/plan/extsort"
	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
	"github.com/spillway/spillway/spill/internal/faultproxy"
)

// A file of several spans reads back whole in order by one GET per span (not one per chunk),
// synchronously or with read-ahead, and from an offset after a seek; the Reader never holds more
// than its chunk buffers and RemoteReaderMemory.
func TestRemoteReaderReadsBySpans(t *testing.T) {
	direct := testStore(t)
	p := faultProxy(t)
	m, _ := remoteManager(t, []string{t.TempDir()}, givenUp(), newRemote(t, proxied(t, p, direct), 1<<30), nil)
	data := spillData(5<<20+12345, 31)
	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	writeFramed(t, w, data)
	f := w.File()
	const span = 1 << 20
	spans := int((f.Size() + span - 1) / span)
	require.Greater(t, spans, 4)

	for _, sync := range []bool{true, false} {
		before := len(p.Seen(faultproxy.Get))
		r, err := f.OpenReader(spill.ReaderOptions{Synchronous: sync, RemoteSpan: span})
		require.NoError(t, err)
		bound := 2*chunkfile.ReaderMemory(chunkfile.DefaultChunkSize) + spill.RemoteReaderMemory(span, f.Size())
		var got bytes.Buffer
		buf := make([]byte, 100<<10)
		for {
			n, err := r.Read(buf)
			got.Write(buf[:n])
			if sync { // with read-ahead the chunk buffers are the read-ahead's to change meanwhile
				assert.LessOrEqual(t, r.Memory(), bound, "the chunk buffers and two spans at most")
			}
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
		}
		require.NoError(t, r.Close())
		assert.Zero(t, r.Memory(), "Close gives every buffer back")
		assert.Equal(t, data, got.Bytes(), "synchronous %v", sync)
		assert.Len(t, p.Seen(faultproxy.Get)[before:], spans, "one GET a span, synchronous %v", sync)
	}

	r, err := f.OpenReader(spill.ReaderOptions{RemoteSpan: span})
	require.NoError(t, err)
	at := int64(3<<20 + 777)
	_, err = r.Seek(at, io.SeekStart)
	require.NoError(t, err)
	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	assert.Equal(t, data[at:], rest, "from an offset after a seek")
}

// Closing a Reader whose next span is being fetched does not wait for the store: the fetch is
// cancelled and Close returns, its buffers given back; a Reader of a released file fails with
// ErrFileReleased.
func TestRemoteReaderCloseCancelsTheSpanInFlight(t *testing.T) {
	direct := testStore(t)
	p := faultProxy(t)
	m, _ := remoteManager(t, []string{t.TempDir()}, givenUp(), newRemote(t, proxied(t, p, direct), 1<<30), nil)
	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	writeFramed(t, w, spillData(3<<20, 32))
	f := w.File()

	first := true
	held := p.Inject(func(r *http.Request) bool {
		if !faultproxy.Get(r) {
			return false
		}
		hold := !first // every GET after the first span's
		first = false
		return hold
	}, 0, faultproxy.Fault{Delay: time.Hour})
	r, err := f.OpenReader(spill.ReaderOptions{Synchronous: true, RemoteSpan: 1 << 20})
	require.NoError(t, err)
	_, err = r.Read(make([]byte, 1000))
	require.NoError(t, err, "the first span came")
	require.Eventually(t, func() bool { return held.Injected() == 1 }, hangBound, 10*time.Millisecond, "the next span is being fetched")
	require.NoError(t, within(t, hangBound, r.Close), "Close does not wait for the held GET")
	assert.Zero(t, r.Memory())
	p.Clear()

	r, err = f.OpenReader(spill.ReaderOptions{RemoteSpan: 1 << 20})
	require.NoError(t, err)
	require.NoError(t, f.Release())
	_, err = io.ReadAll(r)
	assert.ErrorIs(t, err, spill.ErrFileReleased)
	require.NoError(t, r.Close())
}

// A full part goes in the background: a Write that fills a part returns while the part is still
// on its way (held by the proxy here), and the part's failure (its call timeout) is the answer of
// Close, after which the upload is aborted and nothing is left.
func TestRemotePartIsSentWhileTheNextFills(t *testing.T) {
	direct := testStore(t)
	p := faultProxy(t)
	const timeout = 4 * time.Second
	m, _ := remoteManager(t, []string{t.TempDir()}, givenUp(), faultRemote(t, proxied(t, p, direct), timeout), nil)
	held := p.Inject(faultproxy.PartUpload, 0, faultproxy.Fault{Delay: time.Hour})
	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	f := w.File()
	require.NoError(t, within(t, hangBound, func() error {
		_, err := w.Write(spillData(spill.RemotePartSize+1<<20, 33))
		return err
	}), "the Write does not wait for its part")
	require.Eventually(t, func() bool { return held.Injected() == 1 }, hangBound, 10*time.Millisecond, "the part is on its way")
	err = within(t, hangBound, w.Close)
	requireRemoteError(t, err, "upload part", f)
	w.Discard()
	require.NoError(t, f.Release())
	p.Clear()
	assert.Empty(t, objects(t, direct))
	assert.Empty(t, backendFiles(t, direct), "the upload was aborted once its part was done")
}

// The external sort's merge of runs that are all remote (no local root takes a file): the output
// is every record in order, and the sort's memory, the runs' spans included, stays within its
// budget while it merges.
func TestRemoteRunsMergeWithinTheBudget(t *testing.T) {
	s := testStore(t)
	m, shared := remoteManager(t, []string{t.TempDir()}, givenUp(), newRemote(t, s, 1<<30), lz4Format())
	const budget = 2 << 20
	sorter, err := extsort.New(m, budget)
	require.NoError(t, err)
	defer sorter.Close()
	keys := bytes.Fields(spillData(6<<20, 34)) // 65-byte words: many equal keys, many runs
	var batch []byte
	for i, k := range keys {
		batch = extsort.AppendRecord(batch, k[max(0, len(k)-8):], k)
		if len(batch) > 1<<20 || i == len(keys)-1 {
			require.NoError(t, sorter.Add(batch))
			batch = batch[:0]
		}
	}
	st := sorter.Stats()
	require.Greater(t, st.Runs, int64(4), "the sort spilled several runs")
	assert.Equal(t, st.Runs, shared.Stats.RemoteFilesCreated.Load(), "every run in the store")

	dst := make([]byte, 256<<10)
	var prev []byte
	count := 0
	for {
		n, err := sorter.Next(dst)
		require.NoError(t, err)
		if n == 0 {
			break
		}
		assert.LessOrEqual(t, sorter.MemoryUsed(), int64(budget), "the runs' readers and their spans fit in the budget")
		for rest := dst[:n]; len(rest) > 0; count++ {
			kl, vl := int(rest[0])|int(rest[1])<<8|int(rest[2])<<16|int(rest[3])<<24, int(rest[4])|int(rest[5])<<8|int(rest[6])<<16|int(rest[7])<<24
			key := rest[8 : 8+kl]
			require.LessOrEqual(t, string(prev), string(key), "in order")
			prev = append(prev[:0], key...)
			rest = rest[8+kl+vl:]
		}
	}
	assert.Equal(t, len(keys), count, "every record")
}
