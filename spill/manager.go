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
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
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

	// Shared, if set, is shared with other managers: it counts what they all do and holds a
	// budget over all their files together. SharedLimit is this manager's view of that budget,
	// taken now, so a manager built later with another value never changes this one's.
	Shared             *Shared
	SharedLimit        int64
	SharedLimitSetting string // names the configuration that sets SharedLimit

	// Format frames the files made by CreateFramedFile (codec, key, chunk size); fixed for the
	// manager's life, so *Format must not change afterwards (a pointer keeps a plan that never
	// spills small). nil: no compression, no encryption, CRC-32C per chunk.
	Format *Format
}

// Shared is what the managers of one process (a Spark executor) share: a budget over the bytes
// in all their live files, and counters. The zero value is ready to use.
type Shared struct {
	used  atomic.Int64
	Stats Stats
}

// Used is the number of bytes in the live files of all managers sharing s.
func (s *Shared) Used() int64 { return s.used.Load() }

// Stats counts what managers did. Every field is updated atomically and may be read at any time.
type Stats struct {
	PlansSpilled atomic.Int64 // managers that created at least one file
	DirsCreated  atomic.Int64 // plan dirs created, healed ones included
	FilesCreated atomic.Int64 // spill files created
	BytesWritten atomic.Int64 // bytes written to spill files: on disk, framing included
	// LogicalBytesWritten counts the plain bytes written through framed files' Writers, as
	// appended in whole chunks (their on-disk bytes are in BytesWritten).
	LogicalBytesWritten atomic.Int64
	LimitFailures       atomic.Int64 // writes refused by a limit
	FSErrors            atomic.Int64 // filesystem calls that failed
}

// Manager is one plan's spill space. It is safe for concurrent use.
type Manager struct {
	roots   *Roots
	limit   int64
	setting string
	fs      FS
	format  *Format // never nil after Init

	used atomic.Int64 // bytes reserved by writes in flight plus bytes in live files

	shared        *Shared // nil: no shared budget and no counters
	sharedLimit   int64
	sharedSetting string

	mu     sync.Mutex
	closed bool
	state  *spillState // nil until the first file: a plan that never spills holds nothing more
}

// spillState is what a manager keeps once it has spilled, guarded by Manager.mu.
type spillState struct {
	next    int                // the root that takes the next file
	spilled bool               // a file was created
	current []*planDir         // per root: its current plan dir, nil until a file lands there
	failed  []error            // per root: why it was given up for this manager, nil while usable
	made    []*planDir         // every plan dir created, healed ones included, removed at Close
	files   map[*File]struct{} // files not yet deleted; nil once Close has taken them
	strays  []*planDir         // dirs never made, whose lock file could not be removed
}

// planDir is a plan dir, held open so that its files are made and removed through it, and its
// owner lock file beside it, locked while the manager lives: a sweep by another process (see
// SweepOrphans) removes the dir only once the lock is free, that is once this process has died
// without closing the manager.
type planDir struct {
	rootIndex int
	root      Dir // the root, opened when the dir was made: everything below is done through it
	name      string
	path      string
	dir       Dir // nil if it could not be opened
	lockName  string
	lock      Lock // nil once closed
}

func init() {
	// The Go runtime makes its poller (an epoll descriptor) on the first timer, and crypto/rand
	// arms a timer on every read. A first spill in a process out of descriptors would then die in
	// "fatal error: runtime: netpollinit failed", taking the JVM with it, instead of returning
	// EMFILE. Make the poller when the library loads, while descriptors are to be had.
	time.AfterFunc(time.Hour, func() {}).Stop()
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
	if cfg.Shared != nil && cfg.SharedLimit < 0 {
		return &ConfigError{Reason: "the shared spill limit is negative (" + formatBytes(cfg.SharedLimit) + "); give 0 or more bytes"}
	}
	m.roots, m.limit, m.setting, m.fs, m.format = cfg.Roots, cfg.Limit, cfg.LimitSetting, cfg.FS, cfg.Format
	if m.format == nil {
		m.format = &zeroFormat
	}
	m.shared, m.sharedLimit, m.sharedSetting = cfg.Shared, cfg.SharedLimit, cfg.SharedLimitSetting
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
// with other writers). A root that fails is given up for this manager and the next one is tried,
// as is a root where a write found no space (see RootFull); the error is a *NoUsableRootError
// only when every root has failed. Running out of file descriptors gives up no root: the error is
// then a *DescriptorLimitError, and a later call may succeed. If the plan dir was removed behind
// the manager's back, a new one is made.
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
			if outOfDescriptors(err) {
				// The process, or the system, is out of descriptors: no root is to blame, and
				// giving them up would fail this plan for good over a passing shortage.
				return nil, &DescriptorLimitError{Err: m.fsError(err)}
			}
			s.failed[r] = m.fsError(err)
			continue
		}
		s.next = (r + 1) % n
		s.files[f] = struct{}{}
		if !s.spilled {
			s.spilled = true
			m.stats().PlansSpilled.Add(1)
		}
		m.stats().FilesCreated.Add(1)
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
			next:    mrand.IntN(n),
			current: make([]*planDir, n),
			failed:  make([]error, n),
			files:   make(map[*File]struct{}),
		}
	}
	return m.state
}

