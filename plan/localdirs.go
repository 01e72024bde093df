package plan

import (
	crand "crypto/rand"
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/spillway/spillway/spill"
)

// LocalDirs is a validated list of local dirs. Parse it once and reuse it for every plan: the
// parse allocates and checks, a plan built from it does neither. Callers that cannot keep a Go
// value between plans (the JVM) register their dirs instead: see RegisterLocalDirs.
type LocalDirs struct {
	roots *spill.Roots
}

// ParseLocalDirs validates dirs without touching the filesystem; see spill.NewRoots.
func ParseLocalDirs(dirs []string) (LocalDirs, error) {
	roots, err := spill.NewRoots(dirs)
	if err != nil {
		return LocalDirs{}, err
	}
	return LocalDirs{roots: roots}, nil
}

// An executor passes the same local dirs to every plan. Registering them once gives a handle
// that CreatePlanIn takes, so a plan is built without converting or validating a path.

// RegisterLocalDirs validates dirs once (without touching the filesystem; see spill.NewRoots) and
// returns a handle for CreatePlanIn. The handle lives until ReleaseLocalDirs.
func (r *Registry) RegisterLocalDirs(dirs []string) (uint64, error) {
	roots, err := spill.NewRoots(dirs)
	if err != nil {
		return 0, err
	}
	return r.dirs.add(roots), nil
}

// ReleaseLocalDirs forgets a registration. Plans already created in those dirs are not affected:
// each holds what it needs for its own life.
func (r *Registry) ReleaseLocalDirs(h uint64) error {
	if _, ok := r.dirs.take(h); !ok {
		return &HandleError{What: "local dirs registration", Handle: h}
	}
	return nil
}

// CreatePlanIn is CreatePlan in the local dirs registered under dirsHandle. It touches no
// filesystem and takes no lock: the lookup of the registration is a lock-free read.
func (r *Registry) CreatePlanIn(dirsHandle uint64, limit, executorLimit int64) (uint64, error) {
	roots, ok := r.dirs.get(dirsHandle)
	if !ok {
		return 0, &HandleError{What: "local dirs registration", Handle: dirsHandle}
	}
	return r.CreatePlan(LocalDirs{roots: roots}, limit, executorLimit)
}

// LiveLocalDirs counts registrations not yet released, for leak checks.
func (r *Registry) LiveLocalDirs() int { return r.dirs.len() }

// readMostlyTable maps handles to values that are added and removed rarely and read by every
// plan: reads take no lock (sync.Map), so plans that share one registration never meet on a
// mutex. Handles are issued like handleTable's: a keyed bijective scramble of a counter, so they
// are never reissued and a forged or another table's handle misses.
type readMostlyTable[T any] struct {
	key uint64
	seq atomic.Uint64
	m   sync.Map // uint64 -> T
	n   atomic.Int64
}

func newReadMostlyTable[T any]() *readMostlyTable[T] {
	var seed [8]byte
	_, _ = crand.Read(seed[:]) // never fails on Linux
	return &readMostlyTable[T]{key: binary.LittleEndian.Uint64(seed[:])}
}

func (t *readMostlyTable[T]) add(v T) uint64 {
	for {
		if h := scramble(t.seq.Add(1) ^ t.key); h != 0 {
			t.m.Store(h, v)
			t.n.Add(1)
			return h
		}
	}
}

func (t *readMostlyTable[T]) get(h uint64) (T, bool) {
	v, ok := t.m.Load(h)
	if !ok {
		var zero T
		return zero, false
	}
	return v.(T), true
}

// take removes h and returns its value; of two callers racing for one handle only one gets it.
func (t *readMostlyTable[T]) take(h uint64) (T, bool) {
	v, ok := t.m.LoadAndDelete(h)
	if !ok {
		var zero T
		return zero, false
	}
	t.n.Add(-1)
	return v.(T), true
}

func (t *readMostlyTable[T]) len() int { return int(t.n.Load()) }
