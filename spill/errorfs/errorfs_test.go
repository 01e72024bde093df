package errorfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/errorfs"
	"github.com/spillway/spillway/spill/faultenv"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv("ERRORFS_CHILD_LIMITS"); dir != "" {
		os.Exit(limitsChild(dir))
	}
	os.Exit(m.Run())
}

// outcome is what a caller of the seam sees of a failed call, and what it left on disk.
type outcome struct {
	N      int    // bytes reported written
	Op     string // the *fs.PathError's Op
	Name   string // the last element of its Path
	Errno  syscall.Errno
	Exists bool // the file or dir the call was about is there afterwards
	Part   bool // a failed write left part of its data, and not all of it, on disk
}

func (o outcome) String() string {
	return fmt.Sprintf("n=%d op=%q name=%q errno=%d exists=%t part=%t", o.N, o.Op, o.Name, o.Errno, o.Exists, o.Part)
}

func parseOutcome(t *testing.T, s string) outcome {
	var o outcome
	var errno int
	_, err := fmt.Sscanf(s, "n=%d op=%q name=%q errno=%d exists=%t part=%t", &o.N, &o.Op, &o.Name, &errno, &o.Exists, &o.Part)
	require.NoError(t, err, "parsing %q", s)
	o.Errno = syscall.Errno(errno)
	return o
}

func outcomeOf(err error, path string) outcome {
	var o outcome
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		o.Op, o.Name = pathErr.Op, filepath.Base(pathErr.Path)
		if pathErr.Path != path {
			o.Name = "WRONG-PATH:" + pathErr.Path
		}
		errors.As(err, &o.Errno)
	}
	_, statErr := os.Lstat(path)
	o.Exists = statErr == nil
	return o
}

// writeOutcome writes size bytes at offset 0 of a new file name in root and describes the result.
func writeOutcome(t testing.TB, fsys spill.FS, root, name string, size int) outcome {
	d, err := fsys.OpenRoot(root)
	require.NoError(t, err)
	defer d.Close()
	h, err := d.CreateExclusive(name, 0o600)
	require.NoError(t, err)
	defer h.Close()
	n, err := h.WriteAt(make([]byte, size), 0)
	require.Error(t, err)
	path := filepath.Join(root, name)
	o := outcomeOf(err, path)
	o.N = n
	info, statErr := os.Stat(path)
	require.NoError(t, statErr)
	o.Part = info.Size() > 0 && info.Size() < int64(size)
	return o
}

func injecting(errno syscall.Errno, op errorfs.Op) *errorfs.FS {
	return errorfs.Wrap(spill.OSFS{}, errorfs.Errno(errno, errorfs.OnOp(op)))
}

