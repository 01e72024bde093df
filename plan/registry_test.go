package plan

import (
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/plan/extsort"
)

func localDirs(t testing.TB, n int) ([]string, LocalDirs) {
	t.Helper()
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	ld, err := ParseLocalDirs(dirs)
	require.NoError(t, err)
	return dirs, ld
}

func listing(t *testing.T, dirs []string) []string {
	t.Helper()
	var out []string
	for _, d := range dirs {
		require.NoError(t, filepath.WalkDir(d, func(p string, _ fs.DirEntry, err error) error {
			out = append(out, p)
			return err
		}))
	}
	return out
}

func TestPlanLifecycle(t *testing.T) {
	dirs, ld := localDirs(t, 2)
	before := listing(t, dirs)
	r := NewRegistry(nil)

	h, err := r.CreatePlan(ld, 1000, Unlimited)
	require.NoError(t, err)
	assert.Equal(t, before, listing(t, dirs), "creating a plan touches nothing")

	fh, err := r.CreateTmpFile(h)
	require.NoError(t, err)
	path, err := r.Path(fh)
	require.NoError(t, err)
	assert.FileExists(t, path)
	require.NoError(t, r.Write(fh, make([]byte, 600)))
	used, err := r.UsedDiskSpace(h)
	require.NoError(t, err)
	assert.Equal(t, int64(600), used)

	err = r.Write(fh, make([]byte, 401))
	assert.Equal(t, KindLimitExceeded, Classify(err))
	assert.Contains(t, err.Error(), MaxTempDirectorySizeKey)

	fh2, err := r.CreateTmpFile(h)
	require.NoError(t, err)
	require.NoError(t, r.Write(fh2, make([]byte, 400)))
	require.NoError(t, r.ReleaseTmpFile(fh))
	used, _ = r.UsedDiskSpace(h)
	assert.Equal(t, int64(400), used)
	assert.NoFileExists(t, path)

	require.NoError(t, r.ReleasePlan(h))
	assert.Equal(t, before, listing(t, dirs), "release removes all the plan created")
	assert.Zero(t, r.LivePlans())
	assert.Zero(t, r.LiveFiles())
}

func TestReleasedAndForgedHandlesAreRejected(t *testing.T) {
	_, ld := localDirs(t, 1)
	r := NewRegistry(nil)
	h, err := r.CreatePlan(ld, 1000, Unlimited)
	require.NoError(t, err)
	fh, err := r.CreateTmpFile(h)
	require.NoError(t, err)
	require.NoError(t, r.ReleasePlan(h))

	invalid := func(err error) {
		t.Helper()
		require.Error(t, err)
		assert.Equal(t, KindInvalidHandle, Classify(err), err.Error())
	}
	invalid(r.ReleasePlan(h))
	_, err = r.CreateTmpFile(h)
	invalid(err)
	_, err = r.UsedDiskSpace(h)
	invalid(err)
	invalid(r.Write(fh, []byte{1}))
	_, err = r.Path(fh)
	invalid(err)
	invalid(r.ReleaseTmpFile(fh))
	for _, forged := range []uint64{0, 1, h + 1, fh + 1, rand.Uint64()} {
		_, err = r.UsedDiskSpace(forged)
		invalid(err)
		invalid(r.ReleasePlan(forged))
		_, err = r.Path(forged)
		invalid(err)
	}
	assert.Contains(t, r.ReleasePlan(h).Error(), "released already, or never issued")

	// A new plan never answers to an old handle.
	h2, err := r.CreatePlan(ld, 1000, Unlimited)
	require.NoError(t, err)
	assert.NotEqual(t, h, h2)
	_, err = r.UsedDiskSpace(h)
	invalid(err)
	require.NoError(t, r.ReleasePlan(h2))
}

func TestHandlesAreNeverReused(t *testing.T) {
	tbl := newHandleTable[int]()
	seen := make(map[uint64]bool)
	for i := range 100_000 {
		h := tbl.add(i)
		require.NotZero(t, h)
		require.False(t, seen[h], "handle %d issued twice", h)
		seen[h] = true
		_, ok := tbl.take(h)
		require.True(t, ok)
	}
}

func TestUnscrambleInvertsScramble(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, z := range []uint64{0, 1, 63, 64, 1 << 63, ^uint64(0)} {
		assert.Equal(t, z, unscramble(scramble(z)))
	}
	for range 100_000 {
		z := rng.Uint64()
		require.Equal(t, z, unscramble(scramble(z)))
	}
}

