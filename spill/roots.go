package spill

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Roots is a validated, immutable list of local dirs under which managers create their plan
// dirs. Building it touches no filesystem: a root that is missing or unwritable is found out only
// when a file is first placed there. One Roots may back any number of managers at once.
type Roots struct {
	paths []string
}

// NewRoots checks dirs and returns them cleaned. It rejects an empty list, an empty or relative
// path, a path with a NUL byte and a dir given twice, with a message that says what to change.
func NewRoots(dirs []string) (*Roots, error) {
	if len(dirs) == 0 {
		return nil, &ConfigError{Reason: "no local dirs given; pass at least one absolute directory path"}
	}
	paths := make([]string, len(dirs))
	seen := make(map[string]int, len(dirs)) // cleaned path -> its index: linear in the dirs given
	for i, d := range dirs {
		switch {
		case d == "":
			return nil, &ConfigError{Reason: fmt.Sprintf("local dir #%d is an empty string; pass an absolute directory path", i)}
		case strings.IndexByte(d, 0) >= 0:
			return nil, &ConfigError{Reason: fmt.Sprintf("local dir #%d %q contains a NUL byte", i, d)}
		case !filepath.IsAbs(d):
			return nil, &ConfigError{Reason: fmt.Sprintf("local dir #%d %q is a relative path; pass an absolute path", i, d)}
		}
		paths[i] = filepath.Clean(d)
		if j, dup := seen[paths[i]]; dup {
			return nil, &ConfigError{Reason: fmt.Sprintf("local dir %q is given twice (#%d %q and #%d %q); list each dir once", paths[i], j, dirs[j], i, d)}
		}
		seen[paths[i]] = i
	}
	return &Roots{paths: paths}, nil
}

// Len is the number of roots.
func (r *Roots) Len() int { return len(r.paths) }

// Path is the i-th root, cleaned.
func (r *Roots) Path(i int) string { return r.paths[i] }
