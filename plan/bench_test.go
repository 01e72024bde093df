package plan

import (
	"fmt"
	"testing"
)

// BenchmarkCreateReleasePlan is the registry's share of a plan that never spills.
func BenchmarkCreateReleasePlan(b *testing.B) {
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("roots=%d", n), func(b *testing.B) {
			_, ld := localDirs(b, n)
			r := NewRegistry(nil)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					h, err := r.CreatePlan(ld, 100<<30, Unlimited)
					if err != nil {
						b.Fatal(err)
					}
					if err := r.ReleasePlan(h); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkCreateReleasePlanIn is the same through a local dirs registration, as the JVM does.
func BenchmarkCreateReleasePlanIn(b *testing.B) {
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("roots=%d", n), func(b *testing.B) {
			dirs, _ := localDirs(b, n)
			r := NewRegistry(nil)
			dh, err := r.RegisterLocalDirs(dirs)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					h, err := r.CreatePlanIn(dh, 100<<30, Unlimited)
					if err != nil {
						b.Fatal(err)
					}
					if err := r.ReleasePlan(h); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkCreateReleasePlanForDirs is the same through the cache of dir lists by content, as
// the card's createPlan(String[]) does for a list it has seen: the
// key is what the JNI binding makes of 8 paths.
func BenchmarkCreateReleasePlanForDirs(b *testing.B) {
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("roots=%d", n), func(b *testing.B) {
			dirs, _ := localDirs(b, n)
			key := testKey(dirs)
			r := NewRegistry(nil)
			paths := func() ([]string, error) { return dirs, nil }
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					h, err := r.CreatePlanForDirs(key, paths, 100<<30, Unlimited)
					if err != nil {
						b.Fatal(err)
					}
					if err := r.ReleasePlan(h); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
