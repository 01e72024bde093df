package spill

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzNewRoots checks the validation of local dirs: it never panics, and it either refuses with
// a *ConfigError or returns every dir absolute, cleaned, once, in order. Its seeds are in
// testdata/fuzz/FuzzNewRoots; dirs are joined by newlines.
func FuzzNewRoots(f *testing.F) {
	f.Add("/data/1\n/data/2")
	f.Add("/a/../b\n/b")
	f.Add("relative\n/abs")
	f.Add("")
	f.Fuzz(func(t *testing.T, joined string) {
		dirs := strings.Split(joined, "\n")
		roots, err := NewRoots(dirs)
		if err != nil {
			var cfgErr *ConfigError
			if !errors.As(err, &cfgErr) {
				t.Fatalf("NewRoots(%q) failed with %T, not a *ConfigError: %v", dirs, err, err)
			}
			return
		}
		if roots.Len() != len(dirs) {
			t.Fatalf("NewRoots(%q) has %d roots", dirs, roots.Len())
		}
		seen := map[string]bool{}
		for i := range roots.Len() {
			p := roots.Path(i)
			if !filepath.IsAbs(p) || filepath.Clean(p) != p || p != filepath.Clean(dirs[i]) || seen[p] || strings.IndexByte(p, 0) >= 0 {
				t.Fatalf("NewRoots(%q) gave root %d %q", dirs, i, p)
			}
			seen[p] = true
		}
	})
}
