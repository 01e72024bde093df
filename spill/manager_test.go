package spill_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/errorfs"
)

// tree lists every path below the roots with its mode, to compare a filesystem before and after.
func tree(t *testing.T, roots ...string) map[string]fs.FileMode {
	t.Helper()
	out := map[string]fs.FileMode{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			out[path] = info.Mode()
			return nil
		})
		require.NoError(t, err)
	}
	return out
}

// planDirs lists the plan dirs directly inside root.
func planDirs(t *testing.T, root string) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(root, spill.DirPrefix+"*"))
	require.NoError(t, err)
	return matches
}

func tempRoots(t *testing.T, n int) []string {
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	return dirs
}

func newManager(t *testing.T, dirs []string, limit int64, fsys spill.FS) *spill.Manager {
	t.Helper()
	roots, err := spill.NewRoots(dirs)
	require.NoError(t, err)
	m, err := spill.New(spill.Config{Roots: roots, Limit: limit, LimitSetting: "test.limit", FS: fsys})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// recordingFS counts the operations that reach the filesystem.
func recordingFS(ops *[]string, mu *sync.Mutex) *errorfs.FS {
	return errorfs.Wrap(spill.OSFS{}, errorfs.Log(func(op errorfs.Op, path string) {
		mu.Lock()
		*ops = append(*ops, op.String()+" "+path)
		mu.Unlock()
	}))
}

func write(t *testing.T, f *spill.File, n int) {
	t.Helper()
	w, err := f.Write(make([]byte, n))
	require.NoError(t, err)
	require.Equal(t, n, w)
}

func TestBuildAndCloseUnusedTouchNoFilesystem(t *testing.T) {
	dirs := tempRoots(t, 3)
	before := tree(t, dirs...)
	var ops []string
	var mu sync.Mutex
	m := newManager(t, dirs, 100, recordingFS(&ops, &mu))
	require.NoError(t, m.Close())
	assert.Empty(t, ops)
	assert.Equal(t, before, tree(t, dirs...))
}

func TestFirstFileCreatesOneDirAndLaterFilesReuseIt(t *testing.T) {
	dirs := tempRoots(t, 1)
	m := newManager(t, dirs, 1<<20, nil)

	f1, err := m.CreateFile()
	require.NoError(t, err)
	pd := planDirs(t, dirs[0])
	require.Len(t, pd, 1)
	assert.Equal(t, pd[0], filepath.Dir(f1.Path()))
	info, err := os.Stat(pd[0])
	require.NoError(t, err)
	assert.Equal(t, fs.ModeDir|0o700, info.Mode())
	info, err = os.Lstat(f1.Path())
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), info.Mode())

	f2, err := m.CreateFile()
	require.NoError(t, err)
	assert.Equal(t, pd, planDirs(t, dirs[0]))
	assert.Equal(t, pd[0], filepath.Dir(f2.Path()))
	assert.NotEqual(t, f1.Path(), f2.Path())
}

func TestRootGetsItsDirOnlyWhenAFileLandsThere(t *testing.T) {
	dirs := tempRoots(t, 2)
	m := newManager(t, dirs, 1<<20, nil)

	f1, err := m.CreateFile()
	require.NoError(t, err)
	first := slicesIndexRoot(dirs, f1.Path())
	other := 1 - first
	assert.Len(t, planDirs(t, dirs[first]), 1)
	assert.Empty(t, planDirs(t, dirs[other]), "a root with no file must have no plan dir")

	f2, err := m.CreateFile()
	require.NoError(t, err)
	assert.Equal(t, other, slicesIndexRoot(dirs, f2.Path()), "files go round-robin over the roots")
	assert.Len(t, planDirs(t, dirs[other]), 1)
	assert.Len(t, planDirs(t, dirs[first]), 1)
}

func slicesIndexRoot(roots []string, path string) int {
	for i, r := range roots {
		if strings.HasPrefix(path, r+string(filepath.Separator)) {
			return i
		}
	}
	return -1
}

