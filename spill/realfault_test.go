package spill_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/faultenv"
)

// Real faults, made by the kernel rather than injected: a full tmpfs, a file size limit, a
// read-only bind mount, descriptor exhaustion, and plan dirs removed or swapped for symlinks.

// fillFile writes chunks of 100-300 KB of random bytes to f until a write fails, and returns the
// bytes acknowledged and the error.
func fillFile(f *spill.File, rng *rand.Rand) ([]byte, error) {
	var acked []byte
	for {
		chunk := make([]byte, 100<<10+rng.IntN(200<<10))
		for i := range chunk {
			chunk[i] = byte(rng.Uint32())
		}
		n, err := f.Write(chunk)
		if err != nil {
			if n != 0 {
				return acked, fmt.Errorf("a failed write reported %d bytes written: %w", n, err)
			}
			return acked, err
		}
		acked = append(acked, chunk...)
	}
}

// A write that fills a real tmpfs fails with ENOSPC after the kernel took part of it: the file
// keeps exactly the acknowledged bytes, and once space is freed the next write lands right after
// them.
func TestRealENOSPCLeavesExactlyTheAcknowledgedBytes(t *testing.T) {
	root := faultenv.Tmpfs(t, "size=4m")
	ballast := filepath.Join(root, "ballast")
	require.NoError(t, os.WriteFile(ballast, make([]byte, 512<<10), 0o600))
	m := newManager(t, []string{root}, 1<<30, nil)
	f, err := m.CreateFile()
	require.NoError(t, err)

	acked, err := fillFile(f, rand.New(rand.NewPCG(1, 2)))
	require.ErrorIs(t, err, syscall.ENOSPC)
	var pathErr *fs.PathError
	require.ErrorAs(t, err, &pathErr)
	assert.Equal(t, f.Path(), pathErr.Path)
	require.NotEmpty(t, acked)
	assertFileSize(t, f.Path(), int64(len(acked)))
	assert.Equal(t, int64(len(acked)), f.Size())
	assert.Equal(t, int64(len(acked)), m.Used())

	require.NoError(t, os.Remove(ballast))
	tail := []byte("written after the disk was full")
	write(t, f, 0) // a no-op
	_, err = f.Write(tail)
	require.NoError(t, err)
	got, err := os.ReadFile(f.Path())
	require.NoError(t, err)
	require.True(t, bytes.Equal(append(acked, tail...), got), "the file holds the acknowledged bytes, then the new write, and nothing else")
	assert.Equal(t, int64(len(got)), m.Used())
	require.NoError(t, m.Close())
	assert.Empty(t, planDirs(t, root))
}

// The same under a file size limit (ulimit -f): the kernel writes up to the limit, then EFBIG. It
// runs in a child process, as the limit is process-wide; SIGXFSZ is ignored by the Go runtime.
func TestRealEFBIGLeavesExactlyTheAcknowledgedBytes(t *testing.T) {
	root := t.TempDir()
	const limit = 1_000_000
	cmd := faultenv.Child("SPILLWAY_CHILD_FSIZE", root+":"+strconv.Itoa(limit))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child: %s", out)
	assert.Contains(t, string(out), "efbig ok\n", "child: %s", out)
	assert.Empty(t, planDirs(t, root))
}

// efbigChild is TestRealEFBIGLeavesExactlyTheAcknowledgedBytes's child: it fails, by printing why,
// unless every check holds.
func efbigChild(arg string) int {
	root, limitArg, _ := strings.Cut(arg, ":")
	limit, _ := strconv.ParseUint(limitArg, 10, 64)
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	roots, _ := spill.NewRoots([]string{root})
	m, _ := spill.New(spill.Config{Roots: roots, Limit: 1 << 30})
	defer m.Close()
	f, err := m.CreateFile()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	acked, err := fillFile(f, rand.New(rand.NewPCG(3, 4)))
	var pathErr *fs.PathError
	info, statErr := os.Stat(f.Path())
	switch {
	case !errors.Is(err, syscall.EFBIG) || !errors.As(err, &pathErr) || pathErr.Path != f.Path():
		fmt.Printf("the write failed with %v, not EFBIG naming %s\n", err, f.Path())
	case statErr != nil || info.Size() != int64(len(acked)):
		fmt.Printf("the file holds %d bytes (%v), %d were acknowledged\n", info.Size(), statErr, len(acked))
	case m.Used() != int64(len(acked)) || f.Size() != int64(len(acked)):
		fmt.Printf("Used %d, Size %d, %d acknowledged\n", m.Used(), f.Size(), len(acked))
	default:
		tail := make([]byte, min(1000, int(limit)-len(acked)))
		for i := range tail {
			tail[i] = byte(i)
		}
		if _, err := f.Write(tail); err != nil {
			fmt.Println("a write within the limit failed:", err)
			return 1
		}
		got, err := os.ReadFile(f.Path())
		if err != nil || !bytes.Equal(got, append(acked, tail...)) {
			fmt.Printf("read back %d bytes (%v), want the %d acknowledged then the %d written\n", len(got), err, len(acked), len(tail))
			return 1
		}
		if m.Close() != nil {
			return 1
		}
		fmt.Println("efbig ok")
		return 0
	}
	return 1
}