func TestBadConfigurationIsAnArgumentError(t *testing.T) {
	for _, dirs := range [][]string{nil, {}, {""}, {"relative"}, {"/a", "/a"}} {
		_, err := ParseLocalDirs(dirs)
		require.Error(t, err)
		assert.Equal(t, KindInvalidArgument, Classify(err), "%q: %v", dirs, err)
	}
	_, ld := localDirs(t, 1)
	r := NewRegistry(nil)
	_, err := r.CreatePlan(ld, -1, Unlimited)
	assert.Equal(t, KindInvalidArgument, Classify(err))
	_, err = r.CreatePlan(LocalDirs{}, 1, Unlimited)
	assert.Equal(t, KindInvalidArgument, Classify(err))
	assert.Zero(t, r.LivePlans())
}

func TestUnusableDirsFailOnlyAtFirstSpill(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	ld, err := ParseLocalDirs([]string{missing})
	require.NoError(t, err)
	r := NewRegistry(nil)
	h, err := r.CreatePlan(ld, 1000, Unlimited)
	require.NoError(t, err, "a plan that never spills never fails on its dirs")
	_, err = r.CreateTmpFile(h)
	require.Error(t, err)
	assert.Equal(t, KindIO, Classify(err))
	assert.Contains(t, err.Error(), missing)
	require.NoError(t, r.ReleasePlan(h))
	assert.NoDirExists(t, missing)
}

func TestTwoPlansSeparateLimits(t *testing.T) {
	_, ld := localDirs(t, 1)
	r := NewRegistry(nil)
	a, _ := r.CreatePlan(ld, 10, Unlimited)
	b, _ := r.CreatePlan(ld, 10, Unlimited)
	fa, err := r.CreateTmpFile(a)
	require.NoError(t, err)
	fb, err := r.CreateTmpFile(b)
	require.NoError(t, err)
	require.NoError(t, r.Write(fa, make([]byte, 8)))
	require.NoError(t, r.Write(fb, make([]byte, 8)))
	assert.Equal(t, KindLimitExceeded, Classify(r.Write(fa, make([]byte, 8))))
	require.NoError(t, r.Write(fb, make([]byte, 2)))
	require.NoError(t, r.ReleasePlan(a))
	require.NoError(t, r.ReleasePlan(b))
}

// Many goroutines create, spill into and release plans at once, racing releases against
// writes; run under -race. Afterwards nothing is registered and nothing is on disk.
func TestConcurrentPlans(t *testing.T) {
	dirs, ld := localDirs(t, 3)
	before := listing(t, dirs)
	r := NewRegistry(nil)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 200 {
				h, err := r.CreatePlan(ld, 64<<10, Unlimited)
				if !assert.NoError(t, err) {
					return
				}
				if rng.IntN(3) == 0 { // most plans never spill
					for range rng.IntN(4) + 1 {
						fh, err := r.CreateTmpFile(h)
						if !assert.NoError(t, err) {
							return
						}
						err = r.Write(fh, make([]byte, rng.IntN(32<<10)))
						if err != nil {
							assert.Equal(t, KindLimitExceeded, Classify(err))
						}
						if rng.IntN(2) == 0 {
							assert.NoError(t, r.ReleaseTmpFile(fh))
						}
					}
				}
				assert.NoError(t, r.ReleasePlan(h))
			}
		})
	}
	// A goroutine racing releases against another goroutine's use of the same plan.
	for range 4 {
		wg.Go(func() {
			for range 100 {
				h, _ := r.CreatePlan(ld, 1<<20, Unlimited)
				fh, err := r.CreateTmpFile(h)
				if !assert.NoError(t, err) {
					return
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					for range 10 {
						if err := r.Write(fh, make([]byte, 100)); err != nil {
							assert.Equal(t, KindInvalidHandle, Classify(err))
							return
						}
					}
				}()
				assert.NoError(t, r.ReleasePlan(h))
				<-done
			}
		})
	}
	wg.Wait()
	assert.Zero(t, r.LivePlans())
	assert.Zero(t, r.LiveFiles())
	assert.Equal(t, before, listing(t, dirs))
}

func TestLeftoverIsReportedButPlanStillReleased(t *testing.T) {
	_, ld := localDirs(t, 1)
	r := NewRegistry(nil)
	h, _ := r.CreatePlan(ld, 100, Unlimited)
	fh, err := r.CreateTmpFile(h)
	require.NoError(t, err)
	path, _ := r.Path(fh)
	stray := filepath.Join(filepath.Dir(path), "stray")
	require.NoError(t, os.WriteFile(stray, nil, 0o600))
	err = r.ReleasePlan(h)
	require.Error(t, err)
	assert.Equal(t, KindIO, Classify(err))
	assert.Zero(t, r.LivePlans())
	assert.FileExists(t, stray)
	assert.NoFileExists(t, path)
}

