package spill

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// OwnerLockName is the file inside every plan dir on which the owning process holds an
// exclusive flock while the plan lives. The kernel drops the lock when the process dies, however
// it dies, so a free lock is proof of an orphan: no pid to guess, no clock to trust.
const OwnerLockName = ".owner"

// SweepOrphans removes the plan dirs directly inside dir whose owner is dead: those whose owner
// lock it can take. It never touches a dir whose lock is held (a live plan, in this process or
// another), a plan dir without a lock file (one being created, or not ours), anything not named
// like a plan dir, or anything reached through a symlink; it never leaves dir. It returns the
// dirs it removed, and an error naming each one it could not.
func SweepOrphans(dir string) (removed []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var errs []error
	for _, e := range entries {
		// ReadDir reports a symlink as a symlink, never as what it points to.
		if !e.IsDir() || !strings.HasPrefix(e.Name(), DirPrefix) {
			continue
		}
		planDir := filepath.Join(dir, e.Name())
		gone, err := sweepPlanDir(planDir)
		if err != nil {
			errs = append(errs, err)
		}
		if gone {
			removed = append(removed, planDir)
		}
	}
	return removed, errors.Join(errs...)
}

// sweepPlanDir removes planDir if its owner lock is free, holding the lock meanwhile so that
// two sweepers never race on one dir.
func sweepPlanDir(planDir string) (bool, error) {
	lockPath := filepath.Join(planDir, OwnerLockName)
	f, err := os.OpenFile(lockPath, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
			return false, nil // no lock: not ours to judge
		}
		return false, err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil // the owner is alive
		}
		return false, &os.PathError{Op: "flock", Path: lockPath, Err: err}
	}
	// os.RemoveAll unlinks symlinks without following them and stays below planDir.
	if err := os.RemoveAll(planDir); err != nil {
		return false, fmt.Errorf("spill: removing orphaned plan dir: %w", err)
	}
	return true, nil
}
