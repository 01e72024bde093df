package spill

import (
	"fmt"
	"os"
	"testing"
)

// eagerManager does what DataFusion's Directories disk manager does, the baseline Spillway is
// measured against: one temp dir in every root when the plan is built, removed recursively when
// it is dropped, spilled or not.
type eagerManager struct{ dirs []string }

func newEager(roots []string) (*eagerManager, error) {
	e := &eagerManager{dirs: make([]string, 0, len(roots))}
	for _, r := range roots {
		d, err := os.MkdirTemp(r, "datafusion-")
		if err != nil {
			e.close()
			return nil, err
		}
		e.dirs = append(e.dirs, d)
	}
	return e, nil
}

func (e *eagerManager) close() {
	for _, d := range e.dirs {
		_ = os.RemoveAll(d)
	}
}

func benchRoots(b *testing.B, n int) ([]string, *Roots) {
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = b.TempDir()
	}
	roots, err := NewRoots(dirs)
	if err != nil {
		b.Fatal(err)
	}
	return dirs, roots
}

// BenchmarkPlanLifecycle is a plan that never spills: build, then close. Run with -cpu 1,2 to
// see how it scales; lazy shares nothing between plans, eager shares the roots' directories.
func BenchmarkPlanLifecycle(b *testing.B) {
	for _, n := range []int{1, 4, 8} {
		dirs, roots := benchRoots(b, n)
		b.Run(fmt.Sprintf("impl=lazy/roots=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					m, err := New(Config{Roots: roots, Limit: 100 << 30})
					if err != nil {
						b.Fatal(err)
					}
					if err := m.Close(); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		b.Run(fmt.Sprintf("impl=eager/roots=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					e, err := newEager(dirs)
					if err != nil {
						b.Fatal(err)
					}
					e.close()
				}
			})
		})
	}
}

// BenchmarkFirstSpill is a plan that spills once: build, one file, one 4 KiB write, close.
func BenchmarkFirstSpill(b *testing.B) {
	payload := make([]byte, 4096)
	for _, n := range []int{1, 8} {
		dirs, roots := benchRoots(b, n)
		b.Run(fmt.Sprintf("impl=lazy/roots=%d", n), func(b *testing.B) {
			for b.Loop() {
				m, err := New(Config{Roots: roots, Limit: 100 << 30})
				if err != nil {
					b.Fatal(err)
				}
				f, err := m.CreateFile()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Write(payload); err != nil {
					b.Fatal(err)
				}
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("impl=eager/roots=%d", n), func(b *testing.B) {
			for b.Loop() {
				e, err := newEager(dirs)
				if err != nil {
					b.Fatal(err)
				}
				f, err := os.CreateTemp(e.dirs[0], "spill-")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Write(payload); err != nil {
					b.Fatal(err)
				}
				_ = f.Close()
				e.close()
			}
		})
	}
}
