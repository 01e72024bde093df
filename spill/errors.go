package spill

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

var (
	// ErrClosed is returned by a Manager, and its files, once Close has been called.
	ErrClosed = errors.New("spill: the spill manager is closed")
	// ErrFileReleased is returned by a File once Release has been called, or its manager closed.
	ErrFileReleased = errors.New("spill: the spill file is released")
)

// ConfigError is a bad local dir list or limit. Nothing was created.
type ConfigError struct {
	Reason string // what is wrong and what to change
}

func (e *ConfigError) Error() string { return "spill: " + e.Reason }

// LimitError is a write refused because it would take the manager's usage over its limit. The
// write wrote nothing and the usage is unchanged.
type LimitError struct {
	Limit   int64  // bytes the manager may hold
	Used    int64  // bytes held when the write was refused
	Request int64  // bytes the write asked for
	Setting string // the configuration that sets Limit, named so the user knows what to raise
	Shared  bool   // the limit hit is the budget shared by all managers, not this one's own
	Remote  bool   // the limit hit is the cap over all remote files (Remote), not a local one
}

func (e *LimitError) Error() string {
	var b strings.Builder
	whose := "this plan's spill files"
	switch {
	case e.Remote:
		whose = "the remote spill files of all plans in this process"
	case e.Shared:
		whose = "the spill files of all plans in this process"
	}
	fmt.Fprintf(&b, "spill limit exceeded: writing %s more would take %s from %s to %s, over the limit of %s",
		formatBytes(e.Request), whose, formatBytes(e.Used), formatBytes(e.Used+e.Request), formatBytes(e.Limit))
	if e.Setting != "" {
		fmt.Fprintf(&b, "; raise %s, or give the plan more memory so it spills less", e.Setting)
	}
	return b.String()
}

// RootFailure is why one root could not take a spill file.
type RootFailure struct {
	Root string
	Err  error
}

// NoUsableRootError is returned when every root failed for this manager. Each root's cause is
// kept, so the operator sees which disk is missing, full or unwritable.
type NoUsableRootError struct {
	Failures []RootFailure
}

func (e *NoUsableRootError) Error() string {
	var b strings.Builder
	b.WriteString("spill: no local dir could take a spill file; ")
	for i, f := range e.Failures {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %v", f.Root, f.Err)
	}
	b.WriteString(" (check that each local dir exists, is a writable directory and has free space)")
	return b.String()
}

func (e *NoUsableRootError) Unwrap() []error {
	errs := make([]error, len(e.Failures))
	for i, f := range e.Failures {
		errs[i] = f.Err
	}
	return errs
}

// DescriptorLimitError is a spill file that could not be created because the process, or the
// whole system, ran out of file descriptors (EMFILE, ENFILE). No local dir is to blame, so none
// was given up: once descriptors are freed, CreateFile works again.
type DescriptorLimitError struct {
	Err error // the failed call, naming its path
}

func (e *DescriptorLimitError) Error() string {
	return "spill: out of file descriptors: " + e.Err.Error() +
		" (no local dir was given up; close files, or raise the open-file limit: ulimit -n, LimitNOFILE, fs.file-max)"
}

func (e *DescriptorLimitError) Unwrap() error { return e.Err }

func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// RootFull reports whether err says that the filesystem under a local dir can take no more data:
// it is full (ENOSPC), over quota (EDQUOT) or read-only (EROFS). A manager whose write fails so
// takes that dir out of its rotation (until it has room again, if it was out of space): new
// files go to its other dirs. A caller holding the data may write it again into a new file (as
// the external sort does). A *NoUsableRootError is never RootFull, whatever its roots' causes:
// there is no other dir to write again to, and a caller that retried would retry for ever.
func RootFull(err error) bool {
	if none := (*NoUsableRootError)(nil); errors.As(err, &none) {
		return false
	}
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS)
}

// formatBytes renders n exactly in bytes, with a binary-unit figure for people.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", float64(n)/float64(div), "KMGTPE"[exp], n)
}
