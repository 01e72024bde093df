package spill_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/errorfs"
	"github.com/spillway/spillway/spill/faultenv"
)

// Local dirs that fill up and empty again, on real tmpfs mounts (see placement.go).

func under(root, path string) bool { return strings.HasPrefix(path, root+string(filepath.Separator)) }

// A root with no space left is never handed a new file while another root has room: every spill
// succeeds, none lands on the full disk, and the accounting is exact.
func TestRealFullRootIsPassedOverForANewFile(t *testing.T) {
	full, good := faultenv.Tmpfs(t, "size=4m"), faultenv.Tmpfs(t, "size=8m")
	faultenv.Fill(t, filepath.Join(full, "ballast"))
	m := newManager(t, []string{full, good}, 1<<30, nil)
	for i := range 16 {
		f, err := m.CreateFile()
		require.NoError(t, err)
		assert.True(t, under(good, f.Path()), "spill %d went to the full root: %s", i, f.Path())
		write(t, f, 64<<10)
	}
	assert.Equal(t, int64(16*64<<10), m.Used())
	assert.Empty(t, planDirs(t, full), "no plan dir was made on the full root")
	require.NoError(t, m.Close())
	assert.Empty(t, planDirs(t, good))
}

// With no root that has room, the roomiest is tried all the same: a file smaller than
// MinFreeSpace still fits there.
func TestRealShortRootsStillTakeASmallFile(t *testing.T) {
	a, b := faultenv.Tmpfs(t, "size=1m"), faultenv.Tmpfs(t, "size=1m")
	for _, root := range []string{a, b} {
		faultenv.Fill(t, filepath.Join(root, "ballast"))
	}
	// Leave less than MinFreeSpace on b, nothing on a.
	require.NoError(t, os.Truncate(filepath.Join(b, "ballast"), fileSize(t, filepath.Join(b, "ballast"))-spill.MinFreeSpace/2))
	m := newManager(t, []string{a, b}, 1<<30, nil)
	for range 4 {
		f, err := m.CreateFile()
		require.NoError(t, err)
		assert.True(t, under(b, f.Path()), f.Path())
		write(t, f, 4<<10)
	}
	require.NoError(t, m.Close())
	assert.Empty(t, planDirs(t, a))
	assert.Empty(t, planDirs(t, b))
}

// The only root fills up under a write, then the plan frees space there: it spills there again
// at once. Until it has room, a new file fails as it always did, naming the full disk; a file
// already there stays readable and writable within what is left.
func TestRealRootThatFilledTakesFilesAgainOnceThePlanFreesSpace(t *testing.T) {
	root := faultenv.Tmpfs(t, "size=4m")
	m := newManager(t, []string{root}, 1<<30, nil)
	first, err := m.CreateFile()
	require.NoError(t, err)
	write(t, first, 1<<20)
	filler, err := m.CreateFile()
	require.NoError(t, err)
	n, err := filler.Write(make([]byte, 8<<20))
	assert.Zero(t, n)
	require.ErrorIs(t, err, syscall.ENOSPC)
	assert.Equal(t, int64(1<<20), m.Used(), "the failed write gave its bytes back")

	_, err = m.CreateFile()
	var noRoot *spill.NoUsableRootError
	require.ErrorAs(t, err, &noRoot, "the full root is out of the rotation while it has no room")
	require.ErrorIs(t, err, syscall.ENOSPC)
	assert.Contains(t, err.Error(), root)

	require.NoError(t, first.Release()) // frees 1 MiB
	for range 4 {
		f, err := m.CreateFile()
		require.NoError(t, err, "the root has room again")
		write(t, f, 64<<10)
	}
	assert.Equal(t, int64(4*64<<10), m.Used())
	require.NoError(t, m.Close())
	assert.Empty(t, planDirs(t, root))
}

// The same when someone else frees the space: the plan's files come back to the root as soon as
// its filesystem has room again, and the files it holds meanwhile went to the other root.
func TestRealRootFilledByAnotherWriterComesBackWhenItFrees(t *testing.T) {
	small, other := faultenv.Tmpfs(t, "size=4m"), faultenv.Tmpfs(t, "size=8m")
	m := newManager(t, []string{small, other}, 1<<30, nil)
	var onSmall *spill.File
	for onSmall == nil {
		f, err := m.CreateFile()
		require.NoError(t, err)
		if under(small, f.Path()) {
			onSmall = f
		}
	}
	ballast := filepath.Join(small, "ballast")
	faultenv.Fill(t, ballast)
	_, err := onSmall.Write(make([]byte, 64<<10))
	require.ErrorIs(t, err, syscall.ENOSPC)
	for range 6 {
		f, err := m.CreateFile()
		require.NoError(t, err)
		assert.True(t, under(other, f.Path()), "a file went to the full root: %s", f.Path())
	}
	require.NoError(t, os.Remove(ballast))
	landed := 0
	for range 6 {
		f, err := m.CreateFile()
		require.NoError(t, err)
		write(t, f, 64<<10)
		if under(small, f.Path()) {
			landed++
		}
	}
	assert.Equal(t, 3, landed, "the root that has room again is back in the round-robin")
	require.NoError(t, m.Close())
	assert.Empty(t, planDirs(t, small))
	assert.Empty(t, planDirs(t, other))
}

// A quota can fill while statfs still shows room (EDQUOT is injected here, on a tmpfs whose free
// space stays put): the root stays out for the recheck interval, then is tried again. A
// read-only root (EROFS on a write) stays given up for good.
func TestOutOfQuotaRootIsRetriedAfterTheRecheckButReadOnlyNever(t *testing.T) {
	for _, tc := range []struct {
		errno syscall.Errno
		back  bool
	}{{syscall.EDQUOT, true}, {syscall.EROFS, false}} {
		t.Run(tc.errno.Error(), func(t *testing.T) {
			bad, good := faultenv.Tmpfs(t, "size=4m"), faultenv.Tmpfs(t, "size=4m")
			var fail atomic.Bool
			fail.Store(true)
			fsys := errorfs.Wrap(spill.OSFS{}, errorfs.Errno(tc.errno, errorfs.OnOp(errorfs.OpWrite), errorfs.Under(bad), errorfs.While(&fail)))
			m := newManager(t, []string{bad, good}, 1<<30, fsys)
			var onBad *spill.File
			for onBad == nil {
				f, err := m.CreateFile()
				require.NoError(t, err)
				if under(bad, f.Path()) {
					onBad = f
				}
			}
			_, err := onBad.Write(make([]byte, 1000))
			require.ErrorIs(t, err, tc.errno)
			fail.Store(false)
			for range 4 {
				f, err := m.CreateFile()
				require.NoError(t, err)
				assert.True(t, under(good, f.Path()), f.Path())
			}
			time.Sleep(spill.FullRootRecheck + 50*time.Millisecond)
			landed := 0
			for range 4 {
				f, err := m.CreateFile()
				require.NoError(t, err)
				write(t, f, 1000)
				if under(bad, f.Path()) {
					landed++
				}
			}
			if tc.back {
				assert.Equal(t, 2, landed, "the root is back after the recheck interval")
			} else {
				assert.Zero(t, landed, "a read-only root stays given up")
			}
			require.NoError(t, m.Close())
			assert.Empty(t, planDirs(t, bad))
			assert.Empty(t, planDirs(t, good))
		})
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	return info.Size()
}
