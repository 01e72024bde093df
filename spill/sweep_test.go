package spill_test

import (
	"bufio"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/errorfs"
	"golang.org/x/sys/unix"
)

// TestMain doubles as the child process of the sweep tests: with $SPILLWAY_CHILD_ROOT set, the
// test binary spills one file there, prints its path and holds the plan open, like a live
// executor, until stdin closes. It is also the child of the real-fault tests that need a
// process-wide limit (realfault_test.go).
func TestMain(m *testing.M) {
	if root := os.Getenv("SPILLWAY_CHILD_ROOT"); root != "" {
		os.Exit(spillAsChild(root))
	}
	if arg := os.Getenv("SPILLWAY_CHILD_FSIZE"); arg != "" {
		os.Exit(efbigChild(arg))
	}
	if root := os.Getenv("SPILLWAY_CHILD_EMFILE"); root != "" {
		os.Exit(emfileChild(root))
	}
	os.Exit(m.Run())
}

func spillAsChild(root string) int {
	roots, err := spill.NewRoots([]string{root})
	if err != nil {
		return 2
	}
	m, err := spill.New(spill.Config{Roots: roots, Limit: 1 << 20})
	if err != nil {
		return 2
	}
	f, err := m.CreateFile()
	if err != nil {
		return 2
	}
	if _, err := f.Write([]byte("spilled by a child")); err != nil {
		return 2
	}
	os.Stdout.WriteString(f.Path() + "\n")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	if m.Close() != nil {
		return 2
	}
	return 0
}

// spillingChild starts a child process that holds a plan with one spill file under root.
func spillingChild(t *testing.T, root string) (cmd *exec.Cmd, path string, stop func()) {
	t.Helper()
	cmd = exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "SPILLWAY_CHILD_ROOT="+root)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	stop = func() { stdin.Close(); _ = cmd.Wait() }
	t.Cleanup(stop)
	return cmd, strings.TrimSpace(line), stop
}

func TestSweepRemovesOnlyTheDirsOfDeadProcesses(t *testing.T) {
	root := t.TempDir()
	_, livePath, _ := spillingChild(t, root)
	killed, deadPath, _ := spillingChild(t, root)
	require.FileExists(t, livePath)
	require.FileExists(t, deadPath)

	removed, err := spill.SweepOrphans(root)
	require.NoError(t, err)
	assert.Empty(t, removed, "both owners are alive")

	require.NoError(t, killed.Process.Signal(syscall.SIGKILL)) // mid-spill, no cleanup runs
	_ = killed.Wait()
	require.FileExists(t, deadPath, "a killed process leaves its plan dir")

	removed, err = spill.SweepOrphans(root)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Dir(deadPath)}, removed)
	assert.NoDirExists(t, filepath.Dir(deadPath))
	assert.FileExists(t, livePath, "a live process's plan dir is never touched")

	removed, err = spill.SweepOrphans(root)
	require.NoError(t, err)
	assert.Empty(t, removed, "a second sweep finds nothing")
}

func TestSweepSparesThisProcessesLivePlans(t *testing.T) {
	root := t.TempDir()
	m := newManager(t, []string{root}, 1<<20, nil)
	f, err := m.CreateFile()
	require.NoError(t, err)
	removed, err := spill.SweepOrphans(root)
	require.NoError(t, err)
	assert.Empty(t, removed)
	assert.FileExists(t, f.Path())
}

func TestSweepNeverFollowsSymlinksOrLeavesTheDir(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	precious := filepath.Join(outside, "precious")
	require.NoError(t, os.WriteFile(precious, []byte("keep"), 0o600))
	lock := func(planName string) string { return filepath.Join(root, spill.OwnerLockName(planName)) }

	// An unowned lock whose "plan dir" is a symlink to a dir outside.
	lure := filepath.Join(outside, "lure")
	require.NoError(t, os.Mkdir(lure, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(lure, "spill-x"), nil, 0o600))
	require.NoError(t, os.WriteFile(lock(spill.DirPrefix+"link"), nil, 0o600))
	require.NoError(t, os.Symlink(lure, filepath.Join(root, spill.DirPrefix+"link")))

	// A real orphan whose contents include a symlink to a file outside.
	orphan := filepath.Join(root, spill.DirPrefix+"orphan")
	require.NoError(t, os.Mkdir(orphan, 0o700))
	require.NoError(t, os.WriteFile(lock(spill.DirPrefix+"orphan"), nil, 0o600))
	require.NoError(t, os.Symlink(precious, filepath.Join(orphan, "spill-link")))

	// A plan dir whose lock file is a symlink, one with no lock file, a lock with no dir, and a
	// dir that is not a plan dir.
	linkedLock := filepath.Join(root, spill.DirPrefix+"linked-lock")
	require.NoError(t, os.Mkdir(linkedLock, 0o700))
	require.NoError(t, os.Symlink(precious, lock(spill.DirPrefix+"linked-lock")))
	unlocked := filepath.Join(root, spill.DirPrefix+"no-lock")
	require.NoError(t, os.Mkdir(unlocked, 0o700))
	require.NoError(t, os.WriteFile(lock(spill.DirPrefix+"dirless"), nil, 0o600))
	other := filepath.Join(root, "blockmgr-other")
	require.NoError(t, os.Mkdir(other, 0o700))

	removed, err := spill.SweepOrphans(root)
	require.NoError(t, err)
	assert.Equal(t, []string{orphan}, removed)
	assert.NoDirExists(t, orphan)
	assert.NoFileExists(t, lock(spill.DirPrefix+"orphan"))
	assert.NoFileExists(t, lock(spill.DirPrefix+"dirless"), "a free lock without its dir is swept too")
	assert.FileExists(t, precious)
	assert.FileExists(t, filepath.Join(lure, "spill-x"))
	assert.FileExists(t, lock(spill.DirPrefix+"link"), "a plan dir that is a symlink is left, with its lock")
	assert.DirExists(t, linkedLock)
	assert.DirExists(t, unlocked)
	assert.DirExists(t, other)
}

