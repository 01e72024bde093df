// Package spill is a lazy disk manager for one native plan's spill files.
//
// A Manager is built from validated local dirs (Roots) and a size limit without touching the
// filesystem. Its first file under a root creates that root's plan dir, spillway-<random> (mode
// 0700); other roots are left alone until a file lands there. Every byte written is reserved
// against the limit first and given back if it is not written, so usage is exact. Close deletes
// every file and dir the manager created, and nothing else.
package spill

import (
	"cmp"
	"errors"
	"io/fs"
	mrand "math/rand/v2"
	"slices"
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

	// Remote, if set, takes the framed files that no local root can (remote.go); shared by the
	// managers of the process, like Shared. nil: a file no root takes fails with a
	// *NoUsableRootError.
	Remote *Remote
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

	remote *Remote // nil: no remote tier

	mu     sync.Mutex
	closed bool
	state  *spillState // nil until the first file: a plan that never spills holds nothing more
}

// spillState is what a manager keeps once it has spilled, guarded by Manager.mu.
type spillState struct {
	next    int                // the root that takes the next file
	spilled bool               // a file was created
	current []*planDir         // per root: its current plan dir, nil until a file lands there
	failed  []error            // per root: why it was given up for good, nil while usable
	full    []*fullMark        // per root: set while it is out of the rotation for want of space
	made    []*planDir         // every plan dir created, healed ones included, removed at Close
	files   map[*File]struct{} // files not yet deleted; nil once Close has taken them
	strays  []*planDir         // dirs never made, whose lock file could not be removed
	// remotePrefix is the plan's prefix in the remote tier, named at its first remote file;
	// everything under it is removed at Close.
	remotePrefix string
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
	m.remote = cfg.Remote
	if m.fs == nil {
		m.fs = OSFS{}
	}
	return nil
}

// Roots are the local dirs the manager places its files in.
func (m *Manager) Roots() *Roots { return m.roots }

// Limit is the number of bytes the manager's live files may hold together.
func (m *Manager) Limit() int64 { return m.limit }

// Used is the number of bytes in the manager's live files, plus those of writes in flight.
func (m *Manager) Used() int64 { return m.used.Load() }

// CreateFile creates an empty spill file (mode 0600, random name) in a plan dir, creating that
// dir first if this is the first file under its root. Roots are taken round-robin from a random
// start per manager, which spreads one plan's files, and concurrent plans, over the disks; a root
// with less than MinFreeSpace free is passed over while another has room (see placement.go for
// how full roots leave the rotation and come back). A root that fails is given up for this
// manager and the next one is tried; the error is a *NoUsableRootError only when no root could
// take the file. Running out of file descriptors gives up no root: the error is then a
// *DescriptorLimitError, and a later call may succeed. If the plan dir was removed behind the
// manager's back, a new one is made. CreateFile never places a file in the remote tier: its
// path is for the caller to open; framed files (CreateFramedFile) may go there.
func (m *Manager) CreateFile() (*File, error) {
	return m.createFile(false)
}

// createFile is CreateFile, falling back to the remote tier, if there is one and remoteOK,
// when no local root with MinFreeSpace free takes the file: the roots short of space are then
// not tried.
func (m *Manager) createFile(remoteOK bool) (*File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	s := m.spillState()
	n := m.roots.Len()
	var short []shortRoot // roots passed over for want of room, tried last
	for i := range n {
		r := (s.next + i) % n
		free, ok := m.room(s, r)
		if !ok {
			continue
		}
		if free < MinFreeSpace {
			short = append(short, shortRoot{r, free})
			continue
		}
		if f, err := m.place(s, r); f != nil || err != nil {
			return f, err
		}
	}
	if remoteOK && m.remote != nil {
		// No root with room took the file: the remote tier has room, where a root with less
		// than MinFreeSpace would likely fail the file's first write.
		return m.createRemote(s), nil
	}
	// No root with room took the file: a small one may still fit where there is less, roomiest
	// first, and a write that does not fit fails there as it would have anyway.
	slices.SortStableFunc(short, func(a, b shortRoot) int { return cmp.Compare(b.free, a.free) })
	for _, c := range short {
		if f, err := m.place(s, c.root); f != nil || err != nil {
			return f, err
		}
	}
	failures := make([]RootFailure, n)
	for r := range n {
		failures[r] = RootFailure{Root: m.roots.Path(r), Err: s.cause(r)}
	}
	return nil, &NoUsableRootError{Failures: failures}
}

// place tries to create a file under root r. It returns the file, or an error that ends the
// search (out of descriptors), or neither when r failed and was set aside: for good, or until
// it has room again if it was out of space.
func (m *Manager) place(s *spillState, r int) (*File, error) {
	f, err := m.createIn(s, r)
	if err != nil {
		if outOfDescriptors(err) {
			// The process, or the system, is out of descriptors: no root is to blame, and
			// giving them up would fail this plan for good over a passing shortage.
			return nil, &DescriptorLimitError{Err: m.fsError(err)}
		}
		err = m.fsError(err)
		if outOfSpace(err) {
			s.markFull(r, err, m.freeSpace(r))
		} else {
			s.failed[r] = err
		}
		return nil, nil
	}
	s.next = (r + 1) % m.roots.Len()
	s.files[f] = struct{}{}
	if !s.spilled {
		s.spilled = true
		m.stats().PlansSpilled.Add(1)
	}
	m.stats().FilesCreated.Add(1)
	return f, nil
}

func (m *Manager) spillState() *spillState {
	if m.state == nil {
		n := m.roots.Len()
		m.state = &spillState{
			next:    mrand.IntN(n),
			current: make([]*planDir, n),
			failed:  make([]error, n),
			full:    make([]*fullMark, n),
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

// rootFull is told by a file of root r that a write there found no space (err, see RootFull),
// once the file was truncated back to size bytes: a root out of space leaves the rotation until
// it has room again, a read-only one for good. Files already there stay readable and writable.
func (m *Manager) rootFull(r int, err error, size int64) {
	free := m.freeSpace(r)
	if free >= 0 {
		free += size // the file's bytes will likely be freed by the caller's retry elsewhere
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.state == nil || m.state.failed[r] != nil:
	case outOfSpace(err):
		m.state.markFull(r, err, free)
	default:
		m.state.failed[r] = err
	}
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
	if s.remotePrefix != "" {
		if err := m.removeRemotePrefix(s.remotePrefix); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
