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

// Every plan dir has an owner lock file beside it, .spillway-<random>.owner for spillway-<random>,
// on which the owning process holds an exclusive flock while the plan lives. The kernel drops the
// lock however the process dies, so a free lock proves an orphan: no pid to guess, no clock to
// trust. The lock file is created before its dir and removed after it, so a dir never exists
// unowned.
const ownerLockSuffix = ".owner"

func ownerLockName(planDirName string) string { return "." + planDirName + ownerLockSuffix }

// SweepOrphans removes the plan dirs directly inside dir whose owner lock it can take: those of
// processes that died without closing their managers, and those a Close could not remove. It
// never touches a plan dir whose lock is held (a live plan, in this process or another) or that
// has no lock file, nor anything reached through a symlink, and it never leaves dir. It returns
// the plan dirs it removed, and an error naming each one it could not.
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
		name := e.Name()
		planName, ok := strings.CutSuffix(strings.TrimPrefix(name, "."), ownerLockSuffix)
		// ReadDir reports a symlink as a symlink, never as what it points to.
		if !e.Type().IsRegular() || !strings.HasPrefix(name, "."+DirPrefix) || !ok {
			continue
		}
		planDir := filepath.Join(dir, planName)
		gone, err := sweepPlanDir(planDir, filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, err)
		}
		if gone {
			removed = append(removed, planDir)
		}
	}
	return removed, errors.Join(errs...)
}

// sweepPlanDir removes planDir and then its lock file if the lock is free, holding the lock
// meanwhile so that two sweepers never race on one dir. It reports whether a dir was removed.
func sweepPlanDir(planDir, lockPath string) (bool, error) {
	f, err := os.OpenFile(lockPath, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
			return false, nil // gone meanwhile, or swapped for a symlink: not ours to judge
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
	info, err := os.Lstat(planDir)
	existed := err == nil
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, err
	case existed && !info.IsDir():
		return false, nil // a symlink or a file wearing the name: leave it, and its lock
	case existed:
		// os.RemoveAll unlinks symlinks inside without following them and stays below planDir.
		if err := os.RemoveAll(planDir); err != nil {
			return false, fmt.Errorf("spill: removing orphaned plan dir: %w", err)
		}
	}
	if err := os.Remove(lockPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return existed, err
	}
	return existed, nil
}
