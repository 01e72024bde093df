package plan

import (
	"errors"
	"fmt"

	"github.com/spillway/spillway/plan/extsort"
	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
)

// HandleError is a handle that names no live plan or file: released, never issued, or forged.
type HandleError struct {
	What   string // "plan", "file", "tmp file", "spill file", "sort", "spill file reader" or "local dirs registration"
	Handle uint64
}

func (e *HandleError) Error() string {
	return fmt.Sprintf("spillway: no live %s has handle %d: it was released already, or never issued", e.What, int64(e.Handle))
}

// ArgumentError is a bad argument from the caller; nothing was changed.
type ArgumentError struct {
	Reason string
}

func (e *ArgumentError) Error() string { return "spillway: " + e.Reason }

// ErrorKind sorts errors into the few kinds a caller reacts to differently.
type ErrorKind int

const (
	// KindIO is a filesystem failure; the error names the path and the OS cause.
	KindIO ErrorKind = iota
	// KindInvalidArgument is a bad argument or configuration; nothing was changed.
	KindInvalidArgument
	// KindInvalidHandle is an unknown, released or forged handle, or one used out of order.
	KindInvalidHandle
	// KindLimitExceeded is a write refused by the plan's spill limit; nothing was written.
	KindLimitExceeded
)

// Classify tells which kind err is.
func Classify(err error) ErrorKind {
	switch {
	case errors.As(err, new(*spill.LimitError)):
		return KindLimitExceeded
	case errors.As(err, new(*spill.ConfigError)), errors.As(err, new(*ArgumentError)),
		errors.As(err, new(*extsort.ConfigError)), errors.As(err, new(*extsort.BatchError)),
		errors.As(err, new(*extsort.RecordTooLargeError)):
		return KindInvalidArgument
	case errors.As(err, new(*HandleError)), errors.Is(err, spill.ErrClosed), errors.Is(err, spill.ErrFileReleased),
		errors.Is(err, spill.ErrNotFinished), errors.Is(err, spill.ErrFinished), errors.Is(err, ErrTmpFile), errors.Is(err, ErrSpillFile),
		errors.Is(err, ErrReaderClosed), errors.Is(err, chunkfile.ErrClosed),
		errors.Is(err, extsort.ErrClosed), errors.Is(err, extsort.ErrAddAfterNext):
		return KindInvalidHandle
	}
	return KindIO
}