func TestPlansHaveSeparateDirsAndSeparateLimits(t *testing.T) {
	dirs := tempRoots(t, 1)
	a := newManager(t, dirs, 10, nil)
	b := newManager(t, dirs, 10, nil)
	fa, err := a.CreateFile()
	require.NoError(t, err)
	fb, err := b.CreateFile()
	require.NoError(t, err)
	assert.NotEqual(t, filepath.Dir(fa.Path()), filepath.Dir(fb.Path()))
	assert.Len(t, planDirs(t, dirs[0]), 2)

	write(t, fa, 8)
	write(t, fb, 8)
	_, err = fa.Write(make([]byte, 8))
	var limitErr *spill.LimitError
	require.ErrorAs(t, err, &limitErr)
	assert.Equal(t, spill.LimitError{Limit: 10, Used: 8, Request: 8, Setting: "test.limit"}, *limitErr)
	assert.Contains(t, err.Error(), "test.limit")
	assert.Equal(t, int64(8), a.Used())

	fb2, err := b.CreateFile()
	require.NoError(t, err)
	write(t, fb2, 2)
	assert.Equal(t, int64(10), b.Used())
}

func TestWriteOverLimitWritesNothing(t *testing.T) {
	dirs := tempRoots(t, 1)
	m := newManager(t, dirs, 100, nil)
	f, err := m.CreateFile()
	require.NoError(t, err)
	write(t, f, 60)
	n, err := f.Write(make([]byte, 41))
	assert.Zero(t, n)
	var limitErr *spill.LimitError
	require.ErrorAs(t, err, &limitErr)
	assert.Equal(t, int64(60), m.Used())
	assertFileSize(t, f.Path(), 60)
	write(t, f, 40) // exactly at the limit is allowed
	assert.Equal(t, int64(100), m.Used())
}

func assertFileSize(t *testing.T, path string, size int64) {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, size, info.Size())
}

func TestFailedWriteGivesBackEveryByte(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
		t.Run(errno.Error(), func(t *testing.T) {
			dirs := tempRoots(t, 1)
			var fail atomic.Bool
			fsys := errorfs.Wrap(spill.OSFS{}, errorfs.Errno(errno, errorfs.OnOp(errorfs.OpWrite), errorfs.While(&fail)))
			m := newManager(t, dirs, 1000, fsys)
			f, err := m.CreateFile()
			require.NoError(t, err)
			write(t, f, 100)

			fail.Store(true)
			n, err := f.Write(make([]byte, 300))
			assert.Zero(t, n)
			require.ErrorIs(t, err, errno)
			var pathErr *fs.PathError
			require.ErrorAs(t, err, &pathErr)
			assert.Equal(t, f.Path(), pathErr.Path)
			assert.Equal(t, int64(100), m.Used(), "a failed write must give back its reservation")
			assert.Equal(t, int64(100), f.Size())
			assertFileSize(t, f.Path(), 100) // the half-written tail was truncated away

			fail.Store(false)
			write(t, f, 900)
			assert.Equal(t, int64(1000), m.Used())
			assertFileSize(t, f.Path(), 1000)
		})
	}
}

func TestReleaseReturnsBytesAndDeletes(t *testing.T) {
	dirs := tempRoots(t, 2)
	m := newManager(t, dirs, 1<<20, nil)
	var files []*spill.File
	for i := range 5 {
		f, err := m.CreateFile()
		require.NoError(t, err)
		write(t, f, 1000*(i+1))
		write(t, f, 7) // a file kept open across writes counts every byte
		files = append(files, f)
	}
	assert.Equal(t, int64(15000+35), m.Used())
	for _, f := range files {
		require.NoError(t, f.Release())
		_, err := os.Lstat(f.Path())
		assert.ErrorIs(t, err, fs.ErrNotExist)
		assert.ErrorIs(t, f.Release(), spill.ErrFileReleased)
		_, err = f.Write([]byte{1})
		assert.ErrorIs(t, err, spill.ErrFileReleased)
	}
	assert.Zero(t, m.Used())
}

