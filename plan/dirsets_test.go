package plan

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testKey is an exact encoding of a list for CreatePlanForDirs: each path with its length.
func testKey(paths []string) []byte {
	var b []byte
	for _, p := range paths {
		b = fmt.Appendf(b, "%d:%s;", len(p), p)
	}
	return b
}

// createForDirs calls CreatePlanForDirs with paths, counting the calls of its paths func.
func createForDirs(r *Registry, paths []string, calls *int) (uint64, error) {
	return r.CreatePlanForDirs(testKey(paths), func() ([]string, error) {
		*calls++
		return paths, nil
	}, 1<<20, Unlimited)
}

func TestCreatePlanForDirsReusesAValidatedSetByContent(t *testing.T) {
	dirs, _ := localDirs(t, 3)
	before := listing(t, dirs)
	r := NewRegistry(nil)
	calls := 0
	var plans []uint64
	for i := 0; i < 3; i++ {
		// A new slice of new strings each time: the same content is the same set.
		same := make([]string, len(dirs))
		for j, d := range dirs {
			same[j] = strings.Clone(d)
		}
		h, err := createForDirs(r, same, &calls)
		require.NoError(t, err)
		got, err := r.PlanDirs(h)
		require.NoError(t, err)
		assert.Equal(t, dirs, got)
		plans = append(plans, h)
	}
	assert.Equal(t, 1, calls, "the set is converted once")
	assert.Equal(t, 1, r.CachedDirSets())
	assert.Equal(t, 0, r.LiveLocalDirs(), "the cache is no registration")
	assert.Equal(t, before, listing(t, dirs), "creating plans touches nothing")

	// Another order is another list: the plan's order is the caller's.
	rev := []string{dirs[2], dirs[1], dirs[0]}
	h, err := createForDirs(r, rev, &calls)
	require.NoError(t, err)
	got, _ := r.PlanDirs(h)
	assert.Equal(t, rev, got)
	assert.Equal(t, 2, calls)

	// Each plan still has its own limit, and is lazy: its first file creates its dir.
	fh, err := r.CreateTmpFile(plans[0])
	require.NoError(t, err)
	require.NoError(t, r.Write(fh, make([]byte, 1<<20)))
	assert.Equal(t, KindLimitExceeded, Classify(r.Write(fh, []byte{1})))
	for _, p := range append(plans, h) {
		require.NoError(t, r.ReleasePlan(p))
	}
	assert.Equal(t, before, listing(t, dirs))
}

func TestCreatePlanForDirsRemembersNoError(t *testing.T) {
	dir := t.TempDir()
	r := NewRegistry(nil)
	for _, bad := range [][]string{{}, {""}, {"rel"}, {dir, dir + "/."}, {dir + "/a\x00b"}} {
		for i := 0; i < 2; i++ {
			calls := 0
			_, err := createForDirs(r, bad, &calls)
			_, want := ParseLocalDirs(bad)
			require.Error(t, want)
			assert.Equal(t, want, err, "%q: the error of ParseLocalDirs, every time", bad)
			assert.Equal(t, 1, calls, "%q", bad)
		}
	}
	// The paths func's own error is returned as it is, and nothing is remembered.
	boom := &ArgumentError{Reason: "localDirs[0] is null"}
	for i := 0; i < 2; i++ {
		_, err := r.CreatePlanForDirs([]byte("k"), func() ([]string, error) { return nil, boom }, 1, Unlimited)
		assert.Same(t, boom, err)
	}
	assert.Equal(t, 0, r.CachedDirSets())
	assert.Equal(t, 0, r.LivePlans())

	// Limits are checked per plan, on a hit too.
	calls := 0
	_, err := createForDirs(r, []string{dir}, &calls)
	require.NoError(t, err)
	_, err = r.CreatePlanForDirs(testKey([]string{dir}), nil, -1, Unlimited)
	assert.Equal(t, KindInvalidArgument, Classify(err))
	_, err = r.CreatePlanForDirs(testKey([]string{dir}), nil, 1, -1)
	assert.Equal(t, KindInvalidArgument, Classify(err))
}

func TestCreatePlanForDirsIsBounded(t *testing.T) {
	base := t.TempDir()
	r := NewRegistry(nil)
	calls := 0
	for i := 0; i < maxCachedDirSets; i++ {
		_, err := createForDirs(r, []string{fmt.Sprintf("%s/d%d", base, i)}, &calls)
		require.NoError(t, err)
	}
	assert.Equal(t, maxCachedDirSets, r.CachedDirSets())
	// One more starts again from it alone, and the newest set hits from then on.
	newest := []string{base + "/newest"}
	_, err := createForDirs(r, newest, &calls)
	require.NoError(t, err)
	assert.Equal(t, 1, r.CachedDirSets())
	_, err = createForDirs(r, newest, &calls)
	require.NoError(t, err)
	assert.Equal(t, maxCachedDirSets+1, calls)

	// A list whose key is past the bound is converted every time.
	long := []string{base + "/" + strings.Repeat("x", maxCachedDirKeyLen)}
	for i := 0; i < 2; i++ {
		h, err := createForDirs(r, long, &calls)
		require.NoError(t, err)
		got, _ := r.PlanDirs(h)
		assert.Equal(t, long, got)
	}
	assert.Equal(t, maxCachedDirSets+3, calls)
	assert.Equal(t, 1, r.CachedDirSets())
}

// Concurrent callers with overlapping and changing sets, more of them than the cache holds, each
// get a plan in exactly the dirs they asked for.
func TestCreatePlanForDirsConcurrentCallersGetTheirOwnDirs(t *testing.T) {
	base := t.TempDir()
	r := NewRegistry(nil)
	sets := make([][]string, maxCachedDirSets+8)
	for i := range sets {
		sets[i] = []string{fmt.Sprintf("%s/s%d/a", base, i), fmt.Sprintf("%s/s%d/b", base, i%3)}
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 400; i++ {
				want := sets[(i*7+g*13)%len(sets)]
				h, err := r.CreatePlanForDirs(testKey(want), func() ([]string, error) {
					return append([]string(nil), want...), nil
				}, 1<<20, Unlimited)
				if !assert.NoError(t, err) {
					return
				}
				got, err := r.PlanDirs(h)
				assert.NoError(t, err)
				assert.Equal(t, want, got)
				assert.NoError(t, r.ReleasePlan(h))
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, r.CachedDirSets(), maxCachedDirSets)
	assert.Equal(t, 0, r.LivePlans())
}

func TestPlanDirsRefusesOtherHandles(t *testing.T) {
	r := NewRegistry(nil)
	_, err := r.PlanDirs(12345)
	assert.Equal(t, KindInvalidHandle, Classify(err))
}