func TestSweepOfAMissingDirIsNotAnError(t *testing.T) {
	removed, err := spill.SweepOrphans(filepath.Join(t.TempDir(), "gone"))
	assert.NoError(t, err)
	assert.Empty(t, removed)
}

// Both ways of making a lock file leave it named, locked, and nothing else behind.
func TestLockFilesAppearLocked(t *testing.T) {
	for name, create := range map[string]func(spill.Dir, string) (spill.Lock, error){
		"O_TMPFILE": func(d spill.Dir, name string) (spill.Lock, error) { return d.CreateLock(name, spill.FileMode) },
		"rename":    spill.CreateLockByRename,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			d, err := spill.OSFS{}.OpenRoot(dir)
			require.NoError(t, err)
			defer d.Close()
			lockName := spill.OwnerLockName(spill.DirPrefix + "x")
			path := filepath.Join(dir, lockName)
			lock, err := create(d, lockName)
			require.NoError(t, err)
			other, err := os.Open(path)
			require.NoError(t, err)
			defer other.Close()
			assert.ErrorIs(t, unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, entries, 1, "no temporary name is left")
			info, err := entries[0].Info()
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), info.Mode())
			_, err = create(d, lockName)
			assert.ErrorIs(t, err, fs.ErrExist, "an existing lock file is never replaced")
			require.NoError(t, lock.Close())
			assert.NoError(t, unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB))
		})
	}
}

// Faults reach the sweep through the seam: a failed unlink inside an orphan leaves the orphan and
// its lock file for the next sweep, with an error naming what could not be removed.
func TestSweepFaultsAreReportedAndTheNextSweepFinishes(t *testing.T) {
	root := t.TempDir()
	orphan := filepath.Join(root, spill.DirPrefix+"orphan")
	require.NoError(t, os.Mkdir(orphan, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(orphan, "spill-a"), []byte("a"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, spill.OwnerLockName(spill.DirPrefix+"orphan")), nil, 0o600))

	for _, tc := range []struct {
		op   errorfs.Op
		path string
	}{
		{errorfs.OpReadDir, root},
		{errorfs.OpTryLock, filepath.Join(root, spill.OwnerLockName(spill.DirPrefix+"orphan"))},
		{errorfs.OpRemove, filepath.Join(orphan, "spill-a")},
		{errorfs.OpRemoveDir, orphan},
	} {
		var calls atomic.Int64
		fsys := errorfs.Wrap(spill.OSFS{}, errorfs.First(
			errorfs.Log(func(errorfs.Op, string) { calls.Add(1) }),
			errorfs.Errno(syscall.EIO, errorfs.OnOp(tc.op), errorfs.OnPath(tc.path))))
		removed, err := spill.SweepOrphansFS(fsys, root)
		require.ErrorIs(t, err, syscall.EIO, tc.op.String())
		var pathErr *fs.PathError
		require.ErrorAs(t, err, &pathErr)
		assert.Equal(t, tc.path, pathErr.Path)
		assert.Empty(t, removed)
		assert.DirExists(t, orphan, "a failed sweep leaves the orphan")
		assert.FileExists(t, filepath.Join(root, spill.OwnerLockName(spill.DirPrefix+"orphan")), "and its lock file, for the next sweep")
		assert.Positive(t, calls.Load())
	}
	removed, err := spill.SweepOrphans(root)
	require.NoError(t, err)
	assert.Equal(t, []string{orphan}, removed)
	assert.Len(t, tree(t, root), 1)
}
