// Package errorfs wraps a spill.FS and fails the calls an Injector picks, the way the OS fails
// them, for tests: real disks cannot be made to fail on demand everywhere a test needs a fault.
// Production code never imports it.
//
// Each FS call is one operation kind (Op), so a rule can aim at exactly one call. A fault looks
// like the real one through spill.OSFS: the same *fs.PathError (its Op word, the full path, the
// errno) and the same side effects. TestInjectedFaultsLookReal compares each with the real fault
// named here:
//
//   - a failed write puts the first half of the data on disk and reports 0 bytes written. Real
//     ENOSPC on a full tmpfs and real EFBIG under RLIMIT_FSIZE (ulimit -f) both leave the part that
//     fit on disk while os.File.WriteAt reports n=0: it drops the count of a pwrite that ended in
//     an error, partial or not;
//   - a failed create, mkdir or lock creation creates nothing, with the Op word "open", "mkdir"
//     and "open": as ENOSPC on a tmpfs out of inodes does, and EMFILE under a low RLIMIT_NOFILE;
//   - a failed statfs (FS.FreeSpace) reports the Op word "statfs" and the root's path, as ENOENT
//     does for a root that is not there;
//   - a failed remove or rmdir removes nothing (EROFS on a read-only bind mount), except that
//     ENOENT removes first: unlink reports ENOENT only when the name is already gone, as after a
//     cleaner raced it.
//
// ENOENT injected into a call other than a remove claims that something is missing which may be
// there; a test that injects it models a cleaner only if it also removes the thing.
//
// Closes are never failed: the manager ignores a close error, as there is nothing it could do.
package errorfs

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/spillway/spillway/spill"
)

// Op is one kind of filesystem call of the spill.FS seam.
type Op uint8

const (
	OpOpenRoot   Op = iota // FS.OpenRoot
	OpMkdir                // Dir.Mkdir
	OpOpenDir              // Dir.OpenDir
	OpCreateLock           // Dir.CreateLock
	OpTryLock              // Dir.TryLock
	OpCreate               // Dir.CreateExclusive
	OpRemove               // Dir.Remove
	OpRemoveDir            // Dir.RemoveDir
	OpStatAt               // Dir.StatAt
	OpStat                 // Dir.Stat
	OpStatLock             // Lock.Stat
	OpReadDir              // Dir.ReadDir
	OpWrite                // Handle.WriteAt
	OpRead                 // Handle.ReadAt
	OpTruncate             // Handle.Truncate
	OpFreeSpace            // FS.FreeSpace
	NumOps                 // the number of kinds
)

var opNames = [NumOps]string{"openroot", "mkdir", "opendir", "createlock", "trylock", "create", "remove", "rmdir", "statat", "stat", "statlock", "readdir", "write", "read", "truncate", "freespace"}

func (o Op) String() string {
	if o < NumOps {
		return opNames[o]
	}
	return "op?"
}

// pathErrOp is the Op word of the *fs.PathError that spill.OSFS returns when the call fails.
func (o Op) pathErrOp(errno syscall.Errno) string {
	switch o {
	case OpMkdir:
		return "mkdir"
	case OpTryLock:
		if errno == syscall.EWOULDBLOCK {
			return "flock"
		}
	case OpRemove:
		return "remove"
	case OpRemoveDir:
		return "rmdir"
	case OpStatAt:
		return "lstat"
	case OpStat, OpStatLock:
		return "fstat"
	case OpReadDir:
		return "readdirent"
	case OpWrite:
		return "write"
	case OpRead:
		return "read"
	case OpTruncate:
		return "truncate"
	case OpFreeSpace:
		return "statfs"
	}
	return "open"
}

// Injector is asked before every call with its kind and path (the full path of the file or dir
// the call is about); a non-zero errno fails the call. It may be called from many goroutines.
type Injector func(op Op, path string) syscall.Errno

// Rule is a condition on a call.
type Rule func(op Op, path string) bool

// Errno fails a call with e when every rule holds. Rules are asked in order and the first that
// does not hold ends the asking, so a counting rule (After, Randomly) placed last counts only the
// calls the rules before it picked.
func Errno(e syscall.Errno, rules ...Rule) Injector {
	return func(op Op, path string) syscall.Errno {
		for _, r := range rules {
			if !r(op, path) {
				return 0
			}
		}
		return e
	}
}

// First asks each injector in turn and returns the first errno that is not zero.
func First(injectors ...Injector) Injector {
	return func(op Op, path string) syscall.Errno {
		for _, in := range injectors {
			if e := in(op, path); e != 0 {
				return e
			}
		}
		return 0
	}
}

// Log calls fn with every call and fails none.
func Log(fn func(op Op, path string)) Injector {
	return func(op Op, path string) syscall.Errno {
		fn(op, path)
		return 0
	}
}

// OnOp holds for calls of the given kinds.
func OnOp(ops ...Op) Rule {
	return func(op Op, _ string) bool {
		for _, o := range ops {
			if o == op {
				return true
			}
		}
		return false
	}
}

// OnPath holds for calls whose path contains substr.
func OnPath(substr string) Rule {
	return func(_ Op, path string) bool { return strings.Contains(path, substr) }
}

// Under holds for calls on dir or anything below it.
func Under(dir string) Rule {
	dir = filepath.Clean(dir)
	return func(_ Op, path string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }
}

// Randomly holds with probability p, drawn from a generator seeded with seed.
func Randomly(p float64, seed uint64) Rule {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func(Op, string) bool {
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64() < p
	}
}

