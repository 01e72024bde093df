// Package spill is a lazy disk manager for one native plan's spill files.
//
// A Manager is built from validated local dirs (Roots) and a size limit without touching the
// filesystem. Its first file under a root creates that root's plan dir, spillway-<random> (mode
// 0700); other roots are left alone until a file lands there. Every byte written is reserved
// against the limit first and given back if it is not written, so usage is exact. Close deletes
// every file and dir the manager created, and nothing else.
package spill

import (
	crand "crypto/rand"
	"errors"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// DirPrefix starts the name of every plan dir; the rest of the name is random.
const DirPrefix = "spillway-"

const (
	dirMode  = 0o700
	fileMode = 0o600
)

// Config configures a Manager.
type Config struct {
	Roots *Roots // where plan dirs may go; required
	Limit int64  // bytes the manager's live files may hold together; 0 refuses every write
	// LimitSetting names the configuration that sets Limit (a Spark key, say), so that a
	// LimitError tells the user what to raise. Optional.
	LimitSetting string
	FS           FS // nil means OSFS
}

// Manager is one plan's spill space. It is safe for concurrent use.
type Manager struct {
	roots   *Roots
	limit   int64
	setting string
	fs      FS

	used atomic.Int64 // bytes reserved by writes in flight plus bytes in live files

	mu     sync.Mutex
	closed bool
	state  *spillState // nil until the first file: a plan that never spills holds nothing more
}

// spillState is what a manager keeps once it has spilled, guarded by Manager.mu.
type spillState struct {
	next   int                // the root that takes the next file
	dirs   []string           // per root: its current plan dir, "" until a file lands there
	failed []error            // per root: why it was given up for this manager, nil while usable
	made   []planDir          // every plan dir created, healed ones included, removed at Close
	files  map[*File]struct{} // files not yet deleted; nil once Close has taken them
}

// planDir is a plan dir and the owner lock inside it, held while the manager lives: a sweep by
// another process (see SweepOrphans) removes the dir only once the lock is free, that is once
// this process has died without closing the manager.
type planDir struct {
	path string
	lock io.Closer
}

// New returns a manager that has created nothing. It makes no filesystem call.
func New(cfg Config) (*Manager, error) {
	m := new(Manager)
	if err := m.Init(cfg); err != nil {
		return nil, err
	}
	return m, nil
}

// Init prepares a zero Manager, as New does, for a Manager embedded in a larger struct: a plan
// that never spills then costs one allocation. It makes no filesystem call. Init must be called
// once, before the Manager is shared.
func (m *Manager) Init(cfg Config) error {
	if cfg.Roots == nil {
		return &ConfigError{Reason: "no local dirs given; pass at least one absolute directory path"}
	}
	if cfg.Limit < 0 {
		return &ConfigError{Reason: "the spill limit is negative (" + formatBytes(cfg.Limit) + "); give 0 or more bytes"}
	}
	m.roots, m.limit, m.setting, m.fs = cfg.Roots, cfg.Limit, cfg.LimitSetting, cfg.FS
	if m.fs == nil {
		m.fs = OSFS{}
	}
	return nil
}

// Limit is the number of bytes the manager's live files may hold together.
func (m *Manager) Limit() int64 { return m.limit }

// Used is the number of bytes in the manager's live files, plus those of writes in flight.
func (m *Manager) Used() int64 { return m.used.Load() }

// CreateFile creates an empty spill file (mode 0600, random name) in a plan dir, creating that
// dir first if this is the first file under its root. Roots are taken round-robin from a random
// start per manager: this spreads one plan's files, and concurrent plans, over the disks without
// asking the filesystem anything (free-space checks would cost a statfs per file and still race
// with other writers). A root that fails is given up for this manager and the next one is tried;
// the error is a *NoUsableRootError only when every root has failed. If the plan dir was removed
// behind the manager's back, a new one is made.
func (m *Manager) CreateFile() (*File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	s := m.spillState()
	n := m.roots.Len()
	for i := range n {
		r := (s.next + i) % n
		if s.failed[r] != nil {
			continue
		}
		f, err := m.createIn(s, r)
		if err != nil {
			s.failed[r] = err
			continue
		}
		s.next = (r + 1) % n
		s.files[f] = struct{}{}
		return f, nil
	}
	failures := make([]RootFailure, n)
	for r := range n {
		failures[r] = RootFailure{Root: m.roots.Path(r), Err: s.failed[r]}
	}
	return nil, &NoUsableRootError{Failures: failures}
}

func (m *Manager) spillState() *spillState {
	if m.state == nil {
		n := m.roots.Len()
		m.state = &spillState{
			next:   mrand.IntN(n),
			dirs:   make([]string, n),
			failed: make([]error, n),
			files:  make(map[*File]struct{}),
		}
	}
	return m.state
}

// createIn creates a file under root r, making or remaking its plan dir as needed.
func (m *Manager) createIn(s *spillState, r int) (*File, error) {
	if s.dirs[r] == "" {
		if err := m.makeDir(s, r); err != nil {
			return nil, err
		}
	}
	f, err := m.createFileIn(s.dirs[r])
	if errors.Is(err, fs.ErrNotExist) {
		// The plan dir is gone (a tmp cleaner): heal with a new one instead of failing for ever.
		if err := m.makeDir(s, r); err != nil {
			return nil, err
		}
		f, err = m.createFileIn(s.dirs[r])
	}
	return f, err
}

func (m *Manager) makeDir(s *spillState, r int) error {
	dir := filepath.Join(m.roots.Path(r), DirPrefix+crand.Text())
	if err := m.fs.Mkdir(dir, dirMode); err != nil {
		return err
	}
	lock, err := m.fs.CreateLock(filepath.Join(dir, OwnerLockName), fileMode)
	if err != nil {
		_ = removeIfExists(m.fs, dir)
		return err
	}
	s.dirs[r] = dir
	s.made = append(s.made, planDir{path: dir, lock: lock})
	return nil
}

func (m *Manager) createFileIn(dir string) (*File, error) {
	path := filepath.Join(dir, "spill-"+crand.Text())
	h, err := m.fs.CreateExclusive(path, fileMode)
	if err != nil {
		return nil, err
	}
	return &File{m: m, path: path, h: h}, nil
}

// reserve takes n bytes of the limit, or refuses with a *LimitError and takes nothing.
func (m *Manager) reserve(n int64) error {
	for {
		used := m.used.Load()
		if n > m.limit-used {
			return &LimitError{Limit: m.limit, Used: used, Request: n, Setting: m.setting}
		}
		if m.used.CompareAndSwap(used, used+n) {
			return nil
		}
	}
}

// forget drops a deleted file from the live set.
func (m *Manager) forget(f *File) {
	m.mu.Lock()
	if m.state != nil && m.state.files != nil {
		delete(m.state.files, f)
	}
	m.mu.Unlock()
}

// Close deletes every file the manager created, open or not, then every plan dir it created,
// and nothing else: never a root, and never a file someone else put in a plan dir (that dir is
// then left, and named in the error). A manager that never spilled makes no filesystem call.
// Close is safe to call twice; the second call does nothing. Afterwards CreateFile fails with
// ErrClosed and the files fail with ErrFileReleased.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	s := m.state
	var files map[*File]struct{}
	if s != nil {
		files, s.files = s.files, nil
	}
	m.mu.Unlock()
	if s == nil {
		return nil
	}
	var errs []error
	for f := range files {
		f.mu.Lock()
		err := f.discard()
		f.mu.Unlock()
		if err != nil && !errors.Is(err, ErrFileReleased) {
			errs = append(errs, err)
		}
	}
	for i := len(s.made) - 1; i >= 0; i-- {
		d := s.made[i]
		// The lock goes last but one: until the dir is empty, a sweep must see it owned.
		err := removeIfExists(m.fs, filepath.Join(d.path, OwnerLockName))
		_ = d.lock.Close()
		if err == nil {
			err = removeIfExists(m.fs, d.path)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// File is one spill file. Writes append. It is safe for concurrent use, though a spill file is
// normally written by one goroutine and then read back.
type File struct {
	m    *Manager
	path string

	mu   sync.Mutex
	h    Handle // nil once released
	size int64  // bytes written and counted against the limit
	gone bool   // deleted from disk, its bytes given back
}

// Path is the file's absolute path.
func (f *File) Path() string { return f.path }

// Size is the number of bytes written to the file.
func (f *File) Size() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.size
}

// Write appends p whole or not at all. Its bytes are reserved against the manager's limit before
// the write; if the limit would be passed it fails with a *LimitError and writes nothing. If the
// write itself fails, the partial tail is truncated away and every unwritten byte is given back,
// so usage never drifts (if even the truncate fails, the bytes left on disk stay counted).
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.h == nil {
		return 0, ErrFileReleased
	}
	n := int64(len(p))
	if n == 0 {
		return 0, nil
	}
	if err := f.m.reserve(n); err != nil {
		return 0, err
	}
	w, err := f.h.WriteAt(p, f.size)
	if err != nil {
		if w > 0 && f.h.Truncate(f.size) == nil {
			w = 0
		}
		f.m.used.Add(int64(w) - n)
		f.size += int64(w)
		return 0, err
	}
	f.size += n
	return len(p), nil
}

// ReadAt reads from the file as io.ReaderAt does.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.h == nil {
		return 0, ErrFileReleased
	}
	return f.h.ReadAt(p, off)
}

// Release closes and deletes the file and gives its bytes back to the manager. If the delete
// fails the bytes stay counted and the manager's Close tries again. A second Release after a
// successful one returns ErrFileReleased.
func (f *File) Release() error {
	f.mu.Lock()
	err := f.discard()
	f.mu.Unlock()
	if err == nil {
		f.m.forget(f)
	}
	return err
}

// discard closes and deletes the file. f.mu must be held.
func (f *File) discard() error {
	if f.gone {
		return ErrFileReleased
	}
	if f.h != nil {
		// A close error cannot lose data that is about to be deleted.
		_ = f.h.Close()
		f.h = nil
	}
	if err := removeIfExists(f.m.fs, f.path); err != nil {
		return err
	}
	f.gone = true
	f.m.used.Add(-f.size)
	return nil
}
