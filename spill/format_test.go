package spill_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
)

// formats is every codec, sealed and not.
func formats(t *testing.T) map[string]spill.Format {
	t.Helper()
	zstd, err := chunkfile.Zstd(3)
	require.NoError(t, err)
	key, err := spill.ProcessKey(256)
	require.NoError(t, err)
	out := map[string]spill.Format{}
	for name, c := range map[string]chunkfile.Codec{"none": chunkfile.None, "lz4": chunkfile.LZ4, "zstd": zstd} {
		out[name+"/plain"] = spill.Format{Codec: c, ChunkSize: 4 << 10}
		out[name+"/sealed"] = spill.Format{Codec: c, Key: key, ChunkSize: 4 << 10}
	}
	return out
}

func formatManager(t *testing.T, root string, limit int64, shared *spill.Shared, f spill.Format) *spill.Manager {
	t.Helper()
	roots, err := spill.NewRoots([]string{root})
	require.NoError(t, err)
	m, err := spill.New(spill.Config{Roots: roots, Limit: limit, LimitSetting: "test.limit", Shared: shared, SharedLimit: 1 << 40, Format: &f})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// compressible data: text with repeats, so lz4 and zstd shrink it.
func compressible(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	for b.Len() < n {
		fmt.Fprintf(&b, "row %d|%s|%d\n", r.IntN(1000), []string{"AIR", "RAIL", "SHIP", "TRUCK"}[r.IntN(4)], r.IntN(50))
	}
	return b.Bytes()[:n]
}

func TestFramedRoundTripEveryFormat(t *testing.T) {
	for name, f := range formats(t) {
		t.Run(name, func(t *testing.T) {
			testFramedRoundTrip(t, f, spill.FramedOptions{})
		})
	}
}

func testFramedRoundTrip(t *testing.T, f spill.Format, opts spill.FramedOptions) {
	for _, size := range []int{0, 1, 4 << 10, 4<<10 + 1, 100_000} {
		shared := new(spill.Shared)
		root := t.TempDir()
		m := formatManager(t, root, 1<<30, shared, f)
		data := compressible(size)
		w, err := m.CreateFramedFileWith(opts)
		require.NoError(t, err)
		// In uneven pieces, so that writes straddle chunk boundaries.
		for p := data; len(p) > 0; {
			k := min(len(p), 1+len(p)%3001)
			_, err := w.Write(p[:k])
			require.NoError(t, err)
			p = p[k:]
		}
		require.NoError(t, w.Close())
		assert.Equal(t, int64(size), w.LogicalSize())
		st, err := os.Stat(w.File().Path())
		require.NoError(t, err)
		assert.Equal(t, st.Size(), w.StoredSize(), "StoredSize is the size on disk")
		assert.Equal(t, st.Size(), m.Used(), "the limit counts bytes on disk")
		assert.Equal(t, st.Size(), shared.Used())
		assert.Equal(t, st.Size(), shared.Stats.BytesWritten.Load())
		assert.Equal(t, int64(size), shared.Stats.LogicalBytesWritten.Load())
		if f.Codec != chunkfile.None && size >= 4<<10 {
			assert.Less(t, st.Size(), int64(size), "compressed on disk")
		}
		if f.Key != nil && size > 0 {
			raw, err := os.ReadFile(w.File().Path())
			require.NoError(t, err)
			assert.False(t, bytes.Contains(raw, []byte("TRUCK")), "no plaintext on disk when sealed")
		}
		r, err := w.File().OpenReader(spill.ReaderOptions{Synchronous: size%2 == 0})
		require.NoError(t, err)
		got, err := io.ReadAll(r)
		require.NoError(t, err)
		require.NoError(t, r.Close())
		assert.True(t, bytes.Equal(data, got), "read back what was written")
		require.NoError(t, w.File().Release())
		assert.Zero(t, m.Used())
		assert.Zero(t, shared.Used())
		require.NoError(t, m.Close())
	}
}

// The limit is reached at a chunk: the chunk that does not fit is refused whole, the file keeps
// its whole chunks, and the usage is exactly their bytes on disk.
func TestFramedLimitCountsBytesOnDiskExactly(t *testing.T) {
	for name, f := range formats(t) {
		t.Run(name, func(t *testing.T) {
			testFramedLimit(t, f, spill.FramedOptions{})
		})
	}
}

func testFramedLimit(t *testing.T, f spill.Format, opts spill.FramedOptions) {
	data := compressible(50_000)
	probeRoot := t.TempDir()
	probe := formatManager(t, probeRoot, 1<<30, nil, f)
	w, err := probe.CreateFramedFileWith(opts)
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	exact := w.StoredSize()
	require.NoError(t, probe.Close())

	// A limit of exactly the file's size on disk takes it all.
	m := formatManager(t, t.TempDir(), exact, nil, f)
	w, err = m.CreateFramedFileWith(opts)
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	assert.Equal(t, exact, m.Used())
	require.NoError(t, m.Close())

	// One byte less refuses the last chunk, and only it.
	m = formatManager(t, t.TempDir(), exact-1, nil, f)
	w, err = m.CreateFramedFileWith(opts)
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err, "the chunks before the last fit")
	err = w.Close()
	var limitErr *spill.LimitError
	require.ErrorAs(t, err, &limitErr)
	assert.Contains(t, err.Error(), w.File().Path())
	assert.Equal(t, w.StoredSize(), m.Used(), "usage is the whole chunks on disk")
	st, err := os.Stat(w.File().Path())
	require.NoError(t, err)
	assert.Equal(t, st.Size(), m.Used())
	assert.Less(t, m.Used(), exact)
	_, err = w.File().OpenReader(spill.ReaderOptions{})
	require.ErrorIs(t, err, spill.ErrNotFinished, "a file whose writing failed is not read")
	require.NoError(t, w.File().Release())
	assert.Zero(t, m.Used())
	require.NoError(t, m.Close())
}

