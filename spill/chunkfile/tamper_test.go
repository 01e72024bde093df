package chunkfile_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spillway/spillway/spill/chunkfile"
	"github.com/stretchr/testify/require"
)

// tamperCases are small files of three chunks (1 KiB each, the last shorter) for every codec,
// sealed and not; half the data compresses, half does not, so both kinds of chunk are covered.
func tamperCases(t *testing.T) []struct {
	name string
	key  *chunkfile.Key
	opts chunkfile.Options
} {
	var out []struct {
		name string
		key  *chunkfile.Key
		opts chunkfile.Options
	}
	for _, c := range codecCases(t)[:3] {
		for _, key := range []*chunkfile.Key{nil, testKey(t, 128)} {
			out = append(out, struct {
				name string
				key  *chunkfile.Key
				opts chunkfile.Options
			}{c.name + "/" + keyName(key), key, chunkfile.Options{Codec: c.codec, Key: key, ChunkSize: chunkfile.MinChunkSize}})
			out = append(out, struct {
				name string
				key  *chunkfile.Key
				opts chunkfile.Options
			}{c.name + "/" + keyName(key) + "/shuffled", key, chunkfile.Options{Codec: c.codec, Key: key, ChunkSize: chunkfile.MinChunkSize, Shuffle: 41}})
		}
	}
	return out
}

func tamperData() []byte {
	return append(compressibleBytes(1500, 11), randomBytes(1100, 12)...)
}

// chunkAt is the index of the chunk that holds byte i (-1 for the header).
func chunkAt(spans [][2]int, i int) int64 {
	for k, s := range spans {
		if i >= s[0] && i < s[1] {
			return int64(k) - 1
		}
	}
	return int64(len(spans)) - 1
}

// requirePrefix checks the Reader's "never wrong bytes": whatever came out before an error is
// the start of what was written, and ends at a chunk boundary.
func requirePrefix(t *testing.T, data, got []byte, chunkSize int) {
	t.Helper()
	require.True(t, bytes.HasPrefix(data, got), "returned %d bytes that are not what was written", len(got))
	require.Zero(t, len(got)%chunkSize, "returned part of a chunk (%d bytes)", len(got))
}

// Flipping any one bit of a file, in any byte, gives an error naming the chunk that holds it (the
// header's flips may surface as the header's error or as chunk 0's), and never wrong bytes.
func TestEveryFlippedByteIsDetected(t *testing.T) {
	data := tamperData()
	for _, tc := range tamperCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			file := encode(t, data, tc.opts, false)
			spans := chunkSpans(t, file)
			require.Len(t, spans, 4)
			for i := range file {
				bad := bytes.Clone(file)
				bad[i] ^= 1 << (i % 8)
				got, err := decodeEachWay(bad, tc.key, i)
				want := chunkAt(spans, i)
				if want < 0 {
					requireChunkError(t, err, -1, 0)
				} else {
					requireChunkError(t, err, want)
				}
				requirePrefix(t, data, got, chunkfile.MinChunkSize)
			}
		})
	}
}

// A file cut at any length gives an error naming the chunk where it was cut, and never wrong bytes.
func TestEveryTruncationIsDetected(t *testing.T) {
	data := tamperData()
	for _, tc := range tamperCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			file := encode(t, data, tc.opts, false)
			spans := chunkSpans(t, file)
			for n := 0; n < len(file); n++ {
				got, err := decodeEachWay(file[:n], tc.key, n)
				requireChunkError(t, err, chunkAt(spans, n))
				requirePrefix(t, data, got, chunkfile.MinChunkSize)
			}
		})
	}
}

// Two chunks swapped: the first one out of place is named.
func TestReorderedChunksAreDetected(t *testing.T) {
	data := randomBytes(4*chunkfile.MinChunkSize, 4) // equal stored lengths: the swap keeps every length valid
	for _, tc := range tamperCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			file := encode(t, data, tc.opts, false)
			s := chunkSpans(t, file)
			c1, c2 := s[2], s[3] // chunks 1 and 2
			bad := bytes.Join([][]byte{file[:c1[0]], file[c2[0]:c2[1]], file[c1[0]:c1[1]], file[c2[1]:]}, nil)
			require.Len(t, bad, len(file))
			got, err := decode(bad, tc.key, chunkfile.ReaderOptions{})
			requireChunkError(t, err, 1)
			require.Equal(t, data[:chunkfile.MinChunkSize], got)
		})
	}
}

