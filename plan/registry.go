// Package plan holds native plans. A plan is what one Spark task asks for: a handle that owns a
// lazy spill manager and, through it, every spill file the task's native operators create.
// Plans and their files are reached by 64-bit handles, the only thing the JVM holds.
package plan

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime/metrics"
	"sync"

	"github.com/spillway/spillway/plan/extsort"
	"github.com/spillway/spillway/spill"
)

// The Spark settings of the two limits; a refused write names the one it hit.
const (
	MaxTempDirectorySizeKey         = "spark.spillway.maxTempDirectorySize"
	MaxExecutorTempDirectorySizeKey = "spark.spillway.maxExecutorTempDirectorySize"
)

// Unlimited is an executor limit that never refuses a write.
const Unlimited = math.MaxInt64

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

// Registry holds the live plans and spill files of a process. It is safe for concurrent use,
// and creating or releasing a plan takes no lock shared by all plans.
type Registry struct {
	plans *handleTable[*Plan]
	files *handleTable[*fileEntry]
	sorts *handleTable[*sortEntry]
	dirs  *readMostlyTable[*spill.Roots] // registered local dirs; see RegisterLocalDirs
	fs    spill.FS

	// shared holds the executor-wide budget over all plans' files, and the counters.
	shared spill.Shared
}

// NewRegistry returns an empty registry whose plans use fsys, or the real filesystem if nil.
func NewRegistry(fsys spill.FS) *Registry {
	return &Registry{
		plans: newHandleTable[*Plan](),
		files: newHandleTable[*fileEntry](),
		sorts: newHandleTable[*sortEntry](),
		dirs:  newReadMostlyTable[*spill.Roots](),
		fs:    fsys,
	}
}

// Plan is one native plan.
type Plan struct {
	spill spill.Manager

	mu       sync.Mutex
	released bool
	files    map[uint64]struct{} // handles of live files; nil until the first one
	sorts    map[uint64]struct{} // handles of live sorts; nil until the first one
}

type fileEntry struct {
	plan *Plan
	file *spill.File
}

// CreatePlan registers a plan that may spill up to limit bytes under dirs, and no more than
// would take the bytes of all plans of the registry past executorLimit (Unlimited for none).
// Both limits are the plan's own, fixed now: a later plan created with other values never
// changes this one. It touches no filesystem: an unusable dir is found out at the plan's first
// spill file.
func (r *Registry) CreatePlan(dirs LocalDirs, limit, executorLimit int64) (uint64, error) {
	if dirs.roots == nil {
		return 0, &ArgumentError{Reason: "local dirs were not parsed; call ParseLocalDirs"}
	}
	p := new(Plan)
	err := p.spill.Init(spill.Config{
		Roots: dirs.roots, Limit: limit, LimitSetting: MaxTempDirectorySizeKey, FS: r.fs,
		Shared: &r.shared, SharedLimit: executorLimit, SharedLimitSetting: MaxExecutorTempDirectorySizeKey,
	})
	if err != nil {
		return 0, err
	}
	return r.plans.add(p), nil
}

// ReleasePlan closes the plan's sorts, deletes every file and dir the plan created and forgets
// the plan and its handles. A second release of the same handle fails with a *HandleError. If some file or dir
// could not be removed, the plan is still released and the error names what was left.
func (r *Registry) ReleasePlan(h uint64) error {
	p, ok := r.plans.take(h)
	if !ok {
		return &HandleError{What: "plan", Handle: h}
	}
	p.mu.Lock()
	p.released = true
	files, sorts := p.files, p.sorts
	p.files, p.sorts = nil, nil
	p.mu.Unlock()
	if files == nil && sorts == nil { // the usual plan: it never spilled
		return p.spill.Close()
	}
	for fh := range files {
		r.files.take(fh)
	}
	var errs []error
	for sh := range sorts {
		if e, ok := r.sorts.take(sh); ok {
			errs = append(errs, e.sorter.Close())
		}
	}
	errs = append(errs, p.spill.Close())
	return errors.Join(errs...)
}

// UsedDiskSpace is the number of bytes in the plan's live spill files.
func (r *Registry) UsedDiskSpace(h uint64) (int64, error) {
	p, ok := r.plans.get(h)
	if !ok {
		return 0, &HandleError{What: "plan", Handle: h}
	}
	return p.spill.Used(), nil
}

// CreateTmpFile creates a spill file for the plan and returns its handle. The plan's dir under
// the chosen root is created here if this is the first file to land there.
func (r *Registry) CreateTmpFile(h uint64) (uint64, error) {
	p, err := r.lockLive(h)
	if err != nil {
		return 0, err
	}
	defer p.mu.Unlock()
	f, err := p.spill.CreateFile()
	if err != nil {
		return 0, err
	}
	fh := r.files.add(&fileEntry{plan: p, file: f})
	if p.files == nil {
		p.files = make(map[uint64]struct{})
	}
	p.files[fh] = struct{}{}
	return fh, nil
}

// lockLive returns the plan h with its lock held, so that it cannot be released while the caller
// gives it something to own; the caller unlocks it.
func (r *Registry) lockLive(h uint64) (*Plan, error) {
	p, ok := r.plans.get(h)
	if ok {
		p.mu.Lock()
		if !p.released {
			return p, nil
		}
		p.mu.Unlock()
	}
	return nil, &HandleError{What: "plan", Handle: h}
}

