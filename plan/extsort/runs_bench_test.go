package extsort

import (
	"math"
	"testing"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
)

// BenchmarkRuns times the two halves of a spill on their own, with BenchmarkSortOrderBy's shapes
// of records (1M records, 32-byte keys): write writes the records of a sorter's memory, sorted
// once, as one run (writeRun); merge merges 8 runs of them into one (mergeGroupOnce, an
// intermediate pass: every record read, compared and written again). Runs in lz4, Spark's default
// codec, and not compressed (the format's own cost). MB/s counts the records' bytes in the batch
// format; disk-B/record is what a run of them takes on disk.
func BenchmarkRuns(b *testing.B) {
	const records = 1 << 20
	for _, shape := range []struct {
		name   string
		record func(dst []byte) []byte
	}{
		{"orderby", orderByRecords(42)},
		{"orderby-text", orderByTextRecords(42)},
	} {
		batches := benchBatches(records, shape.record)
		var total int64
		for _, batch := range batches {
			total += int64(len(batch))
		}
		for _, lz4 := range []bool{false, true} {
			codec := "none"
			if lz4 {
				codec = "lz4"
			}
			b.Run(shape.name+"/write/"+codec, func(b *testing.B) {
				s := runsBenchSorter(b, lz4, 1<<30, batches)
				c, err := s.mem.cursor()
				if err != nil {
					b.Fatal(err)
				}
				var disk int64
				b.SetBytes(total)
				for b.Loop() {
					r, err := s.writeRun(&s.mem, nil, c)
					if err != nil {
						b.Fatal(err)
					}
					disk = r.size()
					s.releaseRun(r)
				}
				b.ReportMetric(float64(disk)/records, "disk-B/record")
			})
			b.Run(shape.name+"/merge/"+codec, func(b *testing.B) {
				s := runsBenchSorter(b, lz4, 0, batches)
				var disk int64
				b.SetBytes(total)
				for b.Loop() {
					r, err := s.mergeGroupOnce(s.runs, 0)
					if err != nil {
						b.Fatal(err)
					}
					disk = r.size()
					s.releaseRun(r)
				}
				b.ReportMetric(float64(disk)/records, "disk-B/record")
			})
		}
	}
}

// runsBenchSorter is a sorter that holds batches' records: in memory with budget, or, with 0,
// spilled as 8 runs.
func runsBenchSorter(b *testing.B, lz4 bool, budget int64, batches [][]byte) *Sorter {
	roots, err := spill.NewRoots([]string{b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	var format spill.Format
	if lz4 {
		format.Codec = chunkfile.LZ4
	}
	m, err := spill.New(spill.Config{Roots: roots, Limit: 4 << 30, Shared: &spill.Shared{}, SharedLimit: math.MaxInt64, Format: &format})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	runs := budget == 0
	if runs {
		budget = 1 << 30
	}
	s, err := New(m, budget)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	for i, batch := range batches {
		if err := s.Add(batch); err != nil {
			b.Fatal(err)
		}
		if runs && (i+1)%((len(batches)+7)/8) == 0 {
			if _, err := s.spill(false); err != nil {
				b.Fatal(err)
			}
		}
	}
	if runs {
		if _, err := s.spill(false); err != nil {
			b.Fatal(err)
		}
	}
	return s
}
