package chunkfile_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/spillway/spillway/spill/chunkfile"
	"github.com/stretchr/testify/require"
)

type codecCase struct {
	name  string
	codec chunkfile.Codec
}

func codecCases(t testing.TB) []codecCase {
	return []codecCase{
		{"none", chunkfile.None},
		{"lz4", chunkfile.LZ4},
		{"zstd1", mustZstd(t, 1)},
		{"zstd19", mustZstd(t, 19)},
	}
}

func keyCases(t testing.TB) []*chunkfile.Key {
	k128, err := chunkfile.NewKey(128)
	require.NoError(t, err)
	k256, err := chunkfile.NewKey(256)
	require.NoError(t, err)
	return []*chunkfile.Key{nil, k128, k256}
}

func keyName(k *chunkfile.Key) string {
	if k == nil {
		return "plain"
	}
	return fmt.Sprintf("aes%d", k.Bits())
}

// Every codec, sealed or not, at every size around chunk boundaries, written at once or in small
// pieces, compressible or not, reads back byte for byte, with read-ahead,
// without, and decoded straight into the caller's buffer.
func TestRoundTrip(t *testing.T) {
	const chunk = 4096
	sizes := []int{0, 1, chunk - 1, chunk, chunk + 1, 2 * chunk, 5*chunk + 7}
	for _, c := range codecCases(t) {
		for _, key := range keyCases(t) {
			for _, size := range sizes {
				for _, kind := range []string{"text", "random"} {
					for _, small := range []bool{false, true} {
						name := fmt.Sprintf("%s/%s/%d/%s/small=%v", c.name, keyName(key), size, kind, small)
						t.Run(name, func(t *testing.T) {
							data := compressibleBytes(size, uint64(size))
							if kind == "random" {
								data = randomBytes(size, uint64(size))
							}
							file := encode(t, data, chunkfile.Options{Codec: c.codec, Key: key, ChunkSize: chunk}, small)
							for way := range decodeWays {
								got, err := decodeEachWay(file, key, way)
								require.NoError(t, err)
								require.True(t, bytes.Equal(data, got), "way %d: read back %d bytes, wrote %d", way, len(got), len(data))
							}
							if kind == "text" && size >= chunk && c.codec != chunkfile.None {
								require.Less(t, len(file), size, "compressible bytes did not shrink")
							}
						})
					}
				}
			}
		}
	}
}

// The default chunk size round-trips too, across chunks, with writes of 1 MiB.
func TestRoundTripDefaultChunkSize(t *testing.T) {
	data := compressibleBytes(3*chunkfile.DefaultChunkSize+123, 5)
	key, err := chunkfile.NewKey(256)
	require.NoError(t, err)
	for _, c := range codecCases(t) {
		f := &memFile{}
		w, err := chunkfile.NewWriter(f, chunkfile.Options{Codec: c.codec, Key: key})
		require.NoError(t, err)
		for p := data; len(p) > 0; {
			n := min(len(p), 1<<20)
			_, err := w.Write(p[:n])
			require.NoError(t, err)
			p = p[n:]
		}
		require.NoError(t, w.Close())
		r, err := chunkfile.NewReader(bytes.NewReader(f.b), int64(len(f.b)), key, chunkfile.ReaderOptions{})
		require.NoError(t, err)
		require.Equal(t, chunkfile.DefaultChunkSize, r.ChunkSize())
		require.Equal(t, c.codec.String()[:len(r.Codec())], r.Codec())
		require.True(t, r.Sealed())
		got, err := io.ReadAll(r)
		require.NoError(t, err)
		require.NoError(t, r.Close())
		require.True(t, bytes.Equal(data, got), c.name)
	}
}

