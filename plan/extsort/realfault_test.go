package extsort

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/plan/offheap"
	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/errorfs"
	"github.com/spillway/spillway/spill/faultenv"
)

// fullTmpfs mounts a 4 MiB tmpfs and fills it: a plan dir and its files can still be made there
// (they take no blocks), but the first byte written fails with ENOSPC.
func fullTmpfs(t *testing.T) string {
	root := faultenv.Tmpfs(t, "size=4m")
	faultenv.Fill(t, filepath.Join(root, "ballast"))
	return root
}

func managerOver(t *testing.T, roots ...string) *spill.Manager {
	r, err := spill.NewRoots(roots)
	require.NoError(t, err)
	m, err := spill.New(spill.Config{Roots: r, Limit: 1 << 30, Format: &testFormat.format})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// A run whose disk fills up goes on in a new file on the other root (here from its first byte,
// so the empty file on the full disk is released): the sort finishes with every record, and
// nothing is left on the full disk.
func TestRealENOSPCRunIsWrittenAgainOnAnotherRoot(t *testing.T) {
	full, good := fullTmpfs(t), t.TempDir()
	m := managerOver(t, full, good)
	s := newSorter(t, m, 256<<10)
	recs := randomRecords(11, 8000, 16, 200) // about 1 MiB: several runs, so one is tried on each root
	addAll(t, s, recs, 64<<10)
	require.GreaterOrEqual(t, s.Stats().Runs, int64(2))
	assert.Empty(t, runFiles(t, full), "the run that failed on the full disk was released")
	assert.Len(t, runFiles(t, good), int(s.Stats().Runs))
	assertSorted(t, recs, drain(t, s, 64<<10))
	require.NoError(t, s.Close())
	require.NoError(t, m.Close())
	assert.Empty(t, planDirs(t, full))
	assert.Empty(t, planDirs(t, good))
}

// With no other root, the spill fails with an error naming the full disk, and leaks nothing.
func TestRealENOSPCOnTheOnlyRootFailsTheSpill(t *testing.T) {
	full := fullTmpfs(t)
	m := managerOver(t, full)
	s := newSorter(t, m, 64<<10)
	var addErr error
	for _, r := range randomRecords(12, 4000, 16, 100) {
		if addErr = s.Add(AppendRecord(nil, r.key, r.val)); addErr != nil {
			break
		}
	}
	require.ErrorIs(t, addErr, syscall.ENOSPC)
	var noRoot *spill.NoUsableRootError
	require.ErrorAs(t, addErr, &noRoot)
	assert.True(t, strings.Contains(addErr.Error(), full), addErr.Error())
	assert.Empty(t, runFiles(t, full))
	assert.Zero(t, m.Used())
	require.NoError(t, s.Close())
	require.NoError(t, m.Close())
	assert.Empty(t, planDirs(t, full))
}

// A run larger than the only disk's free space fails the spill once, promptly: releasing the
// half-written run frees its bytes, but that is no new room, so the disk is not tried again and
// again with the same run.
func TestRealRunLargerThanTheOnlyDiskFailsOnce(t *testing.T) {
	root := faultenv.Tmpfs(t, "size=2m")
	m := managerOver(t, root)
	s := newSorter(t, m, 16<<20)
	require.NoError(t, s.Add(encode(randomRecords(27, 12_000, 16, 512)))) // about 3 MiB
	_, err := s.Spill()
	require.ErrorIs(t, err, syscall.ENOSPC)
	var noRoot *spill.NoUsableRootError
	require.ErrorAs(t, err, &noRoot)
	assert.Equal(t, int64(1), s.Stats().RewrittenRuns, "written once, tried once more, then failed")
	assert.Empty(t, runFiles(t, root))
	assert.Zero(t, m.Used())
	require.NoError(t, s.Close())
	require.NoError(t, m.Close())
	assert.Empty(t, planDirs(t, root))
}

// Two dirs whose writes fail for want of quota (statfs still shows room), each write taking
// longer than spill.FullRootRecheck, so a dir is back in the rotation by the time the other has
// failed: the run is tried on each dir and once more, then the spill fails with the quota error,
// instead of going round the dirs for ever.
func TestRunIsWrittenAgainAtMostOncePerDir(t *testing.T) {
	a, b := faultenv.Tmpfs(t, "size=4m"), faultenv.Tmpfs(t, "size=4m")
	var writes atomic.Int32
	slowQuota := func(op errorfs.Op, _ string) syscall.Errno {
		if op != errorfs.OpWrite {
			return 0
		}
		if writes.Add(1) > 6 {
			return syscall.EIO // ends the loop the test is about, were it unbounded
		}
		time.Sleep(spill.FullRootRecheck + 100*time.Millisecond)
		return syscall.EDQUOT
	}
	r, err := spill.NewRoots([]string{a, b})
	require.NoError(t, err)
	m, err := spill.New(spill.Config{Roots: r, Limit: 1 << 30, Format: &testFormat.format, FS: errorfs.Wrap(spill.OSFS{}, slowQuota)})
	require.NoError(t, err)
	s := newSorter(t, m, 4<<20)
	require.NoError(t, s.Add(encode(randomRecords(28, 2_000, 16, 200))))
	_, err = s.Spill()
	require.ErrorIs(t, err, syscall.EDQUOT)
	assert.Equal(t, int32(3), writes.Load(), "one write on each dir and one more")
	assert.Equal(t, int64(2), s.Stats().RewrittenRuns)
	assert.Zero(t, m.Used())
	require.NoError(t, s.Close())
	require.NoError(t, m.Close())
	assert.Empty(t, planDirs(t, a))
	assert.Empty(t, planDirs(t, b))
}

// A whole spill that fails on a full disk leaves the records in memory, and the index it sorted
// them with mapped, counted; the older half's spill that follows (once the disk has room) splits
// the table and gives that index back: the half left counts fewer entries than it held.
func TestRealENOSPCWholeSpillThenOlderHalfHoldsNoMoreThanCounted(t *testing.T) {
	root := faultenv.Tmpfs(t, "size=2m")
	m := managerOver(t, root)
	mappedBefore := offheap.Mapped()
	s := newSorter(t, m, 16<<20)
	recs := randomRecords(29, 12_000, 16, 512) // about 3 MiB: too much for the disk, half of it is not
	require.NoError(t, s.Add(encode(recs)))
	_, err := s.Spill()
	require.ErrorIs(t, err, syscall.ENOSPC)
	checkMemory(t, s, mappedBefore, "after the failed spill")
	time.Sleep(spill.FullRootRecheck) // the disk back in the rotation
	_, err = s.SpillToRefill()
	require.NoError(t, err)
	require.Equal(t, int64(1), s.Stats().Runs)
	checkMemory(t, s, mappedBefore, "after the older half's spill")
	assertSorted(t, recs, drainEach(t, s, 64<<10, func() { checkMemory(t, s, mappedBefore, "reading") }))
}