// Each injected fault is compared with the same fault made for real, through OSFS: what the
// caller is told (bytes written, the PathError's Op, path and errno) and what is left on disk.
func TestInjectedFaultsLookReal(t *testing.T) {
	t.Run("write ENOSPC on a full tmpfs", func(t *testing.T) {
		full := faultenv.Tmpfs(t, "size=1m")
		real := writeOutcome(t, spill.OSFS{}, full, "f", 2<<20)
		injected := writeOutcome(t, injecting(syscall.ENOSPC, errorfs.OpWrite), t.TempDir(), "f", 2<<20)
		assert.Equal(t, outcome{N: 0, Op: "write", Name: "f", Errno: syscall.ENOSPC, Exists: true, Part: true}, real)
		assert.Equal(t, real, injected)
	})
	t.Run("write EFBIG and create EMFILE under rlimits", func(t *testing.T) {
		dir := t.TempDir()
		out, err := faultenv.Child("ERRORFS_CHILD_LIMITS", dir).CombinedOutput()
		require.NoError(t, err, "child: %s", out)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		require.Len(t, lines, 2, "child: %s", out)
		realEFBIG, realEMFILE := parseOutcome(t, lines[0]), parseOutcome(t, lines[1])
		assert.Equal(t, outcome{N: 0, Op: "write", Name: "f", Errno: syscall.EFBIG, Exists: true, Part: true}, realEFBIG)
		assert.Equal(t, realEFBIG, writeOutcome(t, injecting(syscall.EFBIG, errorfs.OpWrite), t.TempDir(), "f", 2<<20))
		assert.Equal(t, outcome{Op: "open", Name: "g", Errno: syscall.EMFILE}, realEMFILE)
		assert.Equal(t, realEMFILE, createOutcome(t, injecting(syscall.EMFILE, errorfs.OpCreate), t.TempDir(), "g"))
	})
	t.Run("create, mkdir and lock ENOSPC on a tmpfs out of inodes", func(t *testing.T) {
		full := faultenv.Tmpfs(t, "size=1m,nr_inodes=4")
		for i := 0; ; i++ {
			if err := os.Mkdir(filepath.Join(full, "ballast"+strconv.Itoa(i)), 0o700); err != nil {
				require.ErrorIs(t, err, syscall.ENOSPC)
				break
			}
		}
		other := t.TempDir()
		assert.Equal(t, outcome{Op: "open", Name: "f", Errno: syscall.ENOSPC}, createOutcome(t, spill.OSFS{}, full, "f"))
		assert.Equal(t, createOutcome(t, spill.OSFS{}, full, "f"), createOutcome(t, injecting(syscall.ENOSPC, errorfs.OpCreate), other, "f"))
		assert.Equal(t, outcome{Op: "mkdir", Name: "d", Errno: syscall.ENOSPC}, mkdirOutcome(t, spill.OSFS{}, full, "d"))
		assert.Equal(t, mkdirOutcome(t, spill.OSFS{}, full, "d"), mkdirOutcome(t, injecting(syscall.ENOSPC, errorfs.OpMkdir), other, "d"))
		assert.Equal(t, outcome{Op: "open", Name: "l", Errno: syscall.ENOSPC}, lockOutcome(t, spill.OSFS{}, full, "l"))
		assert.Equal(t, lockOutcome(t, spill.OSFS{}, full, "l"), lockOutcome(t, injecting(syscall.ENOSPC, errorfs.OpCreateLock), other, "l"))
	})
	t.Run("remove and rmdir EROFS on a read-only bind mount", func(t *testing.T) {
		src, other := t.TempDir(), t.TempDir()
		for _, dir := range []string{src, other} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), nil, 0o600))
			require.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o700))
		}
		ro := faultenv.ReadOnlyBind(t, src)
		real := removeOutcome(t, spill.OSFS{}, ro, "f", false)
		assert.Equal(t, outcome{Op: "remove", Name: "f", Errno: syscall.EROFS, Exists: true}, real)
		assert.Equal(t, real, removeOutcome(t, injecting(syscall.EROFS, errorfs.OpRemove), other, "f", false))
		real = removeOutcome(t, spill.OSFS{}, ro, "d", true)
		assert.Equal(t, outcome{Op: "rmdir", Name: "d", Errno: syscall.EROFS, Exists: true}, real)
		assert.Equal(t, real, removeOutcome(t, injecting(syscall.EROFS, errorfs.OpRemoveDir), other, "d", true))
	})
	t.Run("statfs ENOENT: the root is not there", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "gone")
		_, err := spill.OSFS{}.FreeSpace(missing)
		real := outcomeOf(err, missing)
		assert.Equal(t, outcome{Op: "statfs", Name: "gone", Errno: syscall.ENOENT}, real)
		there := filepath.Join(t.TempDir(), "gone")
		require.NoError(t, os.Mkdir(there, 0o700))
		_, err = injecting(syscall.ENOENT, errorfs.OpFreeSpace).FreeSpace(there)
		injected := outcomeOf(err, there)
		injected.Exists = false // injected ENOENT claims the root is missing while it is there
		assert.Equal(t, real, injected)
	})
	t.Run("remove ENOENT: the name is gone", func(t *testing.T) {
		real := removeOutcome(t, spill.OSFS{}, t.TempDir(), "never-there", false)
		assert.Equal(t, outcome{Op: "remove", Name: "never-there", Errno: syscall.ENOENT}, real)
		other := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(other, "never-there"), nil, 0o600))
		assert.Equal(t, real, removeOutcome(t, injecting(syscall.ENOENT, errorfs.OpRemove), other, "never-there", false))
	})
}