// A chunk taken from another file written with the same key, options and bytes — identical in
// everything but the file's random id — is detected where it was put.
func TestSplicedChunkIsDetected(t *testing.T) {
	data := tamperData()
	for _, tc := range tamperCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			a := encode(t, data, tc.opts, false)
			b := encode(t, data, tc.opts, false)
			sa, sb := chunkSpans(t, a), chunkSpans(t, b)
			require.Equal(t, sa, sb)
			require.NotEqual(t, a[16:32], b[16:32], "two files share an id")
			bad := bytes.Clone(a)
			copy(bad[sa[2][0]:sa[2][1]], b[sb[2][0]:sb[2][1]]) // chunk 1 of b into a
			got, err := decode(bad, tc.key, chunkfile.ReaderOptions{})
			requireChunkError(t, err, 1)
			require.Equal(t, data[:chunkfile.MinChunkSize], got)

			// b's header on a's chunks: chunk 0 is already foreign.
			bad = append(bytes.Clone(b[:32]), a[32:]...)
			_, err = decode(bad, tc.key, chunkfile.ReaderOptions{})
			requireChunkError(t, err, 0)
		})
	}
}

// A file sealed under one key does not open under another: chunk 0 fails, nothing is returned.
func TestWrongKeyIsDetected(t *testing.T) {
	data := tamperData()
	k1, err := chunkfile.NewKey(256)
	require.NoError(t, err)
	k2, err := chunkfile.NewKey(256)
	require.NoError(t, err)
	k128, err := chunkfile.NewKey(128)
	require.NoError(t, err)
	file := encode(t, data, chunkfile.Options{Codec: chunkfile.LZ4, Key: k1, ChunkSize: 1024}, false)

	got, err := decode(file, k2, chunkfile.ReaderOptions{})
	fe := requireChunkError(t, err, 0)
	require.Contains(t, fe.Error(), "chunk 0 (at byte 32): AES-GCM authentication failed")
	require.Empty(t, got)

	_, err = decode(file, k128, chunkfile.ReaderOptions{})
	fe = requireChunkError(t, err, -1)
	require.Contains(t, fe.Error(), "sealed with a 256-bit key, not with the 128-bit key given")

	_, err = decode(file, nil, chunkfile.ReaderOptions{})
	fe = requireChunkError(t, err, -1)
	require.Contains(t, fe.Error(), "no key was given")

	// An unsealed file where a sealed one is expected would be data no one sealed: refused.
	plain := encode(t, data, chunkfile.Options{Codec: chunkfile.LZ4, ChunkSize: 1024}, false)
	_, err = decode(plain, k1, chunkfile.ReaderOptions{})
	fe = requireChunkError(t, err, -1)
	require.Contains(t, fe.Error(), "not sealed but a key was given")
}

// Sealed files never show their plaintext, and two files of the same bytes differ entirely.
func TestSealedFilesHideThePlaintext(t *testing.T) {
	marker := []byte("PLAINTEXT-MARKER-4711|")
	data := bytes.Repeat(marker, 500)
	key, err := chunkfile.NewKey(128)
	require.NoError(t, err)
	for _, c := range codecCases(t) {
		a := encode(t, data, chunkfile.Options{Codec: c.codec, Key: key, ChunkSize: 4096}, false)
		b := encode(t, data, chunkfile.Options{Codec: c.codec, Key: key, ChunkSize: 4096}, false)
		for _, f := range [][]byte{a, b} {
			require.False(t, bytes.Contains(f, marker[:8]), "%s: plaintext in a sealed file", c.name)
		}
		require.Equal(t, len(a), len(b))
		require.False(t, bytes.Equal(a[32:64], b[32:64]), "%s: two files' first chunks are alike", c.name)
		got, err := decode(a, key, chunkfile.ReaderOptions{})
		require.NoError(t, err)
		require.Equal(t, data, got)
	}
}

// A failed append leaves the file as it was after the last whole chunk: it reads back every
// whole chunk, then names the first missing one. The Writer then refuses more.
func TestFailedAppendLeavesWholeChunks(t *testing.T) {
	data := randomBytes(5*1024, 8)
	for _, key := range []*chunkfile.Key{nil, testKey(t, 192)} {
		f := &failingFile{failAt: 3}
		w, err := chunkfile.NewWriter(f, chunkfile.Options{Codec: chunkfile.LZ4, Key: key, ChunkSize: 1024})
		require.NoError(t, err)
		n, err := w.Write(data)
		require.ErrorIs(t, err, errDiskFull)
		require.Contains(t, err.Error(), "appending chunk 2")
		require.Equal(t, 2*1024, n)
		require.Equal(t, int64(2*1024), w.LogicalSize())
		require.Equal(t, int64(len(f.b)), w.StoredSize())
		_, err = w.Write([]byte{1})
		require.ErrorIs(t, err, errDiskFull)
		require.ErrorIs(t, w.Close(), errDiskFull)

		got, err := decode(f.b, key, chunkfile.ReaderOptions{})
		fe := requireChunkError(t, err, 2)
		require.Contains(t, fe.Reason, "not marked last")
		require.Equal(t, data[:2*1024], got)
	}
}

