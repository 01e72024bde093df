package spill

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// FS is the filesystem seam of the disk manager: the only operations it performs on disk. The
// production implementation is OSFS; tests wrap it (see FaultFS) to inject ENOSPC, EIO or ENOENT
// where real disks cannot be made to fail on demand. Every path is absolute.
type FS interface {
	// Mkdir creates one directory with mode perm (before umask). It fails if anything exists at
	// path, so it never adopts a directory, or a symlink, that someone else put there.
	Mkdir(path string, perm os.FileMode) error
	// CreateExclusive creates and opens a new regular file for reading and writing. It fails if
	// anything exists at path, a symlink included, so a planted link is never followed.
	CreateExclusive(path string, perm os.FileMode) (Handle, error)
	// Remove removes one file or one empty directory.
	Remove(path string) error
	// CreateLock creates a new file like CreateExclusive and holds an exclusive flock on it until
	// the returned Closer is closed or the process dies, whichever comes first.
	CreateLock(path string, perm os.FileMode) (io.Closer, error)
}

// Handle is an open spill file. Writes are positional so that a failed write can be undone by
// truncating without a file offset left past the end.
type Handle interface {
	WriteAt(p []byte, off int64) (int, error)
	ReadAt(p []byte, off int64) (int, error)
	Truncate(size int64) error
	Close() error
}

// OSFS is the real filesystem.
type OSFS struct{}

var _ FS = OSFS{}

func (OSFS) Mkdir(path string, perm os.FileMode) error { return os.Mkdir(path, perm) }

func (OSFS) CreateExclusive(path string, perm os.FileMode) (Handle, error) {
	// O_EXCL with O_CREAT already refuses an existing symlink; O_NOFOLLOW says so twice.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (OSFS) Remove(path string) error { return os.Remove(path) }

func (OSFS) CreateLock(path string, perm os.FileMode) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		_ = os.Remove(path)
		return nil, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	return f, nil
}

// removeIfExists removes path and treats "already gone" as success: a tmp cleaner may have been
// there first, and the goal — nothing left — holds either way.
func removeIfExists(fsys FS, path string) error {
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