func TestSortsBelongToTheirPlan(t *testing.T) {
	dirs, ld := localDirs(t, 2)
	before := listing(t, dirs)
	r := NewRegistry(nil)
	h, err := r.CreatePlan(ld, 1<<20, Unlimited)
	require.NoError(t, err)

	_, err = r.CreateSort(h, 0)
	assert.Equal(t, KindInvalidArgument, Classify(err), "a budget of 0 is refused")

	sh, err := r.CreateSort(h, 1024)
	require.NoError(t, err)
	var batch []byte
	for i := range 200 {
		batch = extsort.AppendRecord(batch, []byte{byte(200 - i)}, make([]byte, 32))
	}
	taken, st, err := r.SortAdd(sh, batch, math.MaxInt64)
	require.NoError(t, err)
	assert.Equal(t, len(batch), taken)
	assert.Positive(t, st.Runs, "a 1 KiB budget spills")
	assert.Zero(t, st.MemoryNeeded)
	_, _, err = r.SortAdd(sh, batch, -1)
	assert.Equal(t, KindInvalidArgument, Classify(err), "a negative limit is refused")
	assert.NotEqual(t, before, listing(t, dirs))

	// Releasing the plan closes its sort and deletes the runs with everything else.
	require.NoError(t, r.ReleasePlan(h))
	assert.Equal(t, before, listing(t, dirs))
	assert.Zero(t, r.LiveSorts())
	_, err = r.SortStats(sh)
	assert.Equal(t, KindInvalidHandle, Classify(err))
	_, _, err = r.SortAdd(sh, batch, math.MaxInt64)
	assert.Equal(t, KindInvalidHandle, Classify(err))
	assert.Equal(t, KindInvalidHandle, Classify(r.ReleaseSort(sh)))
	_, err = r.CreateSort(h, 1024)
	assert.Equal(t, KindInvalidHandle, Classify(err))
}

func TestReleaseSortDeletesItsRuns(t *testing.T) {
	_, ld := localDirs(t, 1)
	r := NewRegistry(nil)
	h, _ := r.CreatePlan(ld, 1<<20, Unlimited)
	sh, err := r.CreateSort(h, 512)
	require.NoError(t, err)
	var batch []byte
	for i := range 100 {
		batch = extsort.AppendRecord(batch, []byte{byte(i)}, make([]byte, 40))
	}
	_, _, err = r.SortAdd(sh, batch, math.MaxInt64)
	require.NoError(t, err)
	used, _ := r.UsedDiskSpace(h)
	assert.Positive(t, used)
	require.NoError(t, r.ReleaseSort(sh))
	used, _ = r.UsedDiskSpace(h)
	assert.Zero(t, used, "the sort's run files are given back")
	assert.Zero(t, r.LiveSorts())
	require.NoError(t, r.ReleasePlan(h))
}

func TestExecutorLimitAndStats(t *testing.T) {
	dirs, ld := localDirs(t, 1)
	before := listing(t, dirs)
	r := NewRegistry(nil)
	a, err := r.CreatePlan(ld, 100, 150)
	require.NoError(t, err)
	b, err := r.CreatePlan(ld, 100, 150)
	require.NoError(t, err)
	fa, err := r.CreateTmpFile(a)
	require.NoError(t, err)
	fb, err := r.CreateTmpFile(b)
	require.NoError(t, err)
	require.NoError(t, r.Write(fa, make([]byte, 100)))
	err = r.Write(fb, make([]byte, 60))
	assert.Equal(t, KindLimitExceeded, Classify(err))
	assert.Contains(t, err.Error(), MaxExecutorTempDirectorySizeKey)
	require.NoError(t, r.Write(fb, make([]byte, 50)))

	_, err = r.CreatePlan(ld, 100, -1)
	assert.Equal(t, KindInvalidArgument, Classify(err))

	st := r.Stats()
	assert.Positive(t, st.GoHeapBytes)
	st.GoHeapBytes = 0
	assert.Equal(t, Stats{
		LivePlans: 2, PlansSpilled: 2, DirsCreated: 2, FilesCreated: 2,
		BytesWritten: 150, LimitFailures: 1, BytesInUse: 150, PlansCreated: 2,
	}, st)
	require.NoError(t, r.ReleasePlan(a))
	require.NoError(t, r.ReleasePlan(b))
	st = r.Stats()
	assert.Zero(t, st.LivePlans)
	assert.Zero(t, st.BytesInUse)
	assert.EqualValues(t, 2, st.PlansCreated, "a count: releases do not lower it")
	assert.Equal(t, before, listing(t, dirs))
}