// After holds from the (n+1)-th time it is asked on.
func After(n int64) Rule {
	var asked atomic.Int64
	return func(Op, string) bool { return asked.Add(1) > n }
}

// While holds while on is true.
func While(on *atomic.Bool) Rule {
	return func(Op, string) bool { return on.Load() }
}

// FS is a spill.FS whose calls fail as Inject says.
type FS struct {
	base   spill.FS
	inject Injector
}

var _ spill.FS = (*FS)(nil)

// Wrap returns base with faults injected by inject (nil injects none).
func Wrap(base spill.FS, inject Injector) *FS { return &FS{base: base, inject: inject} }

func (f *FS) fault(op Op, path string) error {
	if f.inject == nil {
		return nil
	}
	if errno := f.inject(op, path); errno != 0 {
		return &fs.PathError{Op: op.pathErrOp(errno), Path: path, Err: errno}
	}
	return nil
}

func (f *FS) OpenRoot(path string) (spill.Dir, error) {
	if err := f.fault(OpOpenRoot, path); err != nil {
		return nil, err
	}
	d, err := f.base.OpenRoot(path)
	if err != nil {
		return nil, err
	}
	return &dir{Dir: d, fs: f}, nil
}

func (f *FS) FreeSpace(path string) (int64, error) {
	if err := f.fault(OpFreeSpace, path); err != nil {
		return 0, err
	}
	return f.base.FreeSpace(path)
}

type dir struct {
	spill.Dir
	fs *FS
}

func (d *dir) at(name string) string { return filepath.Join(d.Path(), name) }

func (d *dir) Mkdir(name string, perm os.FileMode) error {
	if err := d.fs.fault(OpMkdir, d.at(name)); err != nil {
		return err
	}
	return d.Dir.Mkdir(name, perm)
}

func (d *dir) OpenDir(name string) (spill.Dir, error) {
	if err := d.fs.fault(OpOpenDir, d.at(name)); err != nil {
		return nil, err
	}
	sub, err := d.Dir.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &dir{Dir: sub, fs: d.fs}, nil
}

func (d *dir) CreateLock(name string, perm os.FileMode) (spill.Lock, error) {
	if err := d.fs.fault(OpCreateLock, d.at(name)); err != nil {
		return nil, err
	}
	l, err := d.Dir.CreateLock(name, perm)
	if err != nil {
		return nil, err
	}
	return &lock{Lock: l, fs: d.fs, path: d.at(name)}, nil
}

func (d *dir) TryLock(name string) (spill.Lock, error) {
	if err := d.fs.fault(OpTryLock, d.at(name)); err != nil {
		return nil, err
	}
	l, err := d.Dir.TryLock(name)
	if err != nil {
		return nil, err
	}
	return &lock{Lock: l, fs: d.fs, path: d.at(name)}, nil
}

func (d *dir) CreateExclusive(name string, perm os.FileMode) (spill.Handle, error) {
	if err := d.fs.fault(OpCreate, d.at(name)); err != nil {
		return nil, err
	}
	h, err := d.Dir.CreateExclusive(name, perm)
	if err != nil {
		return nil, err
	}
	return &handle{Handle: h, fs: d.fs, path: d.at(name)}, nil
}

func (d *dir) Remove(name string) error {
	return d.fs.remove(OpRemove, d.at(name), func() error { return d.Dir.Remove(name) })
}

func (d *dir) RemoveDir(name string) error {
	return d.fs.remove(OpRemoveDir, d.at(name), func() error { return d.Dir.RemoveDir(name) })
}

func (f *FS) remove(op Op, path string, remove func() error) error {
	if err := f.fault(op, path); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			// An unlink reports ENOENT only when the name is gone: model a cleaner that got
			// there first, not a file that stays while the call says it is absent.
			if rmErr := remove(); rmErr != nil {
				return rmErr
			}
		}
		return err
	}
	return remove()
}

func (d *dir) StatAt(name string) (spill.FileID, error) {
	if err := d.fs.fault(OpStatAt, d.at(name)); err != nil {
		return spill.FileID{}, err
	}
	return d.Dir.StatAt(name)
}

func (d *dir) Stat() (spill.FileID, error) {
	if err := d.fs.fault(OpStat, d.Path()); err != nil {
		return spill.FileID{}, err
	}
	return d.Dir.Stat()
}

func (d *dir) ReadDir() ([]fs.DirEntry, error) {
	if err := d.fs.fault(OpReadDir, d.Path()); err != nil {
		return nil, err
	}
	return d.Dir.ReadDir()
}

type lock struct {
	spill.Lock
	fs   *FS
	path string
}

func (l *lock) Stat() (spill.FileID, error) {
	if err := l.fs.fault(OpStatLock, l.path); err != nil {
		return spill.FileID{}, err
	}
	return l.Lock.Stat()
}

type handle struct {
	spill.Handle
	fs   *FS
	path string
}

func (h *handle) WriteAt(p []byte, off int64) (int, error) {
	if err := h.fs.fault(OpWrite, h.path); err != nil {
		// What reached the disk before the failure stays there, and the count is dropped.
		_, _ = h.Handle.WriteAt(p[:len(p)/2], off)
		return 0, err
	}
	return h.Handle.WriteAt(p, off)
}

func (h *handle) ReadAt(p []byte, off int64) (int, error) {
	if err := h.fs.fault(OpRead, h.path); err != nil {
		return 0, err
	}
	return h.Handle.ReadAt(p, off)
}

func (h *handle) Truncate(size int64) error {
	if err := h.fs.fault(OpTruncate, h.path); err != nil {
		return err
	}
	return h.Handle.Truncate(size)
}
