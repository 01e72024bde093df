package extsort

import (
	"math/rand/v2"
	"testing"

	"github.com/spillway/spillway/spill"
)

// BenchmarkSort sorts 1M records of 16-byte random keys and 16-byte values (40 MB encoded), added
// in 1 MiB batches and read back in 1 MiB batches, with a budget that forces spills, one so small
// that the runs are too many for one merge (intermediate passes), and one that holds everything.
// written-MB is every byte written to run files, intermediate runs included.
func BenchmarkSort(b *testing.B) {
	const records = 1 << 20
	const batchBytes = 1 << 20
	r := rand.New(rand.NewPCG(42, 42))
	var batches [][]byte
	var batch []byte
	for range records {
		batch = AppendRecord(batch, randBytes(r, 16), randBytes(r, 16))
		if len(batch) >= batchBytes {
			batches = append(batches, batch)
			batch = nil
		}
	}
	batches = append(batches, batch)

	for _, bc := range []struct {
		name   string
		budget int64
	}{{"spill/budget=8MiB", 8 << 20}, {"manyruns/budget=256KiB", 256 << 10}, {"memory/budget=256MiB", 256 << 20}} {
		b.Run(bc.name, func(b *testing.B) {
			roots, err := spill.NewRoots([]string{b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]byte, batchBytes)
			var st Stats
			b.SetBytes(records * 40)
			for b.Loop() {
				m, err := spill.New(spill.Config{Roots: roots, Limit: 1 << 30})
				if err != nil {
					b.Fatal(err)
				}
				s, err := New(m, bc.budget)
				if err != nil {
					b.Fatal(err)
				}
				for _, batch := range batches {
					if err := s.Add(batch); err != nil {
						b.Fatal(err)
					}
				}
				for {
					n, err := s.Next(dst)
					if err != nil {
						b.Fatal(err)
					}
					if n == 0 {
						break
					}
				}
				st = s.Stats()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(st.Runs), "runs")
			b.ReportMetric(float64(st.MergePasses), "passes")
			b.ReportMetric(float64(st.SpilledBytes+st.IntermediateBytes)/(1<<20), "written-MB")
		})
	}
}
