package spill_test

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/errorfs"
)

var (
	faultSeed       = flag.Uint64("spill.seed", 0, "seed of TestRandomFaults (0: from the clock)")
	faultLifecycles = flag.Int("spill.lifecycles", 10_000, "plan lifecycles TestRandomFaults runs")
)

// faultCounts tallies what TestRandomFaults injected, for docs/reliability.md.
type faultCounts struct {
	injected     [errorfs.NumOps][3]atomic.Int64 // by Op, by errno index
	dirsRemoved  int
	allRootsDown int
	lifecycles   int
	leftovers    int
}

var faultErrnos = [3]syscall.Errno{syscall.ENOSPC, syscall.EIO, syscall.ENOENT}

// TestRandomFaults runs many plan lifecycles against real directories while injecting ENOSPC,
// EIO and ENOENT at random into mkdir, create, write and remove, removing plan dirs behind the
// manager's back, and failing every root at once. After every step the manager's usage must match
// a model of its live files; every error must be typed and name its path; after Close, nothing
// the plan created may be left unless Close named it — and a sweep must then remove it. A failure
// prints the seed: rerun with -spill.seed=N.
func TestRandomFaults(t *testing.T) {
	seed := *faultSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun: go test ./spill -run TestRandomFaults -spill.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	roots := tempRoots(t, 4)
	baseline := tree(t, roots...)
	var counts faultCounts

	for i := range *faultLifecycles {
		lc := &lifecycle{t: t, rng: rng, counts: &counts, id: i, seed: seed}
		lc.run(roots[:1+rng.IntN(len(roots))])
		now := tree(t, roots...)
		for path := range now {
			if _, ok := baseline[path]; !ok {
				lc.failf("%s is left after the lifecycle", path)
			}
		}
		for path := range baseline {
			if _, ok := now[path]; !ok {
				lc.failf("%s, which the plan did not create, is gone", path)
			}
		}
		counts.lifecycles++
	}

	var total int64
	for op := range counts.injected {
		for e := range counts.injected[op] {
			n := counts.injected[op][e].Load()
			total += n
			if n > 0 {
				t.Logf("injected %-10s %-6s %6d", errorfs.Op(op), faultErrnos[e].Error(), n)
			}
		}
	}
	t.Logf("%d lifecycles, %d faults injected, %d plan dirs removed mid-plan, %d all-roots-down phases, %d leftovers named by Close and swept",
		counts.lifecycles, total, counts.dirsRemoved, counts.allRootsDown, counts.leftovers)
}

type lifecycle struct {
	t      *testing.T
	rng    *rand.Rand
	counts *faultCounts
	id     int
	seed   uint64

	faultRate float64 // chance that an operation fails
	allDown   bool    // every operation fails
	model     map[*spill.File]int64
	live      []*spill.File        // the model's files in creation order, so that picks replay from the seed
	closed    map[*spill.File]bool // files whose Release failed: still on disk, no longer writable
	errs      []error              // errors that may name leftovers
}

func (lc *lifecycle) failf(format string, args ...any) {
	lc.t.Helper()
	lc.t.Fatalf("lifecycle %d (seed %d): %s", lc.id, lc.seed, fmt.Sprintf(format, args...))
}

// faultOps are the calls TestRandomFaults fails: those that make, write and remove. A stat or a
// lock probe is left alone: ENOENT from them would claim that an existing name is gone, which the
// OS never does.
var faultOps = errorfs.OnOp(errorfs.OpOpenRoot, errorfs.OpMkdir, errorfs.OpOpenDir, errorfs.OpCreateLock,
	errorfs.OpCreate, errorfs.OpWrite, errorfs.OpRemove, errorfs.OpRemoveDir)

func (lc *lifecycle) inject(op errorfs.Op, path string) syscall.Errno {
	if !faultOps(op, path) {
		return 0
	}
	if !lc.allDown && lc.rng.Float64() >= lc.faultRate {
		return 0
	}
	e := lc.rng.IntN(len(faultErrnos))
	if lc.allDown {
		e = 0 // ENOSPC everywhere
	}
	lc.counts.injected[op][e].Add(1)
	return faultErrnos[e]
}