var errDiskFull = errors.New("disk full")

// failingFile fails its failAt-th append (1-based) and every one after, writing nothing, as
// spill.File does once it has truncated a failed write back.
type failingFile struct {
	memFile
	calls, failAt int
}

func (f *failingFile) Write(p []byte) (int, error) {
	f.calls++
	if f.calls >= f.failAt {
		return 0, errDiskFull
	}
	return f.memFile.Write(p)
}

// A source that fails to read gives that error, with the chunk, not a *FormatError.
func TestReadErrorsNameTheChunk(t *testing.T) {
	file := encode(t, randomBytes(3*1024, 1), chunkfile.Options{ChunkSize: 1024}, false)
	src := &failingReaderAt{b: file, failFrom: int64(chunkSpans(t, file)[2][0]) + 9}
	r, err := chunkfile.NewReader(src, int64(len(file)), nil, chunkfile.ReaderOptions{})
	require.NoError(t, err)
	_, err = io.ReadAll(r)
	require.ErrorIs(t, err, errDiskFull)
	require.Contains(t, err.Error(), "reading chunk 1")
	require.NoError(t, r.Close())
}

type failingReaderAt struct {
	b        []byte
	failFrom int64
}

func (f *failingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.failFrom {
		return 0, errDiskFull
	}
	return bytes.NewReader(f.b).ReadAt(p, off)
}

// Bad headers are refused before anything is allocated for the chunks, each with its reason.
func TestBadHeaders(t *testing.T) {
	good := encode(t, []byte("x"), chunkfile.Options{ChunkSize: 1024}, false)
	cases := []struct {
		at   int
		val  byte
		want string
	}{
		{0, 'X', "not a spill chunk file"},
		{8, 2, "format version 2; this build reads version 1 only"},
		{9, 9, "unknown codec id 9"},
		{10, 7, "unknown sealing id 7"},
		{11, 16, "unsealed, yet it names a 128-bit key"},
		{12, 23, "chunk size 2^23"},
		{12, 9, "chunk size 2^9"},
		{15, 1, "shuffled in records of 1 bytes"},
		{13, 1, "shuffled in records of 65536 bytes; a writer shuffles records of 2 bytes to the chunk size (1024)"},
	}
	for _, c := range cases {
		bad := bytes.Clone(good)
		bad[c.at] = c.val
		_, err := decode(bad, nil, chunkfile.ReaderOptions{})
		fe := requireChunkError(t, err, -1)
		require.Contains(t, fe.Error(), c.want)
		require.True(t, strings.HasPrefix(fe.Error(), "spill chunk file header: "), fe.Error())
	}
	_, err := decode(good[:10], nil, chunkfile.ReaderOptions{})
	require.ErrorContains(t, err, "fewer than the 32-byte header")
}

// Close stops the read-ahead of a file read halfway, and a Read after Close fails.
func TestCloseMidFile(t *testing.T) {
	data := randomBytes(10*1024, 3)
	file := encode(t, data, chunkfile.Options{ChunkSize: 1024}, false)
	for i := 0; i < 50; i++ {
		r, err := chunkfile.NewReader(bytes.NewReader(file), int64(len(file)), nil, chunkfile.ReaderOptions{})
		require.NoError(t, err)
		buf := make([]byte, 100*i+1)
		_, err = io.ReadFull(r, buf)
		require.NoError(t, err)
		require.Equal(t, data[:len(buf)], buf)
		require.NoError(t, r.Close())
		_, err = r.Read(buf)
		require.ErrorContains(t, err, "read after Close")
	}
}

func TestWriterRefusesBadOptions(t *testing.T) {
	for _, size := range []int{1, 512, 3000, 8 << 20} {
		_, err := chunkfile.NewWriter(&memFile{}, chunkfile.Options{ChunkSize: size})
		require.ErrorContains(t, err, fmt.Sprintf("chunk size %d; give a power of two from 1024 to 4194304", size))
	}
	w, err := chunkfile.NewWriter(&memFile{}, chunkfile.Options{})
	require.NoError(t, err)
	require.NoError(t, w.Close())
	_, err = w.Write([]byte{1})
	require.ErrorIs(t, err, chunkfile.ErrClosed)
	require.NoError(t, w.Close())
}