// createIn creates a file under root r, making or remaking its plan dir as needed.
func (m *Manager) createIn(s *spillState, r int) (*File, error) {
	if s.current[r] == nil {
		if err := m.makeDir(s, r); err != nil {
			return nil, err
		}
	}
	f, err := m.createFileIn(s.current[r])
	if errors.Is(err, fs.ErrNotExist) {
		// The plan dir is gone (a tmp cleaner): heal with a new one instead of failing for ever.
		if err := m.makeDir(s, r); err != nil {
			return nil, err
		}
		f, err = m.createFileIn(s.current[r])
	}
	return f, err
}

// makeDir makes root r's plan dir, its owner lock first: a plan dir never exists unowned, so a
// sweep can leave alone every dir without a lock file. The root is opened here, following a
// symlink if it is one, and held with the dir: retargeting the root's symlink later changes
// nothing for this dir.
func (m *Manager) makeDir(s *spillState, r int) error {
	root, err := m.fs.OpenRoot(m.roots.Path(r))
	if err != nil {
		return err
	}
	name := DirPrefix + crand.Text()
	lockName := ownerLockName(name)
	lock, err := root.CreateLock(lockName, fileMode)
	if err != nil {
		_ = root.Close()
		return err
	}
	d := &planDir{rootIndex: r, root: root, name: name, path: filepath.Join(root.Path(), name), lockName: lockName, lock: lock}
	if err := root.Mkdir(name, dirMode); err != nil {
		if ignoreNotExist(root.Remove(lockName)) != nil {
			s.strays = append(s.strays, d) // Close tries again
		} else {
			_ = root.Close()
		}
		_ = lock.Close()
		d.lock = nil
		return err
	}
	m.stats().DirsCreated.Add(1)
	if d.dir, err = root.OpenDir(name); err != nil {
		// Undo at once rather than at Close: out of descriptors, say, holding the root and the
		// lock until then would starve every later try.
		if m.tryRemovePlanDir(d) != nil {
			s.made = append(s.made, d) // Close tries again, and names it if it fails
		} else {
			d.closeAll()
		}
		return err
	}
	s.made = append(s.made, d)
	s.current[r] = d
	return nil
}

func (m *Manager) createFileIn(d *planDir) (*File, error) {
	name := "spill-" + crand.Text()
	h, err := d.dir.CreateExclusive(name, fileMode)
	if err != nil {
		return nil, err
	}
	return &File{m: m, dir: d, name: name, path: filepath.Join(d.path, name), h: h}, nil
}

// giveUpRoot takes root r out of the rotation for new files, because a write there showed it
// can take no more (see RootFull). Files already there stay readable and writable.
func (m *Manager) giveUpRoot(r int, err error) {
	m.mu.Lock()
	if m.state != nil && m.state.failed[r] == nil {
		m.state.failed[r] = err
	}
	m.mu.Unlock()
}

// reserve takes n bytes of the manager's limit and of the shared budget, or refuses with a
// *LimitError naming the limit that was hit and takes nothing.
func (m *Manager) reserve(n int64) error {
	if err := reserveOn(&m.used, m.limit, n, m.setting, false); err != nil {
		m.stats().LimitFailures.Add(1)
		return err
	}
	if m.shared != nil {
		if err := reserveOn(&m.shared.used, m.sharedLimit, n, m.sharedSetting, true); err != nil {
			m.used.Add(-n)
			m.stats().LimitFailures.Add(1)
			return err
		}
	}
	return nil
}

func reserveOn(used *atomic.Int64, limit, n int64, setting string, shared bool) error {
	for {
		u := used.Load()
		if n > limit-u {
			return &LimitError{Limit: limit, Used: u, Request: n, Setting: setting, Shared: shared}
		}
		if used.CompareAndSwap(u, u+n) {
			return nil
		}
	}
}

