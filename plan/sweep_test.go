package plan

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// plantOrphan lays out, in dir, what a process killed mid-spill leaves: a plan dir holding a file,
// and its owner lock file, which no process holds.
func plantOrphan(t *testing.T, dir, name string) string {
	t.Helper()
	planDir := filepath.Join(dir, "spillway-"+name)
	require.NoError(t, os.Mkdir(planDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(planDir, "spill-0"), []byte("left behind"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".spillway-"+name+".owner"), nil, 0o600))
	return planDir
}

// Each dir is swept: the orphans go, a live plan's dir (its lock held by this process) stays and
// is still usable, and what is not a plan dir is never touched.
func TestSweepOrphansRemovesOrphansInEveryDirAndNothingElse(t *testing.T) {
	dirs, ld := localDirs(t, 2)
	r := NewRegistry(nil)
	live, err := r.CreatePlan(ld, 1<<20, Unlimited)
	require.NoError(t, err)
	f, err := r.CreateTmpFile(live)
	require.NoError(t, err)
	path, err := r.Path(f)
	require.NoError(t, err)
	liveDir := filepath.Dir(path)

	orphans := []string{plantOrphan(t, dirs[0], "dead0"), plantOrphan(t, dirs[1], "dead1")}
	other := filepath.Join(dirs[0], "not-a-plan-dir")
	require.NoError(t, os.Mkdir(other, 0o700))

	removed, err := SweepOrphans(dirs)
	require.NoError(t, err)
	assert.Equal(t, 2, removed)
	for _, o := range orphans {
		assert.NoDirExists(t, o)
		assert.NoFileExists(t, filepath.Join(filepath.Dir(o), "."+filepath.Base(o)+".owner"))
	}
	assert.DirExists(t, liveDir, "a live plan's dir is never swept")
	assert.DirExists(t, other)
	require.NoError(t, r.Write(f, []byte("still usable")))

	removed, err = SweepOrphans(dirs)
	require.NoError(t, err)
	assert.Zero(t, removed, "a second sweep finds nothing")
	require.NoError(t, r.ReleasePlan(live))
	assert.NoDirExists(t, liveDir)
}

// Dirs are validated as a plan's local dirs are, before anything is touched; a dir that does not
// exist has no orphans.
func TestSweepOrphansValidatesTheDirsFirst(t *testing.T) {
	dir := t.TempDir()
	orphan := plantOrphan(t, dir, "dead")
	for _, bad := range [][]string{nil, {}, {dir, "relative"}, {dir, ""}, {dir, dir}} {
		removed, err := SweepOrphans(bad)
		assert.Equal(t, KindInvalidArgument, Classify(err), "%q: %v", bad, err)
		assert.Zero(t, removed)
	}
	assert.DirExists(t, orphan, "a refused call touches nothing")

	removed, err := SweepOrphans([]string{filepath.Join(dir, "missing"), dir})
	require.NoError(t, err)
	assert.Equal(t, 1, removed)
	assert.NoDirExists(t, orphan)
}
