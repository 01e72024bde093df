package spill

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// FS is the filesystem seam of the disk manager and of the orphan sweep: every operation they
// perform on disk goes through it. The production implementation is OSFS; tests wrap it (see the
// spill/errorfs package) to inject faults the way the OS reports them.
//
// The seam is descriptor-based, like os.Root: a root is opened once, and everything below it is
// made, checked and removed by name relative to the open directory. Replacing a path later (a
// symlink swapped in for a plan dir, a root's symlink retargeted) never redirects an operation.
type FS interface {
	// OpenRoot opens the directory at path (absolute), following symlinks on the way: a local
	// dir may be given as a symlink. What it resolved to then stays fixed for the Dir's life.
	OpenRoot(path string) (Dir, error)
	// FreeSpace is the number of bytes an unprivileged writer may still put on the filesystem
	// holding the directory at path (statfs: available blocks × block size). It is advice for
	// placing a file, not a promise: other writers race it, and quotas are not in it.
	FreeSpace(path string) (int64, error)
}

// Dir is an open directory. Every name is one path element, resolved relative to the directory
// and never through a symlink in its last element.
type Dir interface {
	// Path is the path the directory was opened by, for errors.
	Path() string
	// Mkdir creates the directory name with mode perm (before umask). It fails if anything exists
	// there, so it never adopts a directory, or a symlink, that someone else put there.
	Mkdir(name string, perm os.FileMode) error
	// OpenDir opens the directory name, refusing a symlink.
	OpenDir(name string) (Dir, error)
	// CreateLock creates the file name, failing if anything exists there, already locked (an
	// exclusive flock) when it appears: no other process can ever take the lock of a new lock
	// file. The lock is held until the Lock is closed or the process dies.
	CreateLock(name string, perm os.FileMode) (Lock, error)
	// TryLock opens the existing regular file name, refusing a symlink, and takes its exclusive
	// flock without waiting; an error wrapping unix.EWOULDBLOCK means another holder has it.
	TryLock(name string) (Lock, error)
	// CreateExclusive creates and opens a new regular file for reading and writing. It fails if
	// anything exists at name, a symlink included, so a planted link is never followed.
	CreateExclusive(name string, perm os.FileMode) (Handle, error)
	// Remove removes the non-directory name; a symlink is removed itself, never its target.
	Remove(name string) error
	// RemoveDir removes the empty directory name; a symlink there is left, with an error.
	RemoveDir(name string) error
	// StatAt describes what is at name, without following a symlink.
	StatAt(name string) (FileID, error)
	// Stat describes the open directory itself, wherever it now is.
	Stat() (FileID, error)
	// ReadDir lists the directory's entries, reporting a symlink as a symlink.
	ReadDir() ([]fs.DirEntry, error)
	Close() error
}

// Lock is an open, flocked lock file.
type Lock interface {
	// Stat describes the locked file, wherever it now is.
	Stat() (FileID, error)
	// Close drops the lock.
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

// FileID identifies a file and tells what kind it is and whether it still has a name.
type FileID struct {
	Dev, Ino uint64
	Nlink    uint64      // 0 once the file (or directory) was deleted
	Type     fs.FileMode // fs.ModeDir, fs.ModeSymlink, 0 for a regular file, fs.ModeIrregular else
}

// SameFile reports whether a and b are the same inode.
func (a FileID) SameFile(b FileID) bool { return a.Dev == b.Dev && a.Ino == b.Ino }

func fileIDOf(st *unix.Stat_t) FileID {
	id := FileID{Dev: st.Dev, Ino: st.Ino, Nlink: uint64(st.Nlink)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		id.Type = fs.ModeDir
	case unix.S_IFLNK:
		id.Type = fs.ModeSymlink
	case unix.S_IFREG:
	default:
		id.Type = fs.ModeIrregular
	}
	return id
}

// OSFS is the real filesystem.
type OSFS struct{}

var _ FS = OSFS{}

func (OSFS) OpenRoot(path string) (Dir, error) {
	fd, err := openRetry(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return &osDir{fd: fd, path: path}, nil
}

func (OSFS) FreeSpace(path string) (int64, error) {
	var st unix.Statfs_t
	for {
		err := unix.Statfs(path, &st)
		if err == nil {
			return int64(st.Bavail) * st.Bsize, nil
		}
		if err != unix.EINTR {
			return 0, &os.PathError{Op: "statfs", Path: path, Err: err}
		}
	}
}

// openRetry is openat, retried on EINTR as the os package does.
func openRetry(dirfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// osDir is a directory held open by descriptor; names are resolved relative to it.
type osDir struct {
	fd   int
	path string
}

func (d *osDir) Path() string { return d.path }

func (d *osDir) pathErr(op, name string, err error) error {
	return &os.PathError{Op: op, Path: filepath.Join(d.path, name), Err: err}
}

// checkName refuses a name that is not one path element: it would leave the directory.
func (d *osDir) checkName(op, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return d.pathErr(op, name, unix.EINVAL)
	}
	return nil
}

func (d *osDir) Mkdir(name string, perm os.FileMode) error {
	if err := d.checkName("mkdir", name); err != nil {
		return err
	}
	if err := unix.Mkdirat(d.fd, name, uint32(perm.Perm())); err != nil {
		return d.pathErr("mkdir", name, err)
	}
	return nil
}

func (d *osDir) OpenDir(name string) (Dir, error) {
	if err := d.checkName("open", name); err != nil {
		return nil, err
	}
	fd, err := openRetry(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, d.pathErr("open", name, err)
	}
	return &osDir{fd: fd, path: filepath.Join(d.path, name)}, nil
}

func (d *osDir) CreateLock(name string, perm os.FileMode) (Lock, error) {
	if err := d.checkName("open", name); err != nil {
		return nil, err
	}
	// The inode is made unnamed (O_TMPFILE), locked, then linked into place: between an
	// open-then-flock of a named file, a sweep could take the lock and judge the file orphaned.
	fd, err := openRetry(d.fd, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, uint32(perm.Perm()))
	switch {
	case err == nil:
		f := os.NewFile(uintptr(fd), filepath.Join(d.path, name))
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			return nil, d.pathErr("flock", name, err)
		}
		// linkat fails with EEXIST rather than replace anything at name.
		err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), d.fd, name, unix.AT_SYMLINK_FOLLOW)
		if err == nil {
			return osLock{f}, nil
		}
		f.Close()
		if !errors.Is(err, unix.ENOENT) || !noProc() {
			return nil, d.pathErr("link", name, err)
		}
	case !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL):
		return nil, d.pathErr("open", name, err)
	}
	return d.createLockByRename(name, perm)
}