// A root whose disk fills up during a write leaves the plan's rotation: every later file goes to
// the root that works, instead of failing there again.
func TestRealENOSPCOnAWriteTakesTheRootOutOfRotation(t *testing.T) {
	full, good := faultenv.Tmpfs(t, "size=4m"), t.TempDir()
	m := newManager(t, []string{full, good}, 1<<30, nil)
	var onFull *spill.File
	for onFull == nil {
		f, err := m.CreateFile()
		require.NoError(t, err)
		if strings.HasPrefix(f.Path(), full+"/") {
			onFull = f
		}
	}
	_, err := fillFile(onFull, rand.New(rand.NewPCG(5, 6)))
	require.ErrorIs(t, err, syscall.ENOSPC)
	for range 10 {
		f, err := m.CreateFile()
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(f.Path(), good+"/"), "a new file went to the full root: %s", f.Path())
		write(t, f, 1000)
	}
	require.NoError(t, m.Close())
	assert.Empty(t, planDirs(t, full))
	assert.Empty(t, planDirs(t, good))
}

// A root on a read-only bind mount fails at the first spill with EROFS, named with the root; the
// plan then goes to the other root.
func TestRealReadOnlyRootFailsWithEROFSAndIsSkipped(t *testing.T) {
	ro := faultenv.ReadOnlyBind(t, t.TempDir())
	only := newManager(t, []string{ro}, 1<<20, nil)
	_, err := only.CreateFile()
	var noRoot *spill.NoUsableRootError
	require.ErrorAs(t, err, &noRoot)
	require.ErrorIs(t, err, syscall.EROFS)
	assert.Equal(t, ro, noRoot.Failures[0].Root)
	assert.Contains(t, err.Error(), ro+": open "+ro+"/."+spill.DirPrefix)
	assert.Contains(t, err.Error(), "read-only file system")

	good := t.TempDir()
	m := newManager(t, []string{ro, good}, 1<<20, nil)
	for range 6 {
		f, err := m.CreateFile()
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(f.Path(), good+"/"), f.Path())
		write(t, f, 100)
	}
	require.NoError(t, m.Close())
	assert.Len(t, tree(t, ro), 1, "nothing was created on the read-only root")
	assert.Empty(t, planDirs(t, good))
}

// Running out of descriptors (EMFILE) gives up no root: each CreateFile fails with a
// *spill.DescriptorLimitError naming its path, and works again as soon as descriptors are freed,
// whatever step of making the plan dir and file ran out. Run in a child with a low RLIMIT_NOFILE.
func TestRealEMFILEGivesUpNoRoot(t *testing.T) {
	root := t.TempDir()
	out, err := faultenv.Child("SPILLWAY_CHILD_EMFILE", root).CombinedOutput()
	require.NoError(t, err, "child: %s", out)
	require.Contains(t, string(out), "emfile ok", "child: %s", out)
	assert.Contains(t, string(out), "steps=4 ", "every step that opens a descriptor ran out once: the root, the lock file, the plan dir and the spill file")
	t.Logf("child: %s", out)
	assert.Len(t, tree(t, root), 1, "nothing is left in the root")
}

