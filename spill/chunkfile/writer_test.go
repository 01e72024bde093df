package chunkfile_test

import (
	"errors"
	"testing"

	"github.com/spillway/spillway/spill/chunkfile"
	"github.com/stretchr/testify/require"
)

// WriterMemory bounds a Writer's Memory.
func TestWriterMemory(t *testing.T) {
	const chunk = 4096
	for _, opts := range []chunkfile.Options{
		{ChunkSize: chunk},
		{ChunkSize: chunk, Codec: chunkfile.LZ4, Key: testKey(t, 256)},
		{ChunkSize: chunk, Codec: chunkfile.LZ4, Shuffle: 41},
	} {
		w, err := chunkfile.NewWriter(&memFile{}, opts)
		require.NoError(t, err)
		require.LessOrEqual(t, w.Memory(), chunkfile.WriterMemory(opts))
	}
}

// countingFile is a memFile that counts its appends and fails them from a given one on.
type countingFile struct {
	memFile
	failFrom int
	appends  int
}

var errAppend = errors.New("an append failed (test)")

func (g *countingFile) Write(p []byte) (int, error) {
	g.appends++
	if g.appends > g.failFrom {
		return 0, errAppend
	}
	return g.memFile.Write(p)
}

// An append that fails is returned by the Write that fills the next chunk, or by Close; the file
// then holds the chunks before it, whole, and the Writer takes nothing more.
func TestWriterReturnsAFailedAppend(t *testing.T) {
	const chunk = 1024
	for _, failFrom := range []int{0, 1, 3} {
		f := &countingFile{failFrom: failFrom}
		w, err := chunkfile.NewWriter(f, chunkfile.Options{Codec: chunkfile.LZ4, ChunkSize: chunk})
		require.NoError(t, err)
		data := compressibleBytes(10*chunk, 9)
		var werr error
		for p := data; len(p) > 0 && werr == nil; p = p[100:] {
			_, werr = w.Write(p[:100])
			if len(p) == 100 {
				break
			}
		}
		if werr == nil {
			werr = w.Close()
		} else {
			require.ErrorIs(t, w.Close(), errAppend, "Close returns the failure again")
		}
		require.ErrorIs(t, werr, errAppend)
		require.ErrorContains(t, werr, "appending chunk")
		require.Equal(t, int64(failFrom*chunk), w.LogicalSize(), "only the chunks appended count")
		require.Equal(t, int64(len(f.b)), w.StoredSize())
		_, err = w.Write([]byte("more"))
		require.ErrorIs(t, err, errAppend)
	}
}

// Discard appends nothing, so a caller that gives up on a file may release it at once: nothing is
// appended to it afterwards, and the Writer takes nothing more.
func TestWriterDiscardAppendsNothingMore(t *testing.T) {
	const chunk = 1024
	f := &countingFile{failFrom: 1 << 30}
	w, err := chunkfile.NewWriter(f, chunkfile.Options{Codec: chunkfile.LZ4, ChunkSize: chunk})
	require.NoError(t, err)
	_, err = w.Write(compressibleBytes(10*chunk+1, 4))
	require.NoError(t, err)
	appended := f.appends
	require.Positive(t, appended)
	w.Discard()
	require.Equal(t, appended, f.appends)
	require.Equal(t, int64(appended*chunk), w.LogicalSize())
	_, err = w.Write([]byte("more"))
	require.ErrorIs(t, err, chunkfile.ErrClosed)
	require.ErrorIs(t, w.Close(), chunkfile.ErrClosed, "a discarded file is not finished by Close")
	require.Equal(t, appended, f.appends)
}
