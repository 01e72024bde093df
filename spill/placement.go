package spill

import (
	"errors"
	"syscall"
	"time"

	"github.com/spillway/spillway/spill/chunkfile"
)

// Where a new file goes when local dirs fill up and empty again.
//
// Every CreateFile asks the filesystem of the root it is about to use how much is free (one
// statfs). A root with less than MinFreeSpace is passed over while another root has room, so a
// full disk is not handed a file whose first write would fail; when no root has room, the
// roomiest is tried all the same, since a small file may still fit.
//
// A write or create that finds no space (ENOSPC, EDQUOT) takes the root out of the rotation.
// It comes back as soon as its filesystem has MinFreeSpace more free than when it filled (the
// plan, or anyone, freed space there), or after FullRootRecheck in any case (quotas are not in
// statfs). The comparison counts the failed file's own bytes as free already, so a caller that
// releases the file and retries elsewhere does not bring the root straight back to fail again.
// A read-only root (EROFS) and one that is missing or unusable stay given up for the plan.

// MinFreeSpace is the free space below which a root is passed over for a new file while
// another root has room: one chunk of a framed file at the default chunk size.
const MinFreeSpace = chunkfile.DefaultChunkSize

// FullRootRecheck is how long a root that ran out of space stays out of the rotation when its
// free space, as statfs sees it, has not grown: a quota can fill while statfs shows room. A caller
// that writes its data again elsewhere after a full disk must bound its tries, as the dirs come
// back (the external sort tries each run at most once more per root).
const FullRootRecheck = time.Second

// fullMark says that a root ran out of space: why, when, and how much its filesystem had free
// then, counting the failed file's bytes as free (-1: unknown).
type fullMark struct {
	err  error
	at   time.Time
	free int64
}

// shortRoot is a root passed over for a new file because it had less than MinFreeSpace free.
type shortRoot struct {
	root int
	free int64
}

// outOfSpace reports whether err says the filesystem is full or over quota: a passing state,
// unlike a read-only one.
func outOfSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// freeSpace is root r's free space in bytes, or -1 if statfs fails: the space check is advice,
// so a failure to make it is no failure of the root (creating the file will tell).
func (m *Manager) freeSpace(r int) int64 {
	free, err := m.fs.FreeSpace(m.roots.Path(r))
	if err != nil {
		return -1
	}
	return free
}

// room says whether root r may take a file now and how much it has free (-1: unknown, taken as
// room). A root marked full comes back here once it has room again or its recheck is due.
func (m *Manager) room(s *spillState, r int) (free int64, ok bool) {
	if s.failed[r] != nil {
		return 0, false
	}
	free = m.freeSpace(r)
	if mark := s.full[r]; mark != nil {
		grew := free >= 0 && mark.free >= 0 && free >= mark.free+MinFreeSpace
		if !grew && time.Since(mark.at) < FullRootRecheck {
			return 0, false
		}
		s.full[r] = nil
	}
	if free < 0 {
		return MinFreeSpace, true
	}
	return free, true
}

// markFull takes root r out of the rotation until it has room again.
func (s *spillState) markFull(r int, err error, free int64) {
	s.full[r] = &fullMark{err: err, at: time.Now(), free: free}
}

// cause is why root r took no file, for a *NoUsableRootError.
func (s *spillState) cause(r int) error {
	if s.failed[r] != nil {
		return s.failed[r]
	}
	if s.full[r] != nil {
		return s.full[r].err
	}
	return nil
}
