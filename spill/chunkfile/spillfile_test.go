package chunkfile_test

import (
	"errors"
	"io"
	"os"
	"syscall"
	"testing"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A spill.File is what the chunk format is written to and read from.
var _ chunkfile.Appender = (*spill.File)(nil)
var _ io.ReaderAt = (*spill.File)(nil)

func newSpillFile(t *testing.T, limit int64) *spill.File {
	t.Helper()
	roots, err := spill.NewRoots([]string{t.TempDir()})
	require.NoError(t, err)
	m, err := spill.New(spill.Config{Roots: roots, Limit: limit, LimitSetting: "test.limit"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	f, err := m.CreateFile()
	require.NoError(t, err)
	return f
}

// Through a real spill file on disk: the round trip, and the manager counts exactly the stored
// bytes the Writer reports.
func TestSpillFileRoundTrip(t *testing.T) {
	data := compressibleBytes(3*chunkfile.DefaultChunkSize+5, 2)
	key, err := chunkfile.NewKey(256)
	require.NoError(t, err)
	f := newSpillFile(t, 1<<30)
	w, err := chunkfile.NewWriter(f, chunkfile.Options{Codec: chunkfile.LZ4, Key: key})
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.Equal(t, f.Size(), w.StoredSize())
	require.Less(t, w.StoredSize(), w.LogicalSize())

	r, err := chunkfile.NewReader(f, f.Size(), key, chunkfile.ReaderOptions{})
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Equal(t, data, got)
	require.NoError(t, f.Release())
}

// A chunk that would pass the spill limit is refused whole: the file holds the chunks before it,
// reads back as those chunks and then an error naming the one that is missing.
func TestSpillFileLimitKeepsWholeChunks(t *testing.T) {
	data := randomBytes(4*1024, 6)
	f := newSpillFile(t, 32+2*(9+1024+4)+100) // room for two chunks and the header, not three
	w, err := chunkfile.NewWriter(f, chunkfile.Options{ChunkSize: 1024})
	require.NoError(t, err)
	_, err = w.Write(data)
	var limitErr *spill.LimitError
	require.True(t, errors.As(err, &limitErr), "not a LimitError: %v", err)
	require.Contains(t, err.Error(), "appending chunk 2")
	require.Equal(t, w.StoredSize(), f.Size())

	got, err := decode(readAll(t, f), nil, chunkfile.ReaderOptions{})
	requireChunkError(t, err, 2)
	require.Equal(t, data[:2*1024], got)
	require.NoError(t, f.Release())
}

func readAll(t *testing.T, f *spill.File) []byte {
	b := make([]byte, f.Size())
	_, err := f.ReadAt(b, 0)
	require.NoError(t, err)
	return b
}

// A real full disk (a 64 KiB tmpfs): the chunk that does not fit fails, the spill layer truncates
// its tail away, and the file reads back as the whole chunks before it.
func TestSpillFileDiskFullKeepsWholeChunks(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test mounts a tmpfs and needs root; CI runs as root")
		}
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	require.NoError(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k,mode=0700"))
	t.Cleanup(func() { require.NoError(t, unix.Unmount(dir, 0)) })
	roots, err := spill.NewRoots([]string{dir})
	require.NoError(t, err)
	m, err := spill.New(spill.Config{Roots: roots, Limit: 1 << 30})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) }) // before the unmount: files closed, dir removed
	f, err := m.CreateFile()
	require.NoError(t, err)

	data := randomBytes(256<<10, 9) // four times what the disk holds
	w, err := chunkfile.NewWriter(f, chunkfile.Options{Codec: chunkfile.LZ4, ChunkSize: 4096})
	require.NoError(t, err)
	_, err = w.Write(data)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.Equal(t, w.StoredSize(), f.Size())
	whole := w.LogicalSize() / 4096
	require.Positive(t, whole)

	got, err := decode(readAll(t, f), nil, chunkfile.ReaderOptions{})
	requireChunkError(t, err, whole)
	require.Equal(t, data[:w.LogicalSize()], got)
	require.NoError(t, f.Release())
}
