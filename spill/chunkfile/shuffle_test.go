package chunkfile_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill/chunkfile"
)

// sortedRecords are n records of 41 bytes as the native SQL sort spills a narrow row (one long
// key and a decimal): lengths 9 and 24, the key's null flag and big-endian bits, the UnsafeRow's
// null bits and two little-endian longs, in key order.
func sortedRecords(n int) []byte {
	rng := rand.New(rand.NewPCG(41, uint64(n)))
	out := make([]byte, 0, 41*n)
	key := uint64(1)
	for i := 0; i < n; i++ {
		key += uint64(rng.IntN(3))
		out = binary.LittleEndian.AppendUint32(out, 9)
		out = binary.LittleEndian.AppendUint32(out, 24)
		out = append(out, 1)
		out = binary.BigEndian.AppendUint64(out, key^1<<63)
		out = binary.LittleEndian.AppendUint64(out, 0)
		out = binary.LittleEndian.AppendUint64(out, key)
		out = binary.LittleEndian.AppendUint64(out, uint64(100*(1+rng.IntN(50))))
	}
	return out
}

// A shuffled file reads back byte for byte with every codec, sealed or not, at sizes around chunk
// boundaries, for record sizes that divide the chunk and that do not, written at once or in small
// pieces, read every way (a Read with room for a chunk goes through the Reader's buffers).
func TestShuffledRoundTrip(t *testing.T) {
	const chunk = 4096
	for _, c := range codecCases(t)[:3] {
		for _, key := range keyCases(t)[:2] {
			for _, stride := range []int{2, 41, 1000, chunk} {
				for _, size := range []int{0, 1, chunk - 1, chunk, chunk + 1, 5*chunk + 7} {
					for _, small := range []bool{false, true} {
						name := fmt.Sprintf("%s/%s/stride=%d/%d/small=%v", c.name, keyName(key), stride, size, small)
						t.Run(name, func(t *testing.T) {
							data := sortedRecords(size/41 + 1)[:size]
							if stride == 1000 {
								data = randomBytes(size, uint64(size)) // stored as is where it does not shrink
							}
							file := encode(t, data, chunkfile.Options{Codec: c.codec, Key: key, ChunkSize: chunk, Shuffle: stride}, small)
							for way := range decodeWays {
								got, err := decodeEachWay(file, key, way)
								require.NoError(t, err)
								require.True(t, bytes.Equal(data, got), "way %d: read back %d bytes, wrote %d", way, len(got), len(data))
							}
						})
					}
				}
			}
		}
	}
}

// Records of one size shuffled take far fewer bytes than in their order: the reason to shuffle.
func TestShuffleShrinksRecordsOfOneSize(t *testing.T) {
	data := sortedRecords(100_000)
	for _, c := range []struct {
		codecCase
		most float64 // the shuffled file's size over the unshuffled one's, at most
	}{{codecCase{"lz4", chunkfile.LZ4}, 0.5}, {codecCase{"zstd1", mustZstd(t, 1)}, 0.8}} {
		plain := encode(t, data, chunkfile.Options{Codec: c.codec, ChunkSize: 64 << 10}, false)
		shuffled := encode(t, data, chunkfile.Options{Codec: c.codec, ChunkSize: 64 << 10, Shuffle: 41}, false)
		t.Logf("%s: %d bytes of records, %d in their order, %d shuffled", c.name, len(data), len(plain), len(shuffled))
		assert.Less(t, float64(len(shuffled)), c.most*float64(len(plain)), c.name)
	}
}

// Seek lands on any byte of a shuffled file, inside a chunk and across rows that straddle chunks.
func TestShuffledSeek(t *testing.T) {
	data := sortedRecords(1000)
	file := encode(t, data, chunkfile.Options{Codec: chunkfile.LZ4, ChunkSize: 1024, Shuffle: 41}, false)
	r, err := chunkfile.NewReader(bytes.NewReader(file), int64(len(file)), nil, chunkfile.ReaderOptions{Synchronous: true})
	require.NoError(t, err)
	defer r.Close()
	for _, off := range []int64{0, 1, 1023, 1024, 1025, 40 * 41, int64(len(data)) - 1} {
		_, err := r.Seek(off, io.SeekStart)
		require.NoError(t, err)
		got := make([]byte, min(100, int64(len(data))-off))
		_, err = io.ReadFull(r, got)
		require.NoError(t, err)
		require.Equal(t, data[off:off+int64(len(got))], got, "at %d", off)
	}
}

// A shuffled Writer holds one chunk more than an unshuffled one (WriterMemory says so), a shuffled
// Reader one chunk more than ReaderMemory; Buffers give every buffer back.
func TestShuffledMemory(t *testing.T) {
	const chunk = 4096
	unshuffled, err := chunkfile.NewWriter(&memFile{}, chunkfile.Options{Codec: chunkfile.LZ4, ChunkSize: chunk})
	require.NoError(t, err)
	f := &memFile{}
	w, err := chunkfile.NewWriter(f, chunkfile.Options{Codec: chunkfile.LZ4, ChunkSize: chunk, Shuffle: 41})
	require.NoError(t, err)
	require.Equal(t, unshuffled.Memory()+chunk, w.Memory())
	require.LessOrEqual(t, w.Memory(), chunkfile.WriterMemory(chunkfile.Options{ChunkSize: chunk, Codec: chunkfile.LZ4, Shuffle: 41}))
	data := sortedRecords(2000)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	bufs := &countingBuffers{out: map[*byte]int{}}
	r, err := chunkfile.NewReader(bytes.NewReader(f.b), int64(len(f.b)), nil, chunkfile.ReaderOptions{Synchronous: true, Buffers: bufs})
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.LessOrEqual(t, r.Memory(), chunkfile.ReaderMemory(chunk)+chunk)
	require.Greater(t, r.Memory(), chunkfile.ReaderMemory(chunk)-chunk, "the planes' buffer is counted")
	require.NoError(t, r.Close())
	require.Empty(t, bufs.out)
}

func TestWriterRefusesBadShuffle(t *testing.T) {
	for _, stride := range []int{-1, 1, 1025} {
		_, err := chunkfile.NewWriter(&memFile{}, chunkfile.Options{ChunkSize: 1024, Shuffle: stride})
		require.ErrorContains(t, err, fmt.Sprintf("shuffle in records of %d bytes; give a record size from 2 to the chunk size (1024), or 0 for none", stride))
	}
}