func (r *Registry) file(fh uint64) (*spill.File, error) {
	e, ok := r.files.get(fh)
	if !ok {
		return nil, &HandleError{What: "spill file", Handle: fh}
	}
	return e.file, nil
}

// Path is the absolute path of a spill file.
func (r *Registry) Path(fh uint64) (string, error) {
	f, err := r.file(fh)
	if err != nil {
		return "", err
	}
	return f.Path(), nil
}

// Write appends p to a spill file, whole or not at all; see spill.File.Write.
func (r *Registry) Write(fh uint64, p []byte) error {
	f, err := r.file(fh)
	if err != nil {
		return err
	}
	_, err = f.Write(p)
	return err
}

// WriteFrom appends exactly n bytes read from r to a spill file, whole or not at all, copying
// through a bounded buffer; see spill.File.WriteFrom.
func (r *Registry) WriteFrom(fh uint64, src io.Reader, n int64) error {
	f, err := r.file(fh)
	if err != nil {
		return err
	}
	return f.WriteFrom(src, n)
}

// ReleaseTmpFile deletes a spill file and gives its bytes back to its plan.
func (r *Registry) ReleaseTmpFile(fh uint64) error {
	e, ok := r.files.take(fh)
	if !ok {
		return &HandleError{What: "spill file", Handle: fh}
	}
	e.plan.mu.Lock()
	delete(e.plan.files, fh)
	e.plan.mu.Unlock()
	if err := e.file.Release(); err != nil && !errors.Is(err, spill.ErrFileReleased) {
		return err
	}
	return nil
}

// Stats is a snapshot of what the registry's plans hold and have done.
type Stats struct {
	LivePlans     int64 // plans created and not yet released
	PlansSpilled  int64 // plans that created at least one spill file
	DirsCreated   int64 // plan dirs created
	FilesCreated  int64 // spill files created
	BytesWritten  int64 // bytes written to spill files
	LimitFailures int64 // writes refused by a plan's or the executor's limit
	FSErrors      int64 // filesystem calls that failed
	BytesInUse    int64 // bytes in the live spill files of all plans
	GoHeapBytes   int64 // bytes of live and not yet swept objects on the Go heap, outside the Java heap
}

// Stats counts on demand: live plans are counted by walking the handle shards, so creating and
// releasing a plan never touches a counter shared by all plans.
func (r *Registry) Stats() Stats {
	st := &r.shared.Stats
	return Stats{
		LivePlans:     int64(r.plans.len()),
		PlansSpilled:  st.PlansSpilled.Load(),
		DirsCreated:   st.DirsCreated.Load(),
		FilesCreated:  st.FilesCreated.Load(),
		BytesWritten:  st.BytesWritten.Load(),
		LimitFailures: st.LimitFailures.Load(),
		FSErrors:      st.FSErrors.Load(),
		BytesInUse:    r.shared.Used(),
		GoHeapBytes:   goHeapBytes(),
	}
}

// goHeapBytes reads the Go heap's size without stopping the world (runtime.ReadMemStats would).
func goHeapBytes() int64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	return int64(sample[0].Value.Uint64())
}

// LivePlans, LiveFiles and LiveSorts count what is registered, for leak checks.
func (r *Registry) LivePlans() int { return r.plans.len() }
func (r *Registry) LiveFiles() int { return r.files.len() }
func (r *Registry) LiveSorts() int { return r.sorts.len() }

// HandleError is a handle that names no live plan or file: released, never issued, or forged.
type HandleError struct {
	What   string // "plan", "spill file", "sort" or "local dirs registration"
	Handle uint64
}

func (e *HandleError) Error() string {
	return fmt.Sprintf("spillway: no live %s has handle %d: it was released already, or never issued", e.What, int64(e.Handle))
}

// ArgumentError is a bad argument from the caller; nothing was changed.
type ArgumentError struct {
	Reason string
}

func (e *ArgumentError) Error() string { return "spillway: " + e.Reason }

// ErrorKind sorts errors into the few kinds a caller reacts to differently.
type ErrorKind int

const (
	// KindIO is a filesystem failure; the error names the path and the OS cause.
	KindIO ErrorKind = iota
	// KindInvalidArgument is a bad argument or configuration; nothing was changed.
	KindInvalidArgument
	// KindInvalidHandle is an unknown, released or forged handle, or one used out of order.
	KindInvalidHandle
	// KindLimitExceeded is a write refused by the plan's spill limit; nothing was written.
	KindLimitExceeded
)

// Classify tells which kind err is.
func Classify(err error) ErrorKind {
	switch {
	case errors.As(err, new(*spill.LimitError)):
		return KindLimitExceeded
	case errors.As(err, new(*spill.ConfigError)), errors.As(err, new(*ArgumentError)),
		errors.As(err, new(*extsort.ConfigError)), errors.As(err, new(*extsort.BatchError)),
		errors.As(err, new(*extsort.RecordTooLargeError)):
		return KindInvalidArgument
	case errors.As(err, new(*HandleError)), errors.Is(err, spill.ErrClosed), errors.Is(err, spill.ErrFileReleased),
		errors.Is(err, extsort.ErrClosed), errors.Is(err, extsort.ErrAddAfterNext):
		return KindInvalidHandle
	}
	return KindIO
}