// createLockByRename serves filesystems without O_TMPFILE, or a process without /proc: the lock
// file is made under a name sweeps ignore, locked, then renamed into place without replacing.
func (d *osDir) createLockByRename(name string, perm os.FileMode) (Lock, error) {
	tmp := name + ".new"
	fd, err := openRetry(d.fd, tmp, unix.O_RDONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, d.pathErr("open", tmp, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.path, name))
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		_ = unix.Unlinkat(d.fd, tmp, 0)
		return nil, d.pathErr("flock", tmp, err)
	}
	err = unix.Renameat2(d.fd, tmp, d.fd, name, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) { // no RENAME_NOREPLACE here
		if err = unix.Linkat(d.fd, tmp, d.fd, name, 0); err == nil {
			err = unix.Unlinkat(d.fd, tmp, 0)
		}
	}
	if err != nil {
		f.Close()
		_ = unix.Unlinkat(d.fd, tmp, 0)
		return nil, d.pathErr("rename", name, err)
	}
	return osLock{f}, nil
}

func noProc() bool {
	_, err := os.Stat("/proc/self/fd")
	return err != nil
}

func (d *osDir) TryLock(name string) (Lock, error) {
	if err := d.checkName("open", name); err != nil {
		return nil, err
	}
	fd, err := openRetry(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, d.pathErr("open", name, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.path, name))
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, d.pathErr("flock", name, err)
	}
	return osLock{f}, nil
}

func (d *osDir) CreateExclusive(name string, perm os.FileMode) (Handle, error) {
	if err := d.checkName("open", name); err != nil {
		return nil, err
	}
	// O_EXCL with O_CREAT already refuses an existing symlink; O_NOFOLLOW says so twice.
	fd, err := openRetry(d.fd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, d.pathErr("open", name, err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(d.path, name)), nil
}

func (d *osDir) Remove(name string) error {
	if err := d.checkName("remove", name); err != nil {
		return err
	}
	if err := unix.Unlinkat(d.fd, name, 0); err != nil {
		return d.pathErr("remove", name, err)
	}
	return nil
}

func (d *osDir) RemoveDir(name string) error {
	if err := d.checkName("rmdir", name); err != nil {
		return err
	}
	// unlinkat(AT_REMOVEDIR) never follows a symlink: ENOTDIR.
	if err := unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR); err != nil {
		return d.pathErr("rmdir", name, err)
	}
	return nil
}

func (d *osDir) StatAt(name string) (FileID, error) {
	if err := d.checkName("lstat", name); err != nil {
		return FileID{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return FileID{}, d.pathErr("lstat", name, err)
	}
	return fileIDOf(&st), nil
}

func (d *osDir) Stat() (FileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return FileID{}, &os.PathError{Op: "fstat", Path: d.path, Err: err}
	}
	return fileIDOf(&st), nil
}

func (d *osDir) ReadDir() ([]fs.DirEntry, error) {
	// A descriptor of its own, so that its read offset starts at the beginning every time.
	fd, err := openRetry(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: d.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	return f.ReadDir(-1)
}

func (d *osDir) Close() error { return unix.Close(d.fd) }

// osLock is a locked lock file.
type osLock struct{ f *os.File }

func (l osLock) Stat() (FileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(l.f.Fd()), &st); err != nil {
		return FileID{}, &os.PathError{Op: "fstat", Path: l.f.Name(), Err: err}
	}
	return fileIDOf(&st), nil
}

func (l osLock) Close() error { return l.f.Close() }

// ignoreNotExist treats "already gone" as success: a tmp cleaner may have been there first,
// and the goal — nothing left — holds either way.
func ignoreNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
