package spill

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// Op names a filesystem operation of the disk manager, for fault injection.
type Op uint8

const (
	OpMkdir Op = iota
	OpCreate
	OpWrite
	OpRemove
)

func (o Op) String() string {
	switch o {
	case OpMkdir:
		return "mkdir"
	case OpCreate:
		return "create"
	case OpWrite:
		return "write"
	case OpRemove:
		return "remove"
	}
	return "op?"
}

// FaultFS wraps an FS and fails the operations that Inject picks, the way a full, failing or
// vanished disk would. It exists for tests: real disks cannot be made to fail on demand.
type FaultFS struct {
	FS FS
	// Inject is asked before every operation with its path (the file's path for OpWrite); a
	// non-zero errno fails the operation with an *os.PathError carrying it. A failed write first
	// writes half of the data, as a real short write on a filling disk does; a remove failed with
	// ENOENT removes first, as a cleaner racing with it would. Inject may be called from many
	// goroutines at once.
	Inject func(op Op, path string) syscall.Errno
}

var _ FS = (*FaultFS)(nil)

func (f *FaultFS) fault(op Op, path string) error {
	if f.Inject == nil {
		return nil
	}
	if errno := f.Inject(op, path); errno != 0 {
		return &os.PathError{Op: op.String(), Path: path, Err: errno}
	}
	return nil
}

func (f *FaultFS) Mkdir(path string, perm os.FileMode) error {
	if err := f.fault(OpMkdir, path); err != nil {
		return err
	}
	return f.FS.Mkdir(path, perm)
}

// OpenDir is part of making a plan dir, so it fails as OpMkdir.
func (f *FaultFS) OpenDir(path string) (Dir, error) {
	if err := f.fault(OpMkdir, path); err != nil {
		return nil, err
	}
	d, err := f.FS.OpenDir(path)
	if err != nil {
		return nil, err
	}
	return &faultDir{Dir: d, fs: f, path: path}, nil
}

func (f *FaultFS) CreateLock(path string, perm os.FileMode) (io.Closer, error) {
	if err := f.fault(OpCreate, path); err != nil {
		return nil, err
	}
	return f.FS.CreateLock(path, perm)
}

func (f *FaultFS) Remove(path string) error {
	return f.remove(path, func() error { return f.FS.Remove(path) })
}

func (f *FaultFS) RemoveDir(path string) error {
	return f.remove(path, func() error { return f.FS.RemoveDir(path) })
}

func (f *FaultFS) remove(path string, remove func() error) error {
	if err := f.fault(OpRemove, path); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			// An unlink reports ENOENT only when the file is gone: model a cleaner that got
			// there first, not a file that stays while the call says it is absent.
			if rmErr := remove(); rmErr != nil {
				return rmErr
			}
		}
		return err
	}
	return remove()
}

type faultDir struct {
	Dir
	fs   *FaultFS
	path string
}

func (d *faultDir) CreateExclusive(name string, perm os.FileMode) (Handle, error) {
	path := filepath.Join(d.path, name)
	if err := d.fs.fault(OpCreate, path); err != nil {
		return nil, err
	}
	h, err := d.Dir.CreateExclusive(name, perm)
	if err != nil {
		return nil, err
	}
	return &faultHandle{Handle: h, fs: d.fs, path: path}, nil
}

func (d *faultDir) Remove(name string) error {
	return d.fs.remove(filepath.Join(d.path, name), func() error { return d.Dir.Remove(name) })
}

type faultHandle struct {
	Handle
	fs   *FaultFS
	path string
}

func (h *faultHandle) WriteAt(p []byte, off int64) (int, error) {
	if err := h.fs.fault(OpWrite, h.path); err != nil {
		n, _ := h.Handle.WriteAt(p[:len(p)/2], off)
		return n, err
	}
	return h.Handle.WriteAt(p, off)
}
