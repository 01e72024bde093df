// Package plan holds native plans. A plan is what one Spark task asks for: a handle that owns a
// lazy spill manager and, through it, every spill file the task's native operators create.
// Plans and their files are reached by 64-bit handles, the only thing the JVM holds.
package plan

import (
	"errors"
	"io"
	"math"
	"sync"
	"sync/atomic"

	"github.com/spillway/spillway/spill"
)

// The Spark settings of the two limits; a refused write names the one it hit.
const (
	MaxTempDirectorySizeKey         = "spark.spillway.maxTempDirectorySize"
	MaxExecutorTempDirectorySizeKey = "spark.spillway.maxExecutorTempDirectorySize"
)

// Unlimited is an executor limit that never refuses a write.
const Unlimited = math.MaxInt64

// Registry holds the live plans and spill files of a process. It is safe for concurrent use,
// and creating or releasing a plan takes no lock shared by all plans.
type Registry struct {
	plans *handleTable[*Plan]
	files *handleTable[*fileEntry]
	sorts *handleTable[*sortEntry]
	dirs  *readMostlyTable[*spill.Roots] // registered local dirs; see RegisterLocalDirs
	// dirSets remembers the dir sets of CreatePlanForDirs by content; see there.
	dirSets dirSetCache
	fs      spill.FS

	readers *handleTable[*readerEntry]
	// format is the file format new plans take (ConfigureFormat); nil for the zero Format.
	format atomic.Pointer[spill.Format]

	// remote is the object store behind the local dirs of new plans (ConfigureRemote); nil for
	// none.
	remote atomic.Pointer[spill.Remote]

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

		readers: newHandleTable[*readerEntry](),
	}
}

// Plan is one native plan.
type Plan struct {
	spill spill.Manager

	mu       sync.Mutex
	released bool
	owned    *owned // nil until the plan owns a file or a sort: a plan that never spills is small
}

// owned is what a plan owns by handle, released with it.
type owned struct {
	files   map[uint64]struct{} // handles of live files
	sorts   map[uint64]struct{} // handles of live sorts
	readers map[uint64]struct{} // handles of open readers
}

// own returns what p owns, made on first use; p.mu must be held.
func (p *Plan) own() *owned {
	if p.owned == nil {
		p.owned = &owned{files: map[uint64]struct{}{}, sorts: map[uint64]struct{}{}, readers: map[uint64]struct{}{}}
	}
	return p.owned
}

// disown forgets handle h of p's files, sorts or readers (pick with the func).
func (p *Plan) disown(which func(*owned) map[uint64]struct{}, h uint64) {
	p.mu.Lock()
	if p.owned != nil {
		delete(which(p.owned), h)
	}
	p.mu.Unlock()
}

type fileEntry struct {
	plan *Plan
	file *spill.File

	// writer frames the file's writes; nil for a raw file (CreateTmpFile). A spill.Writer is
	// not safe for concurrent use: mu serializes the calls made through the registry.
	mu     sync.Mutex
	writer *spill.Writer
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
	cfg := spill.Config{
		Roots: dirs.roots, Limit: limit, LimitSetting: MaxTempDirectorySizeKey, FS: r.fs,
		Shared: &r.shared, SharedLimit: executorLimit, SharedLimitSetting: MaxExecutorTempDirectorySizeKey,
	}
	// The plan keeps the format of now: ConfigureFormat stores a new one, never changes it.
	cfg.Format = r.format.Load()
	cfg.Remote = r.remote.Load()
	err := p.spill.Init(cfg)
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
	o := p.owned
	p.owned = nil
	p.mu.Unlock()
	if o == nil { // the usual plan: it never spilled
		return p.spill.Close()
	}
	for fh := range o.files {
		r.files.take(fh)
	}
	for rh := range o.readers {
		if e, ok := r.readers.take(rh); ok {
			e.close()
		}
	}
	var errs []error
	for sh := range o.sorts {
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
	p.own().files[fh] = struct{}{}
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
		return nil, &HandleError{What: "file", Handle: fh}
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

// Write appends p to a spill file: to a raw file whole or not at all (spill.File.Write); to a
// framed file through its Writer (spill.Writer.Write), which appends whole chunks and, once one
// fails, takes no more writes.
func (r *Registry) Write(fh uint64, p []byte) error {
	e, ok := r.files.get(fh)
	if !ok {
		return &HandleError{What: "file", Handle: fh}
	}
	if e.framed() {
		return e.writeFramed(func(w *spill.Writer) error {
			_, err := w.Write(p)
			return err
		})
	}
	_, err := e.file.Write(p)
	return err
}

// WriteFrom appends exactly n bytes read from r to a spill file, copying through a bounded
// buffer: to a raw file whole or not at all (spill.File.WriteFrom), to a framed file as Write.
func (r *Registry) WriteFrom(fh uint64, src io.Reader, n int64) error {
	e, ok := r.files.get(fh)
	if !ok {
		return &HandleError{What: "file", Handle: fh}
	}
	if e.framed() {
		return e.writeFramed(func(w *spill.Writer) error {
			_, err := io.CopyBuffer(w, io.LimitReader(src, n), make([]byte, min(n, 1<<20)))
			return err
		})
	}
	return e.file.WriteFrom(src, n)
}

// ReleaseTmpFile deletes a tmp file (CreateTmpFile) and gives its bytes back to its plan; a spill
// file's handle is refused (ErrSpillFile) and stays live.
func (r *Registry) ReleaseTmpFile(fh uint64) error { return r.releaseFile(fh, false) }

// ReleaseSpillFile deletes a spill file (CreateSpillFile) and gives its bytes back to its plan; a
// tmp file's handle is refused (ErrTmpFile) and stays live.
func (r *Registry) ReleaseSpillFile(fh uint64) error { return r.releaseFile(fh, true) }

func (r *Registry) releaseFile(fh uint64, spillFile bool) error {
	what, wrongKind := "tmp file", ErrSpillFile
	if spillFile {
		what, wrongKind = "spill file", ErrTmpFile
	}
	if e, ok := r.files.get(fh); ok && e.framed() != spillFile {
		return wrongKind
	}
	e, ok := r.files.take(fh)
	if !ok {
		return &HandleError{What: what, Handle: fh}
	}
	e.plan.disown(func(o *owned) map[uint64]struct{} { return o.files }, fh)
	if err := e.file.Release(); err != nil && !errors.Is(err, spill.ErrFileReleased) {
		return err
	}
	return nil
}

// LivePlans, LiveFiles and LiveSorts count what is registered, for leak checks.
func (r *Registry) LivePlans() int { return r.plans.len() }
func (r *Registry) LiveFiles() int { return r.files.len() }
func (r *Registry) LiveSorts() int { return r.sorts.len() }
