package spill

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	// OpenDir opens the directory the caller has just made at path. Files are then created and
	// removed through it, by name: if path is later replaced (by a symlink, say), they still land
	// in the directory that was made, never where the replacement points.
	OpenDir(path string) (Dir, error)
	// CreateLock creates a file at path, failing if anything exists there, that is already
	// locked (an exclusive flock) when it appears: no other process can ever take the lock of a
	// new lock file. The lock is held until the Closer is closed or the process dies.
	CreateLock(path string, perm os.FileMode) (io.Closer, error)
	// Remove removes one file; a symlink is removed itself, never what it points to.
	Remove(path string) error
	// RemoveDir removes one empty directory; a symlink in its place is left, with an error.
	RemoveDir(path string) error
}

// Dir is an open directory in which files are created and removed by name (one path element).
type Dir interface {
	// CreateExclusive creates and opens a new regular file for reading and writing. It fails if
	// anything exists at name, a symlink included, so a planted link is never followed.
	CreateExclusive(name string, perm os.FileMode) (Handle, error)
	// Remove removes the file name.
	Remove(name string) error
	Close() error
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

func (OSFS) OpenDir(path string) (Dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return &osDir{fd: fd, path: path}, nil
}

func (OSFS) Remove(path string) error {
	if err := unix.Unlink(path); err != nil {
		return &os.PathError{Op: "remove", Path: path, Err: err}
	}
	return nil
}

func (OSFS) RemoveDir(path string) error {
	if err := unix.Rmdir(path); err != nil { // rmdir never follows a symlink: ENOTDIR
		return &os.PathError{Op: "rmdir", Path: path, Err: err}
	}
	return nil
}

func (OSFS) CreateLock(path string, perm os.FileMode) (io.Closer, error) {
	// The inode is made unnamed (O_TMPFILE), locked, then linked into place: between an
	// open-then-flock of a named file, a sweep could take the lock and judge the file orphaned.
	fd, err := unix.Open(filepath.Dir(path), unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, uint32(perm.Perm()))
	switch {
	case err == nil:
		f := os.NewFile(uintptr(fd), path)
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			return nil, &os.PathError{Op: "flock", Path: path, Err: err}
		}
		// linkat fails with EEXIST rather than replace anything at path.
		err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
		if err == nil {
			return f, nil
		}
		f.Close()
		if !errors.Is(err, unix.ENOENT) || !noProc() {
			return nil, &os.PathError{Op: "link", Path: path, Err: err}
		}
	case !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL):
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return createLockByRename(path, perm)
}

// createLockByRename serves filesystems without O_TMPFILE, or a process without /proc: the lock
// file is made under a name sweeps ignore, locked, then renamed into place without replacing.
func createLockByRename(path string, perm os.FileMode) (io.Closer, error) {
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_RDONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		_ = os.Remove(tmp)
		return nil, &os.PathError{Op: "flock", Path: tmp, Err: err}
	}
	err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) { // no RENAME_NOREPLACE here
		if err = unix.Link(tmp, path); err == nil {
			err = unix.Unlink(tmp)
		}
	}
	if err != nil {
		f.Close()
		_ = os.Remove(tmp)
		return nil, &os.PathError{Op: "rename", Path: path, Err: err}
	}
	return f, nil
}

func noProc() bool {
	_, err := os.Stat("/proc/self/fd")
	return err != nil
}

// osDir is a directory held open by descriptor; names are resolved relative to it.
type osDir struct {
	fd   int
	path string
}

func (d *osDir) CreateExclusive(name string, perm os.FileMode) (Handle, error) {
	path := filepath.Join(d.path, name)
	if strings.ContainsRune(name, '/') {
		return nil, &os.PathError{Op: "open", Path: path, Err: unix.EINVAL}
	}
	// O_EXCL with O_CREAT already refuses an existing symlink; O_NOFOLLOW says so twice.
	fd, err := unix.Openat(d.fd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

func (d *osDir) Remove(name string) error {
	if err := unix.Unlinkat(d.fd, name, 0); err != nil {
		return &os.PathError{Op: "remove", Path: filepath.Join(d.path, name), Err: err}
	}
	return nil
}

func (d *osDir) Close() error { return unix.Close(d.fd) }

// ignoreNotExist treats "already gone" as success: a tmp cleaner may have been there first,
// and the goal — nothing left — holds either way.
func ignoreNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