func TestHealsAPlanDirRemovedBehindItsBack(t *testing.T) {
	dirs := tempRoots(t, 1)
	m := newManager(t, dirs, 1<<20, nil)
	f, err := m.CreateFile()
	require.NoError(t, err)
	write(t, f, 10)
	require.NoError(t, os.RemoveAll(filepath.Dir(f.Path()))) // a tmp cleaner

	g, err := m.CreateFile()
	require.NoError(t, err)
	write(t, g, 10)
	assert.Len(t, planDirs(t, dirs[0]), 1)
	assert.NotEqual(t, filepath.Dir(f.Path()), filepath.Dir(g.Path()))

	require.NoError(t, f.Release(), "releasing a file a cleaner already deleted is not an error")
	assert.Equal(t, int64(10), m.Used())
	require.NoError(t, m.Close())
	assert.Empty(t, planDirs(t, dirs[0]))
}

func TestCloseRemovesAllItCreatedAndNothingElse(t *testing.T) {
	dirs := tempRoots(t, 3)
	// Things that are not the plan's: a file and a dir in a root, and a dir named like a plan dir.
	require.NoError(t, os.WriteFile(filepath.Join(dirs[0], "someone-elses"), []byte("keep"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dirs[1], spill.DirPrefix+"other"), 0o700))
	before := tree(t, dirs...)

	m := newManager(t, dirs, 1<<20, nil)
	for range 7 {
		f, err := m.CreateFile()
		require.NoError(t, err)
		write(t, f, 100)
	}
	released, err := m.CreateFile()
	require.NoError(t, err)
	require.NoError(t, released.Release())
	assert.Len(t, tree(t, dirs...), len(before)+3*2+7, "3 plan dirs with their owner locks, 7 live files")

	require.NoError(t, m.Close())
	assert.Equal(t, before, tree(t, dirs...))
	assert.Zero(t, m.Used())
	require.NoError(t, m.Close(), "Close twice is harmless")

	_, err = m.CreateFile()
	assert.ErrorIs(t, err, spill.ErrClosed)
}

func TestCloseLeavesAForeignFileAndSaysSo(t *testing.T) {
	dirs := tempRoots(t, 1)
	m := newManager(t, dirs, 1<<20, nil)
	f, err := m.CreateFile()
	require.NoError(t, err)
	foreign := filepath.Join(filepath.Dir(f.Path()), "not-ours")
	require.NoError(t, os.WriteFile(foreign, []byte("x"), 0o600))

	err = m.Close()
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Dir(f.Path()))
	_, statErr := os.Stat(foreign)
	assert.NoError(t, statErr, "a file the plan did not create is never deleted")
	_, statErr = os.Stat(f.Path())
	assert.ErrorIs(t, statErr, fs.ErrNotExist)
}

func TestFailingRootsAreSkipped(t *testing.T) {
	good := t.TempDir()
	missing := filepath.Join(t.TempDir(), "missing")
	notADir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notADir, nil, 0o600))

	m := newManager(t, []string{missing, notADir, good}, 1<<20, nil)
	for range 4 {
		f, err := m.CreateFile()
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(f.Path(), good+"/"), f.Path())
	}
	assert.Len(t, planDirs(t, good), 1)
}