// Seek lands anywhere, forward and back, in every codec, and reads on from there.
func TestSeek(t *testing.T) {
	const chunk = 1024
	data := compressibleBytes(7*chunk+300, 9)
	key := testKey(t, 128)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range codecCases(t) {
		for _, sync := range []bool{false, true} {
			file := encode(t, data, chunkfile.Options{Codec: c.codec, Key: key, ChunkSize: chunk}, false)
			r, err := chunkfile.NewReader(bytes.NewReader(file), int64(len(file)), key, chunkfile.ReaderOptions{Synchronous: sync})
			require.NoError(t, err)
			end, err := r.Seek(0, io.SeekEnd)
			require.NoError(t, err)
			require.Equal(t, int64(len(data)), end)
			n, err := r.Read(make([]byte, 10))
			require.Equal(t, io.EOF, err)
			require.Zero(t, n)
			for i := 0; i < 40; i++ {
				at := rng.IntN(len(data) + 50)
				pos, err := r.Seek(int64(at), io.SeekStart)
				require.NoError(t, err)
				require.Equal(t, int64(at), pos)
				want := data[min(at, len(data)):min(at+1500, len(data))]
				got := make([]byte, len(want))
				_, err = io.ReadFull(r, got)
				require.NoError(t, err)
				require.Equal(t, want, got, "%s at %d", c.name, at)
				if at+1500 >= len(data) {
					_, err = r.Read(make([]byte, 1))
					require.Equal(t, io.EOF, err)
				}
				back, err := r.Seek(-int64(len(want)), io.SeekCurrent)
				require.NoError(t, err)
				require.Equal(t, int64(at), back)
				// Peek after a Seek starts where it points, inside its chunk, and Discard
				// moves the position as a Read does.
				in, err := r.Peek()
				if at >= len(data) {
					require.Equal(t, io.EOF, err)
					continue
				}
				require.NoError(t, err)
				require.Equal(t, data[at:min(len(data), (at/chunk+1)*chunk)], in, "%s: Peek at %d", c.name, at)
				r.Discard(len(in))
				pos, err = r.Seek(0, io.SeekCurrent)
				require.NoError(t, err)
				require.Equal(t, int64(at+len(in)), pos)
				_, err = r.Seek(int64(at), io.SeekStart)
				require.NoError(t, err)
			}
			_, err = r.Seek(-1, io.SeekStart)
			require.Error(t, err)
			require.NoError(t, r.Close())
		}
	}
}

// Reading a file cut after its second chunk gives exactly the first two chunks' bytes, then an
// error naming chunk 2 — through Read and through Seek.
func TestCutAtChunkBoundaryIsDetected(t *testing.T) {
	const chunk = 1024
	data := randomBytes(4*chunk, 3)
	for _, key := range []*chunkfile.Key{nil, testKey(t, 256)} {
		file := encode(t, data, chunkfile.Options{Codec: chunkfile.LZ4, Key: key, ChunkSize: chunk}, false)
		spans := chunkSpans(t, file)
		cut := file[:spans[2][1]] // header, chunks 0 and 1
		got, err := decode(cut, key, chunkfile.ReaderOptions{})
		fe := requireChunkError(t, err, 2)
		require.Contains(t, fe.Error(), "not marked last")
		require.Equal(t, data[:2*chunk], got)

		r, err := chunkfile.NewReader(bytes.NewReader(cut), int64(len(cut)), key, chunkfile.ReaderOptions{})
		require.NoError(t, err)
		_, err = r.Seek(0, io.SeekEnd)
		requireChunkError(t, err, 2)
		require.NoError(t, r.Close())
	}
}

// Bytes after the last chunk make the file invalid: something appended to it, or a bad size.
func TestBytesAfterLastChunkAreDetected(t *testing.T) {
	file := encode(t, compressibleBytes(3000, 1), chunkfile.Options{Codec: chunkfile.LZ4, ChunkSize: 1024}, false)
	file = append(file, 0)
	_, err := decode(file, nil, chunkfile.ReaderOptions{})
	fe := requireChunkError(t, err, 2)
	require.Contains(t, fe.Reason, "the file goes on 1 bytes past its last chunk")
}

// A Read with room for a whole chunk decodes it in the caller's buffer: an uncompressed file,
// sealed or not, is read without any chunk buffer of the Reader's (no copy through one), and
// reads of both sizes mix in one file.
func TestDirectReadUsesTheCallersBuffer(t *testing.T) {
	const chunk = 4096
	data := randomBytes(6*chunk+100, 9)
	for _, key := range keyCases(t) {
		t.Run(keyName(key), func(t *testing.T) {
			file := encode(t, data, chunkfile.Options{Key: key, ChunkSize: chunk}, false)
			r, err := chunkfile.NewReader(bytes.NewReader(file), int64(len(file)), key, chunkfile.ReaderOptions{})
			require.NoError(t, err)
			defer r.Close()
			require.Equal(t, chunk+16+9, r.DirectReadSize())
			p := make([]byte, r.DirectReadSize())
			var got []byte
			for i := 0; i < 2; i++ { // two whole chunks, straight into p
				n, err := r.Read(p)
				require.NoError(t, err)
				require.Equal(t, chunk, n)
				got = append(got, p[:n]...)
			}
			require.Zero(t, r.Memory(), "a direct read went through a chunk buffer of the Reader")
			small := make([]byte, 100) // then small reads, through the read-ahead, and big ones again
			n, err := r.Read(small)
			require.NoError(t, err)
			got = append(got, small[:n]...)
			rest, err := io.ReadAll(r)
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, append(got, rest...)))
		})
	}
}
