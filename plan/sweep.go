package plan

import (
	"errors"

	"github.com/spillway/spillway/spill"
)

// SweepOrphans removes the plan dirs that processes which died without releasing their plans
// (an executor killed mid-spill) left directly inside each of dirs; see spill.SweepOrphans for
// what it never touches. It returns how many it removed, and an error naming what it could not.
func SweepOrphans(dirs []string) (int, error) {
	if _, err := spill.NewRoots(dirs); err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, d := range dirs {
		gone, err := spill.SweepOrphans(d)
		removed += len(gone)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}