func TestInjectedRootFaultsAreSkipped(t *testing.T) {
	for _, tc := range []struct {
		op    errorfs.Op
		errno syscall.Errno
	}{
		{errorfs.OpOpenRoot, syscall.EACCES}, {errorfs.OpMkdir, syscall.EACCES}, {errorfs.OpMkdir, syscall.ENOSPC},
		{errorfs.OpOpenDir, syscall.EIO}, {errorfs.OpCreateLock, syscall.ENOSPC}, {errorfs.OpCreate, syscall.ENOSPC},
		{errorfs.OpCreate, syscall.EIO},
	} {
		t.Run(tc.op.String()+"-"+tc.errno.Error(), func(t *testing.T) {
			dirs := tempRoots(t, 2)
			bad := dirs[0]
			fsys := errorfs.Wrap(spill.OSFS{}, errorfs.Errno(tc.errno, errorfs.OnOp(tc.op), errorfs.Under(bad)))
			m := newManager(t, dirs, 1<<20, fsys)
			for range 3 {
				f, err := m.CreateFile()
				require.NoError(t, err)
				assert.True(t, strings.HasPrefix(f.Path(), dirs[1]+"/"))
			}
			require.NoError(t, m.Close())
			assert.Empty(t, planDirs(t, bad))
			assert.Empty(t, planDirs(t, dirs[1]))
		})
	}
}

func TestEveryRootFailingNamesEachRootAndCause(t *testing.T) {
	base := t.TempDir()
	a, b := filepath.Join(base, "no-such-a"), filepath.Join(base, "no-such-b")
	m := newManager(t, []string{a, b}, 1<<20, nil)
	_, err := m.CreateFile()
	var noRoot *spill.NoUsableRootError
	require.ErrorAs(t, err, &noRoot)
	require.Len(t, noRoot.Failures, 2)
	assert.Equal(t, a, noRoot.Failures[0].Root)
	assert.Equal(t, b, noRoot.Failures[1].Root)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), a+": open "+a+": no such file or directory")
	assert.Contains(t, err.Error(), "no such file or directory")
	assert.Contains(t, err.Error(), b)
	assert.Zero(t, m.Used())
	require.NoError(t, m.Close())
	assert.NoDirExists(t, a)
}

func TestBadConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name string
		dirs []string
		want string
	}{
		{"no dirs", nil, "no local dirs"},
		{"empty list", []string{}, "no local dirs"},
		{"empty string", []string{"/tmp", ""}, "#1 is an empty string"},
		{"relative", []string{"spill"}, `"spill" is a relative path`},
		{"dot relative", []string{"./x"}, "relative path"},
		{"NUL", []string{"/tmp/a\x00b"}, "NUL"},
		{"duplicate", []string{"/data/a", "/data/b", "/data/a/"}, `"/data/a" is given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := spill.NewRoots(tc.dirs)
			var cfgErr *spill.ConfigError
			require.ErrorAs(t, err, &cfgErr)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	roots, err := spill.NewRoots([]string{"/tmp"})
	require.NoError(t, err)
	_, err = spill.New(spill.Config{Roots: roots, Limit: -1})
	var cfgErr *spill.ConfigError
	require.ErrorAs(t, err, &cfgErr)
	assert.Contains(t, err.Error(), "negative")
	_, err = spill.New(spill.Config{Limit: 1})
	require.ErrorAs(t, err, &cfgErr)
}

func TestZeroLimitRefusesEveryByte(t *testing.T) {
	m := newManager(t, tempRoots(t, 1), 0, nil)
	f, err := m.CreateFile()
	require.NoError(t, err)
	_, err = f.Write([]byte{1})
	var limitErr *spill.LimitError
	require.ErrorAs(t, err, &limitErr)
	n, err := f.Write(nil)
	assert.NoError(t, err)
	assert.Zero(t, n)
}

func TestCreateExclusiveNeverFollowsASymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	require.NoError(t, os.WriteFile(target, []byte("precious"), 0o600))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(target, link))
	dangling := filepath.Join(dir, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(dir, "nowhere"), dangling))

	d, err := spill.OSFS{}.OpenRoot(dir)
	require.NoError(t, err)
	defer d.Close()
	_, err = d.CreateExclusive("link", spill.FileMode)
	assert.ErrorIs(t, err, fs.ErrExist)
	_, err = d.CreateExclusive("dangling", spill.FileMode)
	assert.ErrorIs(t, err, fs.ErrExist)
	assert.NoFileExists(t, filepath.Join(dir, "nowhere"))
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(got))
	assert.ErrorIs(t, d.Mkdir("link", spill.DirMode), fs.ErrExist)
	_, err = d.CreateLock("link", spill.FileMode)
	assert.ErrorIs(t, err, fs.ErrExist)
	_, err = d.CreateLock("dangling", spill.FileMode)
	assert.ErrorIs(t, err, fs.ErrExist)
	_, err = d.OpenDir("link")
	assert.Error(t, err, "a plan dir path that is a symlink is never opened")
	assert.ErrorIs(t, d.RemoveDir("link"), syscall.ENOTDIR, "rmdir never removes a symlink")
	id, err := d.StatAt("link")
	require.NoError(t, err)
	assert.Equal(t, fs.ModeSymlink, id.Type, "StatAt describes the link, not its target")
	_, err = d.TryLock("link")
	assert.ErrorIs(t, err, syscall.ELOOP, "a lock file that is a symlink is never opened")
	for _, name := range []string{"", ".", "..", "a/b"} {
		_, err = d.CreateExclusive(name, spill.FileMode)
		assert.ErrorIs(t, err, syscall.EINVAL, "a name that is not one path element is refused: %q", name)
	}
	assert.FileExists(t, link)
	assert.NoFileExists(t, filepath.Join(dir, "nowhere"))
}

// A plan dir renamed away and replaced by a symlink to another dir: the plan's next files still
// go into the dir it made, through its open descriptor, never where the symlink points.
func TestAPlanDirSwappedForASymlinkIsNotFollowed(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	m := newManager(t, []string{root}, 1<<20, nil)
	f, err := m.CreateFile()
	require.NoError(t, err)
	planDir := filepath.Dir(f.Path())
	moved := filepath.Join(root, "moved")
	require.NoError(t, os.Rename(planDir, moved))
	require.NoError(t, os.Symlink(outside, planDir))

	g, err := m.CreateFile()
	require.NoError(t, err)
	write(t, g, 10)
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing is created through the symlink")
	assert.FileExists(t, filepath.Join(moved, filepath.Base(g.Path())))

	err = m.Close()
	require.Error(t, err, "the replaced plan dir cannot be removed by its path, and Close says so")
	assert.Contains(t, err.Error(), planDir)
	assert.ErrorIs(t, err, spill.ErrPlanDirMoved)
	assert.FileExists(t, planDir, "the symlink, which the plan did not make, stays")
	target, lerr := os.Readlink(planDir)
	require.NoError(t, lerr)
	assert.Equal(t, outside, target)
	assert.NoFileExists(t, filepath.Join(root, spill.OwnerLockName(filepath.Base(planDir))), "the owner lock is not left behind")
	entries, err = os.ReadDir(moved)
	require.NoError(t, err)
	assert.Empty(t, entries, "the plan's files are removed through the dir it made")
}

// A sweep running while plans create their dirs never takes a new lock, so it never breaks a
// spill nor leaves a live plan dir without its lock file.
func TestSweepsNeverRaceANewPlanDir(t *testing.T) {
	root := t.TempDir()
	roots, err := spill.NewRoots([]string{root})
	require.NoError(t, err)
	stop := make(chan struct{})
	swept := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				swept <- n
				return
			default:
			}
			removed, err := spill.SweepOrphans(root)
			assert.NoError(t, err)
			assert.Empty(t, removed, "every plan dir here is live")
			n++
		}
	}()
	for range 2000 {
		m, err := spill.New(spill.Config{Roots: roots, Limit: 1 << 20})
		require.NoError(t, err)
		f, err := m.CreateFile()
		require.NoError(t, err)
		assert.FileExists(t, filepath.Join(root, spill.OwnerLockName(filepath.Base(filepath.Dir(f.Path())))))
		require.NoError(t, m.Close())
	}
	close(stop)
	assert.Positive(t, <-swept)
}

func TestReadBackWhatWasWritten(t *testing.T) {
	m := newManager(t, tempRoots(t, 1), 1<<20, nil)
	f, err := m.CreateFile()
	require.NoError(t, err)
	_, err = f.Write([]byte("hello, "))
	require.NoError(t, err)
	_, err = f.Write([]byte("spill"))
	require.NoError(t, err)
	buf := make([]byte, 12)
	n, err := f.ReadAt(buf, 0)
	require.NoError(t, err)
	assert.Equal(t, "hello, spill", string(buf[:n]))
}

func TestConcurrentWritersNeverPassTheLimit(t *testing.T) {
	const limit, chunk, writers = 100_000, 1_000, 8
	m := newManager(t, tempRoots(t, 2), limit, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var written int64
	var refused int
	for range writers {
		wg.Go(func() {
			f, err := m.CreateFile()
			if !assert.NoError(t, err) {
				return
			}
			for range 30 {
				_, err := f.Write(make([]byte, chunk))
				mu.Lock()
				if err == nil {
					written += chunk
				} else if errors.As(err, new(*spill.LimitError)) {
					refused++
				} else {
					t.Errorf("unexpected error %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(limit), written, "writers race to exactly the limit")
	assert.Equal(t, writers*30-limit/chunk, refused)
	assert.Equal(t, written, m.Used())
	require.NoError(t, m.Close())
	assert.Zero(t, m.Used())
}

func TestCloseRacesWithWritesAndCreates(t *testing.T) {
	for range 20 {
		dirs := tempRoots(t, 2)
		m := newManager(t, dirs, 1<<30, nil)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 20 {
					f, err := m.CreateFile()
					if err != nil {
						assert.ErrorIs(t, err, spill.ErrClosed)
						return
					}
					if _, err := f.Write(make([]byte, 64)); err != nil {
						assert.ErrorIs(t, err, spill.ErrFileReleased)
						return
					}
					if err := f.Release(); err != nil {
						assert.ErrorIs(t, err, spill.ErrFileReleased)
					}
				}
			})
		}
		require.NoError(t, m.Close())
		wg.Wait()
		assert.Zero(t, m.Used())
		assert.Empty(t, planDirs(t, dirs[0]))
		assert.Empty(t, planDirs(t, dirs[1]))
	}
}

func TestLimitErrorMessageIsReadable(t *testing.T) {
	err := &spill.LimitError{Limit: 100 << 30, Used: 100<<30 - 10, Request: 64 << 10, Setting: "spark.spillway.maxTempDirectorySize"}
	assert.Equal(t, "spill limit exceeded: writing 64.0 KiB (65536 bytes) more would take this plan's spill files from "+
		"100.0 GiB (107374182390 bytes) to 100.0 GiB (107374247926 bytes), over the limit of 100.0 GiB (107374182400 bytes); "+
		"raise spark.spillway.maxTempDirectorySize, or give the plan more memory so it spills less", err.Error())
}

func TestSharedBudgetHoldsOverAllManagers(t *testing.T) {
	dirs := tempRoots(t, 1)
	roots, err := spill.NewRoots(dirs)
	require.NoError(t, err)
	var shared spill.Shared
	build := func(sharedLimit int64) *spill.Manager {
		m, err := spill.New(spill.Config{Roots: roots, Limit: 100, Shared: &shared, SharedLimit: sharedLimit, SharedLimitSetting: "test.shared"})
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	a, b := build(150), build(150)
	fa, err := a.CreateFile()
	require.NoError(t, err)
	fb, err := b.CreateFile()
	require.NoError(t, err)
	write(t, fa, 100)
	_, err = fb.Write(make([]byte, 60))
	var limitErr *spill.LimitError
	require.ErrorAs(t, err, &limitErr)
	assert.Equal(t, spill.LimitError{Limit: 150, Used: 100, Request: 60, Setting: "test.shared", Shared: true}, *limitErr)
	assert.Contains(t, err.Error(), "all plans in this process")
	assert.Zero(t, b.Used(), "a write refused by the shared budget takes nothing from the plan's own")
	write(t, fb, 50)
	assert.Equal(t, int64(150), shared.Used())

	// A manager built with another value uses it; the others keep the one they were built with.
	c := build(1000)
	fc, err := c.CreateFile()
	require.NoError(t, err)
	write(t, fc, 100)
	_, err = fb.Write([]byte{1})
	require.ErrorAs(t, err, &limitErr)
	assert.Equal(t, int64(150), limitErr.Limit)

	require.NoError(t, fa.Release())
	require.NoError(t, c.Close())
	assert.Equal(t, int64(50), shared.Used())
	require.NoError(t, b.Close())
	assert.Zero(t, shared.Used())

	assert.Equal(t, int64(3), shared.Stats.PlansSpilled.Load())
	assert.Equal(t, int64(3), shared.Stats.FilesCreated.Load())
	assert.Equal(t, int64(3), shared.Stats.DirsCreated.Load())
	assert.Equal(t, int64(250), shared.Stats.BytesWritten.Load())
	assert.Equal(t, int64(2), shared.Stats.LimitFailures.Load())
	assert.Zero(t, shared.Stats.FSErrors.Load())
}

func TestSharedCountsFilesystemErrors(t *testing.T) {
	var shared spill.Shared
	roots, err := spill.NewRoots([]string{filepath.Join(t.TempDir(), "missing")})
	require.NoError(t, err)
	m, err := spill.New(spill.Config{Roots: roots, Limit: 100, Shared: &shared, SharedLimit: 100})
	require.NoError(t, err)
	_, err = m.CreateFile()
	require.Error(t, err)
	assert.Equal(t, int64(1), shared.Stats.FSErrors.Load())
	assert.Zero(t, shared.Stats.PlansSpilled.Load())
	require.NoError(t, m.Close())

	_, err = spill.New(spill.Config{Roots: roots, Limit: 1, Shared: &shared, SharedLimit: -1})
	var cfgErr *spill.ConfigError
	assert.ErrorAs(t, err, &cfgErr)
}

// WriteFrom copies a source larger than its 1 MiB buffer whole; a source that fails or ends early
// leaves the file, the usage and the filesystem-error count as they were.
func TestWriteFromIsAllOrNothing(t *testing.T) {
	var shared spill.Shared
	roots, err := spill.NewRoots([]string{t.TempDir()})
	require.NoError(t, err)
	m, err := spill.New(spill.Config{Roots: roots, Limit: 8 << 20, Shared: &shared, SharedLimit: 8 << 20})
	require.NoError(t, err)
	defer m.Close()
	f, err := m.CreateFile()
	require.NoError(t, err)

	data := make([]byte, 3<<20+17)
	for i := range data {
		data[i] = byte(i * 7)
	}
	require.NoError(t, f.WriteFrom(bytes.NewReader(data), int64(len(data))))
	require.Equal(t, int64(len(data)), m.Used())

	boom := errors.New("the source failed")
	for _, src := range []io.Reader{
		io.MultiReader(bytes.NewReader(data[:2<<20]), iotest.ErrReader(boom)), // fails mid-way
		bytes.NewReader(data[:1<<20]),                                         // ends early
	} {
		err := f.WriteFrom(src, int64(len(data)))
		require.Error(t, err)
		assert.Equal(t, int64(len(data)), m.Used())
		assert.Equal(t, int64(len(data)), f.Size())
		assert.Zero(t, shared.Stats.FSErrors.Load(), "a failing source is not a filesystem error")
		onDisk, err := os.ReadFile(f.Path())
		require.NoError(t, err)
		require.True(t, bytes.Equal(data, onDisk), "the file must hold exactly the acknowledged bytes")
	}
	require.ErrorIs(t, f.WriteFrom(iotest.ErrReader(boom), 1), boom)
}
