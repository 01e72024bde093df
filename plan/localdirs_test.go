package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRegisteredLocalDirsBackPlansUntilReleased(t *testing.T) {
	dirs, _ := localDirs(t, 2)
	before := listing(t, dirs)
	r := NewRegistry(nil)

	dh, err := r.RegisterLocalDirs(dirs)
	require.NoError(t, err)
	assert.Equal(t, 1, r.LiveLocalDirs())
	h, err := r.CreatePlanIn(dh, 1000, Unlimited)
	require.NoError(t, err)
	assert.Equal(t, before, listing(t, dirs), "registering dirs and creating a plan touch nothing")

	// Releasing the registration leaves the plans made from it working.
	require.NoError(t, r.ReleaseLocalDirs(dh))
	assert.Equal(t, 0, r.LiveLocalDirs())
	fh, err := r.CreateTmpFile(h)
	require.NoError(t, err)
	path, err := r.Path(fh)
	require.NoError(t, err)
	assert.True(t, filepath.Dir(filepath.Dir(path)) == dirs[0] || filepath.Dir(filepath.Dir(path)) == dirs[1], path)
	require.NoError(t, r.ReleasePlan(h))
	assert.Equal(t, before, listing(t, dirs))

	// A released registration is refused, twice released included.
	_, err = r.CreatePlanIn(dh, 1000, Unlimited)
	assert.Equal(t, KindInvalidHandle, Classify(err))
	assert.Equal(t, KindInvalidHandle, Classify(r.ReleaseLocalDirs(dh)))
}

func TestRegisterLocalDirsRefusesBadDirsAndOtherHandles(t *testing.T) {
	dir := t.TempDir()
	r := NewRegistry(nil)
	for _, bad := range [][]string{nil, {}, {""}, {"rel"}, {dir, dir + "/."}, {dir + "/a\x00b"}} {
		_, err := r.RegisterLocalDirs(bad)
		assert.Equal(t, KindInvalidArgument, Classify(err), "%q", bad)
	}
	assert.Equal(t, 0, r.LiveLocalDirs())

	dh, err := r.RegisterLocalDirs([]string{dir})
	require.NoError(t, err)
	h, err := r.CreatePlanIn(dh, 1, Unlimited)
	require.NoError(t, err)
	// A plan handle is no registration, a registration no plan, and forged handles miss.
	for _, forged := range []uint64{0, 1, h, dh ^ 1, dh + 1} {
		_, err := r.CreatePlanIn(forged, 1, Unlimited)
		assert.Equal(t, KindInvalidHandle, Classify(err), "%d", forged)
	}
	assert.Equal(t, KindInvalidHandle, Classify(r.ReleasePlan(dh)))
	_, err = r.CreatePlanIn(dh, -1, Unlimited)
	assert.Equal(t, KindInvalidArgument, Classify(err))
	require.NoError(t, r.ReleasePlan(h))
	require.NoError(t, r.ReleaseLocalDirs(dh))
}

func TestManyLocalDirsAreValidatedInLinearTime(t *testing.T) {
	// 70,000 dirs, over the 65,528 a JNI local frame could hold, and one duplicate far apart:
	// a quadratic duplicate check takes tens of seconds here (no timing is asserted; the test
	// timeout is the bound).
	base := t.TempDir()
	dirs := make([]string, 70_000)
	for i := range dirs {
		dirs[i] = fmt.Sprintf("%s/d%d", base, i)
	}
	r := NewRegistry(nil)
	dh, err := r.RegisterLocalDirs(dirs)
	require.NoError(t, err)
	require.NoError(t, r.ReleaseLocalDirs(dh))
	_, err = r.RegisterLocalDirs(append(dirs, dirs[3]+"/"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "#3")
	assert.Contains(t, err.Error(), "#70000")
}

func TestConcurrentRegistrationsAndPlans(t *testing.T) {
	dirs, _ := localDirs(t, 2)
	r := NewRegistry(nil)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				dh, err := r.RegisterLocalDirs(dirs)
				if !assert.NoError(t, err) {
					return
				}
				h, err := r.CreatePlanIn(dh, 1<<20, Unlimited)
				assert.NoError(t, err)
				assert.NoError(t, r.ReleaseLocalDirs(dh))
				assert.NoError(t, r.ReleasePlan(h))
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 0, r.LiveLocalDirs())
	assert.Equal(t, 0, r.LivePlans())
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		require.NoError(t, err)
		assert.Empty(t, entries)
	}
}