// A file refused a chunk mid-way returns the refusal from a Write or from Close; the usage is
// still exactly the whole chunks on disk, and a Writer discarded and its file released leave
// nothing behind.
func TestFramedRefusalMidFile(t *testing.T) {
	f := spill.Format{Codec: chunkfile.LZ4, ChunkSize: 4 << 10}
	root := t.TempDir()
	m := formatManager(t, root, 3000, nil, f) // a chunk or two of compressed text, not ten
	w, err := m.CreateFramedFileWith(spill.FramedOptions{})
	require.NoError(t, err)
	data := compressible(10 * 4 << 10)
	for p := data; len(p) > 0 && err == nil; {
		k := min(len(p), 1000)
		_, err = w.Write(p[:k])
		p = p[k:]
	}
	if err == nil {
		err = w.Close()
	}
	var limitErr *spill.LimitError
	require.ErrorAs(t, err, &limitErr)
	st, serr := os.Stat(w.File().Path())
	require.NoError(t, serr)
	assert.Equal(t, st.Size(), m.Used(), "usage is the whole chunks on disk")
	assert.Equal(t, w.StoredSize(), m.Used())
	w.Discard()
	require.NoError(t, w.File().Release())
	assert.Zero(t, m.Used())
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range entries {
		if !e.IsDir() {
			continue // the manager's owner mark, removed at Close
		}
		sub, err := os.ReadDir(root + "/" + e.Name())
		require.NoError(t, err)
		assert.Empty(t, sub, "the released file is gone")
	}
}

// A changed byte gives an error naming the file and the chunk, never wrong bytes.
func TestFramedCorruptFileNamesFileAndChunk(t *testing.T) {
	for name, f := range formats(t) {
		t.Run(name, func(t *testing.T) {
			m := formatManager(t, t.TempDir(), 1<<30, nil, f)
			data := compressible(30_000)
			w, err := m.CreateFramedFile()
			require.NoError(t, err)
			_, err = w.Write(data)
			require.NoError(t, err)
			require.NoError(t, w.Close())
			path := w.File().Path()
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			raw[len(raw)-10] ^= 0x40 // inside the last chunk
			require.NoError(t, os.WriteFile(path, raw, 0o600))
			r, err := w.File().OpenReader(spill.ReaderOptions{Synchronous: true})
			require.NoError(t, err)
			got, err := io.ReadAll(r)
			require.Error(t, err)
			var fe *chunkfile.FormatError
			require.ErrorAs(t, err, &fe)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), fmt.Sprintf("chunk %d", fe.Chunk))
			assert.True(t, bytes.HasPrefix(data, got), "only verified bytes came out")
			assert.Less(t, len(got), len(data))
			require.NoError(t, r.Close())
		})
	}
}

func TestFramedFileLifecycle(t *testing.T) {
	m := formatManager(t, t.TempDir(), 1<<30, nil, spill.Format{Codec: chunkfile.LZ4})
	raw, err := m.CreateFile()
	require.NoError(t, err)
	_, err = raw.OpenReader(spill.ReaderOptions{})
	require.ErrorIs(t, err, spill.ErrNotFinished, "a raw file is not framed")

	w, err := m.CreateFramedFile()
	require.NoError(t, err)
	_, err = w.Write([]byte("abc"))
	require.NoError(t, err)
	_, err = w.File().OpenReader(spill.ReaderOptions{})
	require.ErrorIs(t, err, spill.ErrNotFinished, "not before Close")
	require.NoError(t, w.Close())
	_, err = w.File().Write([]byte("tail"))
	require.ErrorIs(t, err, spill.ErrFinished, "a finished file takes no raw bytes after its last chunk")
	r, err := w.File().OpenReader(spill.ReaderOptions{})
	require.NoError(t, err)
	require.NoError(t, w.File().Release())
	_, err = io.ReadAll(r)
	require.ErrorIs(t, err, spill.ErrFileReleased)
	require.NoError(t, r.Close())
	_, err = w.File().OpenReader(spill.ReaderOptions{})
	require.ErrorIs(t, err, spill.ErrFileReleased)

	_, err = m.CreateFramedFileWithChunkSize(3000)
	var cfgErr *spill.ConfigError
	require.ErrorAs(t, err, &cfgErr)
	assert.True(t, strings.Contains(err.Error(), "power of two"), err.Error())
	for _, size := range []int{-1, 1, 4097} {
		_, err = m.CreateFramedFileWith(spill.FramedOptions{ChunkSize: 4096, RecordSize: size})
		require.ErrorAs(t, err, &cfgErr)
		assert.Contains(t, err.Error(), fmt.Sprintf("records of %d bytes to shuffle; give 2 to the chunk size (4096)", size))
	}
}

func TestProcessKeyIsMadeOncePerSize(t *testing.T) {
	for _, bits := range []int{128, 192, 256} {
		a, err := spill.ProcessKey(bits)
		require.NoError(t, err)
		b, err := spill.ProcessKey(bits)
		require.NoError(t, err)
		assert.Same(t, a, b)
		assert.Equal(t, bits, a.Bits())
	}
	_, err := spill.ProcessKey(512)
	var cfgErr *spill.ConfigError
	require.True(t, errors.As(err, &cfgErr), "%v", err)
	assert.Contains(t, err.Error(), "128, 192 or 256")
}