func createOutcome(t testing.TB, fsys spill.FS, root, name string) outcome {
	d, err := fsys.OpenRoot(root)
	require.NoError(t, err)
	defer d.Close()
	h, err := d.CreateExclusive(name, 0o600)
	if err == nil {
		h.Close()
	}
	require.Error(t, err)
	return outcomeOf(err, filepath.Join(root, name))
}

func mkdirOutcome(t testing.TB, fsys spill.FS, root, name string) outcome {
	d, err := fsys.OpenRoot(root)
	require.NoError(t, err)
	defer d.Close()
	err = d.Mkdir(name, 0o700)
	require.Error(t, err)
	return outcomeOf(err, filepath.Join(root, name))
}

func lockOutcome(t testing.TB, fsys spill.FS, root, name string) outcome {
	d, err := fsys.OpenRoot(root)
	require.NoError(t, err)
	defer d.Close()
	l, err := d.CreateLock(name, 0o600)
	if err == nil {
		l.Close()
	}
	require.Error(t, err)
	return outcomeOf(err, filepath.Join(root, name))
}

func removeOutcome(t testing.TB, fsys spill.FS, root, name string, dir bool) outcome {
	d, err := fsys.OpenRoot(root)
	require.NoError(t, err)
	defer d.Close()
	if dir {
		err = d.RemoveDir(name)
	} else {
		err = d.Remove(name)
	}
	require.Error(t, err)
	return outcomeOf(err, filepath.Join(root, name))
}

// limitsChild makes EFBIG (RLIMIT_FSIZE) and EMFILE (RLIMIT_NOFILE) for real, which need
// process-wide limits, and prints their outcomes.
func limitsChild(dir string) int {
	t := &childT{}
	const fsize = 100_000
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: fsize, Max: fsize}); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	fmt.Println(writeOutcome(t, spill.OSFS{}, dir, "f", 2<<20))
	d, err := spill.OSFS{}.OpenRoot(dir)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	nofile := uint64(faultenv.OpenFiles() + 8)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: nofile, Max: nofile}); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	for { // every descriptor left goes to ballast
		if _, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			break
		}
	}
	_, err = d.CreateExclusive("g", 0o600)
	fmt.Println(outcomeOf(err, filepath.Join(dir, "g")))
	return 0
}

// childT lets the outcome helpers run in the child, outside a test.
type childT struct{ testing.TB }

func (*childT) Errorf(format string, args ...any) { fmt.Printf(format+"\n", args...) }
func (*childT) FailNow()                          { os.Exit(1) }
func (*childT) Helper()                           {}

func TestRulesCompose(t *testing.T) {
	var calls []syscall.Errno
	after := errorfs.Errno(syscall.EIO, errorfs.OnOp(errorfs.OpWrite), errorfs.After(2))
	for _, op := range []errorfs.Op{errorfs.OpWrite, errorfs.OpCreate, errorfs.OpWrite, errorfs.OpWrite, errorfs.OpWrite} {
		calls = append(calls, after(op, "/r/f"))
	}
	assert.Equal(t, []syscall.Errno{0, 0, 0, syscall.EIO, syscall.EIO}, calls, "After counts only the calls the rules before it let through")

	draw := func(seed uint64) []syscall.Errno {
		in := errorfs.Errno(syscall.ENOSPC, errorfs.Randomly(0.5, seed))
		out := make([]syscall.Errno, 64)
		for i := range out {
			out[i] = in(errorfs.OpWrite, "/r/f")
		}
		return out
	}
	assert.Equal(t, draw(7), draw(7), "a seed replays its draws")
	assert.Contains(t, draw(7), syscall.ENOSPC)
	assert.Contains(t, draw(7), syscall.Errno(0))

	var on atomic.Bool
	first := errorfs.First(
		errorfs.Errno(syscall.EROFS, errorfs.Under("/ro")),
		errorfs.Errno(syscall.ENOSPC, errorfs.OnPath("full"), errorfs.While(&on)))
	assert.Equal(t, syscall.EROFS, first(errorfs.OpMkdir, "/ro/full"))
	assert.Equal(t, syscall.Errno(0), first(errorfs.OpMkdir, "/rw/full"))
	assert.Equal(t, syscall.Errno(0), first(errorfs.OpMkdir, "/roo"), "Under matches whole path elements")
	on.Store(true)
	assert.Equal(t, syscall.ENOSPC, first(errorfs.OpMkdir, "/rw/full"))
}
