package spill

import (
	"sync/atomic"
)

// Shared is what the managers of one process (a Spark executor) share: a budget over the bytes
// in all their live files, and counters. The zero value is ready to use.
type Shared struct {
	used  atomic.Int64
	Stats Stats
}

// Used is the number of bytes in the live files of all managers sharing s.
func (s *Shared) Used() int64 { return s.used.Load() }

// Stats counts what managers did. Every field is updated atomically and may be read at any time.
type Stats struct {
	PlansSpilled atomic.Int64 // managers that created at least one file
	DirsCreated  atomic.Int64 // plan dirs created, healed ones included
	FilesCreated atomic.Int64 // spill files created
	BytesWritten atomic.Int64 // bytes written to spill files: on disk, framing included
	// LogicalBytesWritten counts the plain bytes written through framed files' Writers, as
	// appended in whole chunks (their on-disk bytes are in BytesWritten).
	LogicalBytesWritten atomic.Int64
	LimitFailures       atomic.Int64 // writes refused by a limit
	RemoteFilesCreated  atomic.Int64 // spill files created in the remote tier (among FilesCreated)
	RemoteBytesWritten  atomic.Int64 // bytes written to remote files (among BytesWritten)
	RemoteBytesRead     atomic.Int64 // bytes read back from remote files
	// RemoteRetries counts the object store's answers that its client retries (a throttling or
	// server error, a dropped connection), as the store reports them.
	RemoteRetries atomic.Int64
	FSErrors      atomic.Int64 // filesystem calls that failed
}

// reserve takes n bytes of the manager's limit and of the shared budget, or refuses with a
// *LimitError naming the limit that was hit and takes nothing.
func (m *Manager) reserve(n int64) error {
	if err := reserveOn(&m.used, m.limit, n, m.setting, false); err != nil {
		m.stats().LimitFailures.Add(1)
		return err
	}
	if m.shared != nil {
		if err := reserveOn(&m.shared.used, m.sharedLimit, n, m.sharedSetting, true); err != nil {
			m.used.Add(-n)
			m.stats().LimitFailures.Add(1)
			return err
		}
	}
	return nil
}

func reserveOn(used *atomic.Int64, limit, n int64, setting string, shared bool) error {
	for {
		u := used.Load()
		if n > limit-u {
			return &LimitError{Limit: limit, Used: u, Request: n, Setting: setting, Shared: shared}
		}
		if used.CompareAndSwap(u, u+n) {
			return nil
		}
	}
}

// unreserve gives n bytes back to the manager's limit and the shared budget.
func (m *Manager) unreserve(n int64) {
	m.used.Add(-n)
	if m.shared != nil {
		m.shared.used.Add(-n)
	}
}

// noStats absorbs the counts of a manager that shares no counters.
var noStats Stats

// stats is where the manager counts what it does.
func (m *Manager) stats() *Stats {
	if m.shared == nil {
		return &noStats
	}
	return &m.shared.Stats
}
