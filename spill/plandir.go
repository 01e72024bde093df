package spill

import (
	crand "crypto/rand"
	"errors"
	"io/fs"
	"path/filepath"
)

// planDir is a plan dir, held open so that its files are made and removed through it, and its
// owner lock file beside it, locked while the manager lives: a sweep by another process (see
// SweepOrphans) removes the dir only once the lock is free, that is once this process has died
// without closing the manager.
type planDir struct {
	rootIndex int
	root      Dir // the root, opened when the dir was made: everything below is done through it
	name      string
	path      string
	dir       Dir // nil if it could not be opened
	lockName  string
	lock      Lock // nil once closed
}

// makeDir makes root r's plan dir, its owner lock first: a plan dir never exists unowned, so a
// sweep can leave alone every dir without a lock file. The root is opened here, following a
// symlink if it is one, and held with the dir: retargeting the root's symlink later changes
// nothing for this dir.
func (m *Manager) makeDir(s *spillState, r int) error {
	root, err := m.fs.OpenRoot(m.roots.Path(r))
	if err != nil {
		return err
	}
	name := DirPrefix + crand.Text()
	lockName := ownerLockName(name)
	lock, err := root.CreateLock(lockName, fileMode)
	if err != nil {
		_ = root.Close()
		return err
	}
	d := &planDir{rootIndex: r, root: root, name: name, path: filepath.Join(root.Path(), name), lockName: lockName, lock: lock}
	if err := root.Mkdir(name, dirMode); err != nil {
		if ignoreNotExist(root.Remove(lockName)) != nil {
			s.strays = append(s.strays, d) // Close tries again
		} else {
			_ = root.Close()
		}
		_ = lock.Close()
		d.lock = nil
		return err
	}
	m.stats().DirsCreated.Add(1)
	if d.dir, err = root.OpenDir(name); err != nil {
		// Undo at once rather than at Close: out of descriptors, say, holding the root and the
		// lock until then would starve every later try.
		if m.tryRemovePlanDir(d) != nil {
			s.made = append(s.made, d) // Close tries again, and names it if it fails
		} else {
			d.closeAll()
		}
		return err
	}
	s.made = append(s.made, d)
	s.current[r] = d
	return nil
}

func (m *Manager) createFileIn(d *planDir) (*File, error) {
	name := "spill-" + crand.Text()
	h, err := d.dir.CreateExclusive(name, fileMode)
	if err != nil {
		return nil, err
	}
	return &File{m: m, dir: d, name: name, path: filepath.Join(d.path, name), h: h}, nil
}

// ErrPlanDirMoved is reported, for a plan dir's path, by a Close that found something else at
// that path while the dir the plan made still exists elsewhere (someone renamed it away, and
// perhaps put a symlink in its place). Close empties that dir through its descriptor but cannot
// remove it without its name, and leaves whatever is at the path alone.
var ErrPlanDirMoved = errors.New("the plan dir was moved away or replaced; the dir the plan made was emptied but is left wherever it was moved to, and what is now at this path was not touched")

// removePlanDir removes d, once its files are gone, if the entry at its name in the root it was
// made in is still that very dir, and then its lock file. The dir and the lock are compared by
// inode with the descriptors the plan holds: a symlink or another dir swapped in under the name is
// never removed nor followed. Everything d holds open is closed.
func (m *Manager) removePlanDir(d *planDir) error {
	defer d.closeAll()
	return m.tryRemovePlanDir(d)
}

// closeAll closes what d holds open.
func (d *planDir) closeAll() {
	if d.dir != nil {
		_ = d.dir.Close()
	}
	if d.lock != nil {
		_ = d.lock.Close()
	}
	_ = d.root.Close()
}

// tryRemovePlanDir is removePlanDir without the closing.
func (m *Manager) tryRemovePlanDir(d *planDir) error {
	if d.dir == nil {
		// Never opened, so never written to: rmdir, which removes only an empty directory and
		// never a symlink, is all there is to do.
		err := ignoreNotExist(d.root.RemoveDir(d.name))
		if err != nil {
			return m.fsError(err) // the dir stays owned by its lock file, for a sweep
		}
		return m.removeLock(d)
	}
	ours, err := d.dir.Stat()
	if err != nil {
		return m.fsError(err)
	}
	there, err := d.root.StatAt(d.name)
	switch {
	case err == nil && there.SameFile(ours):
		if err := ignoreNotExist(d.root.RemoveDir(d.name)); err != nil {
			// Something the plan did not create is inside (it stays, as does the lock file, so
			// a sweep removes the dir once the lock is free), or the disk failed.
			return m.fsError(err)
		}
		return m.removeLock(d)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return m.fsError(err) // cannot tell what is there: touch nothing, keep the dir owned
	}
	// Something else is at the name, or nothing. The lock guards the dir at that name, which
	// is not ours: it goes.
	lockErr := m.removeLock(d)
	if ours.Nlink == 0 {
		return lockErr // deleted behind our back (a tmp cleaner): nothing of ours is left
	}
	return errors.Join(&fs.PathError{Op: "rmdir", Path: d.path, Err: ErrPlanDirMoved}, lockErr)
}

// removeLock removes d's lock file if the entry at its name is still the file the plan locked.
func (m *Manager) removeLock(d *planDir) error {
	ours, err := d.lock.Stat()
	if err != nil {
		return m.fsError(err)
	}
	there, err := d.root.StatAt(d.lockName)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return m.fsError(err)
	case !there.SameFile(ours):
		return &fs.PathError{Op: "remove", Path: filepath.Join(d.root.Path(), d.lockName), Err: ErrLockReplaced}
	}
	if err := ignoreNotExist(d.root.Remove(d.lockName)); err != nil {
		return m.fsError(err)
	}
	return nil
}

// ErrLockReplaced is reported, for a lock file's path, by a Close that found another file there
// than the one its plan created and locked; that file is left alone.
var ErrLockReplaced = errors.New("the plan's owner lock file was replaced by another file, which was left alone")
