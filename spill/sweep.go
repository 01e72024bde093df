package spill

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

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
	return SweepOrphansFS(OSFS{}, dir)
}

// SweepOrphansFS is SweepOrphans through the filesystem seam fsys.
func SweepOrphansFS(fsys FS, dir string) (removed []string, err error) {
	root, err := fsys.OpenRoot(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	defer root.Close()
	entries, err := root.ReadDir()
	if err != nil {
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
		gone, err := sweepPlanDir(root, planName, name)
		if err != nil {
			errs = append(errs, err)
		}
		if gone {
			removed = append(removed, filepath.Join(root.Path(), planName))
		}
	}
	return removed, errors.Join(errs...)
}

// sweepPlanDir removes the plan dir planName in root and then its lock file lockName if the lock
// is free, holding the lock meanwhile so that two sweepers never race on one dir. It reports
// whether a dir was removed.
func sweepPlanDir(root Dir, planName, lockName string) (bool, error) {
	lock, err := root.TryLock(lockName)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ELOOP):
			return false, nil // gone meanwhile, or swapped for a symlink: not ours to judge
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil // the owner is alive
		}
		return false, err
	}
	defer lock.Close()
	info, err := root.StatAt(planName)
	existed := err == nil
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, err
	case existed && info.Type != fs.ModeDir:
		return false, nil // a symlink or a file wearing the name: leave it, and its lock
	case existed:
		if err := removeAll(root, planName); err != nil {
			return false, fmt.Errorf("spill: removing orphaned plan dir: %w", err)
		}
	}
	if err := ignoreNotExist(root.Remove(lockName)); err != nil {
		return existed, err
	}
	return existed, nil
}

// removeAll removes the directory name in d and everything in it, through descriptors: a symlink
// inside is unlinked, never followed, and nothing outside name is reached.
func removeAll(d Dir, name string) error {
	sub, err := d.OpenDir(name)
	if err != nil {
		return ignoreNotExist(err)
	}
	entries, err := sub.ReadDir()
	if err != nil {
		_ = sub.Close()
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			err = removeAll(sub, e.Name())
		} else {
			err = ignoreNotExist(sub.Remove(e.Name()))
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	_ = sub.Close()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return ignoreNotExist(d.RemoveDir(name))
}