// unreserve gives n bytes back to the manager's limit and the shared budget.
func (m *Manager) unreserve(n int64) {
	m.used.Add(-n)
	if m.shared != nil {
		m.shared.used.Add(-n)
	}
}

// noStats absorbs the counts of a manager that shares no counters.
var noStats Stats

// stats is where the manager counts what it does.
func (m *Manager) stats() *Stats {
	if m.shared == nil {
		return &noStats
	}
	return &m.shared.Stats
}

// fsError counts a failed filesystem call and returns err.
func (m *Manager) fsError(err error) error {
	m.stats().FSErrors.Add(1)
	return err
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
// then left, and named in the error). A plan dir is removed only if the entry at its name is
// still the dir the manager made (compared by inode with the descriptor it holds): a symlink or
// another dir swapped in there is left alone, the plan's lock file is removed, and the error
// names the path (ErrPlanDirMoved) only if the plan's dir still exists elsewhere. A manager that
// never spilled makes no filesystem call.
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
	for _, d := range s.strays {
		if err := ignoreNotExist(d.root.Remove(d.lockName)); err != nil {
			errs = append(errs, m.fsError(err))
		}
		_ = d.root.Close()
	}
	for i := len(s.made) - 1; i >= 0; i-- {
		if err := m.removePlanDir(s.made[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ErrPlanDirMoved is reported, for a plan dir's path, by a Close that found something else at
// that path while the dir the plan made still exists elsewhere (someone renamed it away, and
// perhaps put a symlink in its place). Close empties that dir through its descriptor but cannot
// remove it without its name, and leaves whatever is at the path alone.
var ErrPlanDirMoved = errors.New("the plan dir was moved away or replaced; the dir the plan made was emptied but is left wherever it was moved to, and what is now at this path was not touched")

// removePlanDir removes d, once its files are gone, if the entry at its name in the root it was
// made in is still that very dir, and then its lock file. The dir and the lock are compared by
// inode with the descriptors the plan holds: a symlink or another dir swapped in under the name is
// never removed nor followed. Everything d holds open is closed.
func (m *Manager) removePlanDir(d *planDir) error {
	defer d.closeAll()
	return m.tryRemovePlanDir(d)
}

// closeAll closes what d holds open.
func (d *planDir) closeAll() {
	if d.dir != nil {
		_ = d.dir.Close()
	}
	if d.lock != nil {
		_ = d.lock.Close()
	}
	_ = d.root.Close()
}

// tryRemovePlanDir is removePlanDir without the closing.
func (m *Manager) tryRemovePlanDir(d *planDir) error {
	if d.dir == nil {
		// Never opened, so never written to: rmdir, which removes only an empty directory and
		// never a symlink, is all there is to do.
		err := ignoreNotExist(d.root.RemoveDir(d.name))
		if err != nil {
			return m.fsError(err) // the dir stays owned by its lock file, for a sweep
		}
		return m.removeLock(d)
	}
	ours, err := d.dir.Stat()
	if err != nil {
		return m.fsError(err)
	}
	there, err := d.root.StatAt(d.name)
	switch {
	case err == nil && there.SameFile(ours):
		if err := ignoreNotExist(d.root.RemoveDir(d.name)); err != nil {
			// Something the plan did not create is inside (it stays, as does the lock file, so
			// a sweep removes the dir once the lock is free), or the disk failed.
			return m.fsError(err)
		}
		return m.removeLock(d)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return m.fsError(err) // cannot tell what is there: touch nothing, keep the dir owned
	}
	// Something else is at the name, or nothing. The lock guards the dir at that name, which
	// is not ours: it goes.
	lockErr := m.removeLock(d)
	if ours.Nlink == 0 {
		return lockErr // deleted behind our back (a tmp cleaner): nothing of ours is left
	}
	return errors.Join(&fs.PathError{Op: "rmdir", Path: d.path, Err: ErrPlanDirMoved}, lockErr)
}

// removeLock removes d's lock file if the entry at its name is still the file the plan locked.
func (m *Manager) removeLock(d *planDir) error {
	ours, err := d.lock.Stat()
	if err != nil {
		return m.fsError(err)
	}
	there, err := d.root.StatAt(d.lockName)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return m.fsError(err)
	case !there.SameFile(ours):
		return &fs.PathError{Op: "remove", Path: filepath.Join(d.root.Path(), d.lockName), Err: ErrLockReplaced}
	}
	if err := ignoreNotExist(d.root.Remove(d.lockName)); err != nil {
		return m.fsError(err)
	}
	return nil
}

// ErrLockReplaced is reported, for a lock file's path, by a Close that found another file there
// than the one its plan created and locked; that file is left alone.
var ErrLockReplaced = errors.New("the plan's owner lock file was replaced by another file, which was left alone")

// File is one spill file. Writes append. It is safe for concurrent use, though a spill file is
// normally written by one goroutine and then read back.
type File struct {
	m    *Manager
	dir  *planDir // the dir it was made in, through which it is removed
	name string
	path string

	mu      sync.Mutex
	h       Handle // nil once released
	size    int64  // bytes written and counted against the limit
	broken  error  // non-nil once a failed write's tail could not be truncated: no more writes
	framing int    // framingRaw, framingWriting or framingFinished
	gone    bool   // deleted from disk, its bytes given back
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
// write itself fails, the file is truncated back to its size before the write, whatever the OS
// reported (a failed pwrite may have put part of p on disk and still report nothing written), and
// every byte is given back, so usage never drifts and a reader never sees a failed write's tail.
// A write that fails because the disk is full, over quota or read-only (see RootFull) also takes
// the file's local dir out of the manager's rotation: new files go to its other dirs.
func (f *File) Write(p []byte) (int, error) {
	err := f.appendBytes(int64(len(p)), func(off int64) error {
		_, err := f.h.WriteAt(p, off)
		return err
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// copyChunk bounds the buffer WriteFrom copies through.
const copyChunk = 1 << 20

// copyBuffers are WriteFrom's copy buffers, reused: a large write allocates nothing per call.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyChunk); return &b }}

// sourceError is a failure of WriteFrom's reader, which is not the filesystem's.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// WriteFrom appends exactly n bytes read from r, whole or not at all, as Write does: n is
// reserved against the limits first, then the bytes are copied through a buffer of at most 1 MiB,
// so a write of any size allocates a bounded amount. If r or the file fails, or r ends early, the
// file is truncated back to its size before the call and n is given back.
func (f *File) WriteFrom(r io.Reader, n int64) error {
	return f.appendBytes(n, func(off int64) error {
		bp := copyBuffers.Get().(*[]byte)
		defer copyBuffers.Put(bp)
		buf := (*bp)[:min(n, copyChunk)]
		for left := n; left > 0; {
			chunk := buf[:min(left, int64(len(buf)))]
			if _, err := io.ReadFull(r, chunk); err != nil {
				return &sourceError{fmt.Errorf("spill: reading the bytes to write to %s: %w", f.path, err)}
			}
			if _, err := f.h.WriteAt(chunk, off); err != nil {
				return err
			}
			off += int64(len(chunk))
			left -= int64(len(chunk))
		}
		return nil
	})
}

// appendBytes reserves n bytes, lets write put them at the end of the file, and on failure
// truncates the file back and gives them back.
func (f *File) appendBytes(n int64, write func(off int64) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.h == nil:
		return ErrFileReleased
	case f.broken != nil:
		return f.broken
	case f.framing == framingFinished:
		return ErrFinished
	case n < 0:
		return &ConfigError{Reason: "a write of " + formatBytes(n) + "; give 0 or more bytes"}
	case n == 0:
		return nil
	}
	if err := f.m.reserve(n); err != nil {
		return err
	}
	if err := write(f.size); err != nil {
		if RootFull(err) {
			f.m.giveUpRoot(f.dir.rootIndex, err)
		}
		if terr := f.h.Truncate(f.size); terr != nil {
			// The tail stays on disk, so it stays counted, and the file takes no more writes: no
			// acknowledged byte is ever written after bytes nobody acknowledged.
			f.broken = fmt.Errorf("spill: %s holds the tail of a failed write (%v) that could not be truncated (%v); release it", f.path, err, terr)
			f.size += n
			return f.m.fsError(errors.Join(err, terr))
		}
		f.m.unreserve(n)
		if src := (*sourceError)(nil); errors.As(err, &src) {
			return src.err // the caller's source failed, not the filesystem
		}
		return f.m.fsError(err)
	}
	f.size += n
	f.m.stats().BytesWritten.Add(n)
	return nil
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
	if err := ignoreNotExist(f.dir.dir.Remove(f.name)); err != nil {
		return f.m.fsError(err)
	}
	f.gone = true
	f.m.unreserve(f.size)
	return nil
}