func (lc *lifecycle) run(dirs []string) {
	rng := lc.rng
	lc.faultRate = []float64{0, 0.05, 0.2, 0.5}[rng.IntN(4)]
	lc.model = map[*spill.File]int64{}
	lc.closed = map[*spill.File]bool{}
	roots, err := spill.NewRoots(dirs)
	require.NoError(lc.t, err)
	limit := int64(rng.IntN(64 << 10))
	m, err := spill.New(spill.Config{Roots: roots, Limit: limit, FS: errorfs.Wrap(spill.OSFS{}, lc.inject)})
	require.NoError(lc.t, err)

	for range rng.IntN(12) {
		switch op := rng.IntN(10); {
		case op < 3:
			lc.allDown = rng.IntN(20) == 0
			if lc.allDown {
				lc.counts.allRootsDown++
			}
			f, err := m.CreateFile()
			lc.allDown = false
			if err != nil {
				lc.checkCreateError(err, dirs)
				lc.errs = append(lc.errs, err)
				continue
			}
			lc.model[f] = 0
			lc.live = append(lc.live, f)
		case op < 7:
			f := lc.pick()
			if f == nil {
				continue
			}
			n, err := f.Write(make([]byte, rng.IntN(16<<10)))
			if lc.closed[f] {
				if !errors.Is(err, spill.ErrFileReleased) {
					lc.failf("a write after a failed Release returned %v, not ErrFileReleased", err)
				}
				continue
			}
			if err != nil {
				lc.checkError(err, f.Path())
				if n != 0 {
					lc.failf("a failed write reported %d bytes written", n)
				}
				continue
			}
			lc.model[f] += int64(n)
		case op < 9:
			f := lc.pick()
			if f == nil {
				continue
			}
			if err := f.Release(); err != nil {
				lc.checkError(err, f.Path())
				lc.errs = append(lc.errs, err)
				lc.closed[f] = true
				continue
			}
			delete(lc.model, f)
			lc.live = slices.DeleteFunc(lc.live, func(g *spill.File) bool { return g == f })
		default:
			if f := lc.pick(); f != nil {
				lc.counts.dirsRemoved++
				require.NoError(lc.t, os.RemoveAll(filepath.Dir(f.Path()))) // a tmp cleaner
			}
		}
		lc.checkUsage(m)
	}

	closeErr := m.Close()
	if closeErr != nil {
		lc.checkJoined(closeErr)
		lc.errs = append(lc.errs, closeErr)
	}
	lc.sweepLeftovers(dirs, closeErr)
}

// pick returns a random live file of the model, or nil.
func (lc *lifecycle) pick() *spill.File {
	if len(lc.live) == 0 {
		return nil
	}
	return lc.live[lc.rng.IntN(len(lc.live))]
}

// checkUsage compares the manager's usage with the model: every live file's written bytes, plus
// those of files whose delete failed or was never asked for, are on disk and counted.
func (lc *lifecycle) checkUsage(m *spill.Manager) {
	var want int64
	for _, size := range lc.model {
		want += size
	}
	if got := m.Used(); got != want {
		lc.failf("usage is %d, the live files hold %d", got, want)
	}
}

func (lc *lifecycle) checkCreateError(err error, dirs []string) {
	var noRoot *spill.NoUsableRootError
	if !errors.As(err, &noRoot) {
		lc.failf("CreateFile failed with %T %v, not a *NoUsableRootError", err, err)
	}
	for i, f := range noRoot.Failures {
		if f.Root != dirs[i] {
			lc.failf("failure %d names root %q, not %q", i, f.Root, dirs[i])
		}
		lc.checkError(f.Err, f.Root)
	}
}

// checkError checks that err is typed and names a path under (or at) want.
func (lc *lifecycle) checkError(err error, want string) {
	var limitErr *spill.LimitError
	if errors.As(err, &limitErr) {
		return
	}
	var pathErr *fs.PathError
	if !errors.As(err, &pathErr) {
		lc.failf("error %T %v names no path", err, err)
	}
	if !strings.HasPrefix(pathErr.Path, filepath.Dir(want)) {
		lc.failf("error %v names %q, expected a path near %q", err, pathErr.Path, want)
	}
}

func (lc *lifecycle) checkJoined(err error) {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		lc.failf("Close error %T is not a joined list", err)
	}
	for _, e := range joined.Unwrap() {
		var pathErr *fs.PathError
		if !errors.As(e, &pathErr) {
			lc.failf("Close error %v names no path", e)
		}
	}
}

// sweepLeftovers checks that whatever the lifecycle left was named by an error, then removes it
// the way the next executor would: by a sweep, which must find the plan's owner lock free.
func (lc *lifecycle) sweepLeftovers(dirs []string, closeErr error) {
	var left []string
	for _, d := range dirs {
		for _, pattern := range []string{spill.DirPrefix + "*", "." + spill.DirPrefix + "*"} { // dirs, lock files
			found, err := filepath.Glob(filepath.Join(d, pattern))
			require.NoError(lc.t, err)
			left = append(left, found...)
		}
	}
	if len(left) == 0 {
		return
	}
	named := fmt.Sprint(lc.errs)
	for _, d := range left {
		// A lock file is named by its plan dir.
		planDir := filepath.Join(filepath.Dir(d), strings.TrimSuffix(strings.TrimPrefix(filepath.Base(d), "."), spill.OwnerLockSuffix))
		if !strings.Contains(named, d) && !strings.Contains(named, planDir) {
			var listing []string
			_ = filepath.WalkDir(filepath.Dir(d), func(p string, _ fs.DirEntry, _ error) error { listing = append(listing, p); return nil })
			lc.failf("%s is left and no error named it: %v\nlisting: %v", d, lc.errs, listing)
		}
	}
	lc.counts.leftovers += len(left)
	for _, d := range dirs {
		removed, err := spill.SweepOrphans(d)
		require.NoError(lc.t, err)
		for _, r := range removed {
			if !strings.HasPrefix(r, d) {
				lc.failf("the sweep removed %s outside %s", r, d)
			}
		}
	}
}
