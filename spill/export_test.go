package spill

// Internals the external tests (package spill_test, which may import spill/errorfs) need.

const (
	OwnerLockSuffix = ownerLockSuffix
	FileMode        = fileMode
	DirMode         = dirMode
)

var OwnerLockName = ownerLockName

// CreateLockByRename makes a lock file in d the way filesystems without O_TMPFILE do.
func CreateLockByRename(d Dir, name string) (Lock, error) {
	return d.(*osDir).createLockByRename(name, fileMode)
}

// RemotePartSent waits until the part a remote file sends in the background, if any, is sent
// (or failed), and leaves its outcome to the file's next write.
func RemotePartSent(f *File) {
	f.mu.Lock()
	ps := f.obj.inFlight
	f.mu.Unlock()
	if ps != nil {
		<-ps.done
	}
}