func emfileChild(root string) int {
	limit := uint64(faultenv.OpenFiles() + 16)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	roots, _ := spill.NewRoots([]string{root})
	m, _ := spill.New(spill.Config{Roots: roots, Limit: 1 << 20})
	var ballast []int
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			break
		}
		ballast = append(ballast, fd)
	}
	failures := 0
	steps := map[string]bool{}
	for {
		f, err := m.CreateFile()
		if err == nil {
			if _, err := f.Write([]byte("x")); err != nil {
				fmt.Println("write:", err)
				return 1
			}
			break
		}
		var limitErr *spill.DescriptorLimitError
		var pathErr *fs.PathError
		if !errors.As(err, &limitErr) || !errors.Is(err, syscall.EMFILE) || !errors.As(err, &pathErr) || !strings.HasPrefix(pathErr.Path, root) {
			fmt.Printf("CreateFile failed with %T %v, not a DescriptorLimitError for EMFILE naming a path in %s\n", err, err, root)
			return 1
		}
		failures++
		switch rel := strings.TrimPrefix(pathErr.Path, root); {
		case rel == "":
			steps["root"] = true
		case strings.HasSuffix(rel, spill.OwnerLockSuffix):
			steps["lock"] = true
		case strings.Contains(rel, "/spill-"):
			steps["file"] = true
		default:
			steps["dir"] = true
		}
		if len(ballast) == 0 {
			fmt.Println("CreateFile still fails with every ballast descriptor closed:", err)
			return 1
		}
		unix.Close(ballast[len(ballast)-1])
		ballast = ballast[:len(ballast)-1]
	}
	if err := m.Close(); err != nil {
		fmt.Println("close:", err)
		return 1
	}
	fmt.Printf("emfile ok: failures=%d steps=%d %v\n", failures, len(steps), steps)
	return 0
}

// A plan dir removed by a real rm -rf mid-plan: the plan heals with a new dir, and Close leaves
// nothing, lock files included, with no error.
func TestRealRmRfOfALivePlanDir(t *testing.T) {
	root := t.TempDir()
	m := newManager(t, []string{root}, 1<<20, nil)
	f, err := m.CreateFile()
	require.NoError(t, err)
	write(t, f, 100)
	out, err := exec.Command("rm", "-rf", filepath.Dir(f.Path())).CombinedOutput()
	require.NoError(t, err, "%s", out)
	g, err := m.CreateFile()
	require.NoError(t, err)
	write(t, g, 100)
	require.NoError(t, m.Close())
	assert.Len(t, tree(t, root), 1, "nothing is left: no dir, no lock file")
	removed, err := spill.SweepOrphans(root)
	require.NoError(t, err)
	assert.Empty(t, removed)
}

// A live plan dir removed and replaced by a symlink to a dir outside: Close removes its own lock
// file, reports nothing (its dir is gone), and neither follows nor removes the symlink.
func TestRealPlanDirDeletedAndReplacedByASymlink(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	precious := filepath.Join(outside, "precious")
	require.NoError(t, os.WriteFile(precious, []byte("keep"), 0o600))
	before := tree(t, outside)
	m := newManager(t, []string{root}, 1<<20, nil)
	f, err := m.CreateFile()
	require.NoError(t, err)
	planDir := filepath.Dir(f.Path())
	require.NoError(t, os.RemoveAll(planDir))
	require.NoError(t, os.Symlink(outside, planDir))

	require.NoError(t, m.Close(), "the plan's dir was deleted: nothing of the plan is left to report")
	assert.NoFileExists(t, filepath.Join(root, spill.OwnerLockName(filepath.Base(planDir))), "the owner lock is removed")
	target, err := os.Readlink(planDir)
	require.NoError(t, err, "the symlink stays")
	assert.Equal(t, outside, target)
	assert.Equal(t, before, tree(t, outside))
	got, err := os.ReadFile(precious)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(got))
	assert.Len(t, tree(t, root), 2, "the root holds only the symlink")
}

// A root given as a symlink that is retargeted mid-plan: the plan's dir, made through the old
// target, is still found and removed at Close, and the new target is not touched.
func TestRealRootSymlinkRetargetedMidPlan(t *testing.T) {
	base := t.TempDir()
	oldTarget, newTarget := filepath.Join(base, "old"), filepath.Join(base, "new")
	require.NoError(t, os.Mkdir(oldTarget, 0o700))
	require.NoError(t, os.Mkdir(newTarget, 0o700))
	link := filepath.Join(base, "local-dir")
	require.NoError(t, os.Symlink(oldTarget, link))
	m := newManager(t, []string{link}, 1<<20, nil)
	f, err := m.CreateFile()
	require.NoError(t, err)
	write(t, f, 100)
	require.Len(t, planDirs(t, oldTarget), 1)

	// ln -sfn: a new link renamed over the old one.
	require.NoError(t, os.Symlink(newTarget, link+".new"))
	require.NoError(t, os.Rename(link+".new", link))
	g, err := m.CreateFile()
	require.NoError(t, err)
	write(t, g, 100)
	assert.Equal(t, filepath.Dir(f.Path()), filepath.Dir(g.Path()), "the plan keeps its dir")
	assert.Len(t, planDirs(t, oldTarget), 1)

	require.NoError(t, m.Close())
	assert.Len(t, tree(t, oldTarget), 1, "the old target is left empty: no plan dir, no lock file")
	assert.Len(t, tree(t, newTarget), 1, "the new target was never touched")
}
