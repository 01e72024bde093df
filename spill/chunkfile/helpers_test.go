package chunkfile_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/spillway/spillway/spill/chunkfile"
	"github.com/stretchr/testify/require"
)

// memFile is an append-only file in memory: what spill.File is to a Writer and a Reader.
type memFile struct{ b []byte }

func (m *memFile) Write(p []byte) (int, error) {
	m.b = append(m.b, p...)
	return len(p), nil
}

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(m.b).ReadAt(p, off)
}

// testKey is the fixed key of the test vectors: bytes 0, 1, 2, ... of the key's size.
func testKey(t testing.TB, bits int) *chunkfile.Key {
	t.Helper()
	secret := make([]byte, bits/8)
	for i := range secret {
		secret[i] = byte(i)
	}
	k, err := chunkfile.KeyForTesting(secret)
	require.NoError(t, err)
	return k
}

func mustZstd(t testing.TB, level int) chunkfile.Codec {
	t.Helper()
	c, err := chunkfile.Zstd(level)
	require.NoError(t, err)
	return c
}

// encode writes data through a Writer, in one Write or in many small ones.
func encode(t testing.TB, data []byte, opts chunkfile.Options, small bool) []byte {
	t.Helper()
	f := &memFile{}
	w, err := chunkfile.NewWriter(f, opts)
	require.NoError(t, err)
	if small {
		rng := rand.New(rand.NewPCG(uint64(len(data)), 7))
		for p := data; len(p) > 0; {
			n := min(len(p), 1+rng.IntN(300))
			k, err := w.Write(p[:n])
			require.NoError(t, err)
			require.Equal(t, n, k)
			p = p[n:]
		}
	} else {
		k, err := w.Write(data)
		require.NoError(t, err)
		require.Equal(t, len(data), k)
	}
	require.NoError(t, w.Close())
	require.Equal(t, int64(len(data)), w.LogicalSize())
	require.Equal(t, int64(len(f.b)), w.StoredSize())
	require.Zero(t, w.Buffered())
	return f.b
}

// decode reads a whole file; it returns what was read before any error.
func decode(file []byte, key *chunkfile.Key, opts chunkfile.ReaderOptions) ([]byte, error) {
	r, err := chunkfile.NewReader(bytes.NewReader(file), int64(len(file)), key, opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// decodeDirect reads a whole file as decode does, but each Read with room for a whole chunk
// (Reader.DirectReadSize), so that every chunk is decoded in the caller's buffer.
func decodeDirect(file []byte, key *chunkfile.Key) ([]byte, error) {
	r, err := chunkfile.NewReader(bytes.NewReader(file), int64(len(file)), key, chunkfile.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []byte
	p := make([]byte, r.DirectReadSize())
	for {
		n, err := r.Read(p)
		out = append(out, p[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// decodePeek reads a whole file as decode does, but in place: Peek, then Discard of a few bytes
// of what it returned at a time (as a merge takes records), copying them out.
func decodePeek(file []byte, key *chunkfile.Key, opts chunkfile.ReaderOptions) ([]byte, error) {
	r, err := chunkfile.NewReader(bytes.NewReader(file), int64(len(file)), key, opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rng := rand.New(rand.NewPCG(uint64(len(file)), 3))
	var out []byte
	for {
		in, err := r.Peek()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if len(in) == 0 {
			return out, errors.New("Peek returned no bytes and no error")
		}
		n := min(len(in), 1+rng.IntN(200))
		out = append(out, in[:n]...)
		r.Discard(n)
	}
}

// decodeWays is how many ways decodeEachWay reads a file.
const decodeWays = 5

// decodeEachWay is decode with read-ahead (way 0), without (1), decodeDirect (2), or decodePeek
// without read-ahead (3) and with it (4), so that a loop over inputs checks each way of reading
// in turn.
func decodeEachWay(file []byte, key *chunkfile.Key, way int) ([]byte, error) {
	switch way % decodeWays {
	case 0:
		return decode(file, key, chunkfile.ReaderOptions{})
	case 1:
		return decode(file, key, chunkfile.ReaderOptions{Synchronous: true})
	case 2:
		return decodeDirect(file, key)
	case 3:
		return decodePeek(file, key, chunkfile.ReaderOptions{Synchronous: true})
	}
	return decodePeek(file, key, chunkfile.ReaderOptions{})
}

// compressibleBytes are text-like: lz4 and zstd shrink them.
func compressibleBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	words := []string{"spill ", "chunk ", "sealed ", "row|", "12345|", "2026-12-01|", "lz4 ", "\n"}
	b := make([]byte, 0, n+16)
	for len(b) < n {
		b = append(b, words[rng.IntN(len(words))]...)
	}
	return b[:n]
}

// randomBytes do not compress: chunks are stored raw.
func randomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// chunkSpans returns the [start, end) of the header and of every chunk of a well-formed file.
func chunkSpans(t testing.TB, file []byte) [][2]int {
	t.Helper()
	spans := [][2]int{{0, 32}}
	for off := 32; off < len(file); {
		require.LessOrEqual(t, off+9, len(file))
		end := off + 9 + int(binary.BigEndian.Uint32(file[off+5:off+9]))
		spans = append(spans, [2]int{off, end})
		off = end
	}
	return spans
}

// requireChunkError checks that err is a *FormatError naming one of the chunks (-1: the header).
func requireChunkError(t testing.TB, err error, chunks ...int64) *chunkfile.FormatError {
	t.Helper()
	require.Error(t, err)
	var fe *chunkfile.FormatError
	require.True(t, errors.As(err, &fe), "not a *FormatError: %v", err)
	require.Contains(t, chunks, fe.Chunk, "error names chunk %d: %v", fe.Chunk, err)
	return fe
}
