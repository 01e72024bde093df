package chunkfile_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill/chunkfile"
)

// countingBuffers hands out Go slices and remembers which are out.
type countingBuffers struct {
	out    map[*byte]int
	allocs int
	fail   bool
}

func (c *countingBuffers) Alloc(n int) ([]byte, error) {
	if c.fail {
		return nil, errors.New("no memory for you")
	}
	b := make([]byte, n)
	c.out[&b[:1][0]] = n
	c.allocs++
	return b, nil
}

func (c *countingBuffers) Free(b []byte) {
	p := &b[:1][0]
	if _, ok := c.out[p]; !ok {
		panic("freed a buffer that is not out (twice, or not Alloc's)")
	}
	delete(c.out, p)
}

// A Reader given Buffers takes every chunk buffer from them and gives each back once at Close,
// with read-ahead and without, compressed or not.
func TestReaderTakesItsBuffersFromBuffersAndGivesThemBack(t *testing.T) {
	data := compressibleBytes(7*4096+5, 3)
	for _, c := range codecCases(t) {
		for _, sync := range []bool{true, false} {
			file := encode(t, data, chunkfile.Options{Codec: c.codec, ChunkSize: 4096}, false)
			bufs := &countingBuffers{out: map[*byte]int{}}
			r, err := chunkfile.NewReader(bytes.NewReader(file), int64(len(file)), nil, chunkfile.ReaderOptions{Synchronous: sync, Buffers: bufs})
			require.NoError(t, err)
			got, err := io.ReadAll(r)
			require.NoError(t, err)
			require.Equal(t, data, got)
			assert.Positive(t, bufs.allocs, "%s sync=%v", c.name, sync)
			assert.NotEmpty(t, bufs.out)
			require.NoError(t, r.Close())
			assert.Empty(t, bufs.out, "%s sync=%v: every buffer given back at Close", c.name, sync)
		}
	}
}

// Memory refused is a read error, not a panic, and nothing is left out.
func TestReaderReportsBuffersItCannotHave(t *testing.T) {
	file := encode(t, compressibleBytes(3*4096, 4), chunkfile.Options{Codec: chunkfile.LZ4, ChunkSize: 4096}, false)
	bufs := &countingBuffers{out: map[*byte]int{}, fail: true}
	r, err := chunkfile.NewReader(bytes.NewReader(file), int64(len(file)), nil, chunkfile.ReaderOptions{Synchronous: true, Buffers: bufs})
	require.NoError(t, err)
	_, err = io.ReadAll(r)
	assert.ErrorContains(t, err, "no memory for you")
	assert.ErrorContains(t, err, "a buffer for chunk 0")
	require.NoError(t, r.Close())
	assert.Empty(t, bufs.out)
}

// Memory may be read from any goroutine while the read-ahead grows the chunk buffers (a task's
// memory report, say): under -race, reading it during a read is no data race, and what it says
// is the buffers held, within twice ReaderMemory, and 0 once closed.
func TestReaderMemoryMayBeReadWhileItReadsAhead(t *testing.T) {
	const chunk = 4096
	data := compressibleBytes(64*chunk, 5)
	file := encode(t, data, chunkfile.Options{Codec: chunkfile.LZ4, ChunkSize: chunk}, false)
	bufs := &countingBuffers{out: map[*byte]int{}}
	r, err := chunkfile.NewReader(bytes.NewReader(file), int64(len(file)), nil, chunkfile.ReaderOptions{Buffers: bufs})
	require.NoError(t, err)
	done := make(chan struct{})
	var seen []int
	go func() {
		defer close(done)
		for range 1000 {
			seen = append(seen, r.Memory())
		}
	}()
	got, err := io.ReadAll(r)
	<-done
	require.NoError(t, err)
	require.Equal(t, data, got)
	for _, n := range seen {
		require.LessOrEqual(t, n, 2*chunkfile.ReaderMemory(chunk))
	}
	require.Greater(t, r.Memory(), 0, "the read-ahead's buffers are counted")
	require.NoError(t, r.Close())
	assert.Zero(t, r.Memory())
	assert.Empty(t, bufs.out)
}
