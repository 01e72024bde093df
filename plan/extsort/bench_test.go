package extsort

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
)

const benchBatchBytes = 1 << 20

type benchCase struct {
	name   string
	budget int64
	tasks  int  // sorts run at once (0: one)
	lz4    bool // runs compressed with lz4, Spark's default codec (else not at all)
}

// BenchmarkSort sorts 1M records of 16-byte random keys and 16-byte values (40 MB encoded), added
// in 1 MiB batches and read back in 1 MiB batches, with a budget that forces spills, one so small
// that the runs are too many for one merge (intermediate passes), and one that holds everything.
// written-MB is every byte written to run files, intermediate runs included.
func BenchmarkSort(b *testing.B) {
	const records = 1 << 20
	r := rand.New(rand.NewPCG(42, 42))
	batches := benchBatches(records, func(dst []byte) []byte {
		return AppendRecord(dst, randBytes(r, 16), randBytes(r, 16))
	})
	benchSorts(b, records, batches, []benchCase{{name: "spill/budget=8MiB", budget: 8 << 20, tasks: 1}, {name: "manyruns/budget=256KiB", budget: 256 << 10, tasks: 1}, {name: "memory/budget=256MiB", budget: 256 << 20, tasks: 1}})
}

// BenchmarkSortOrderBy sorts 1M records shaped like Spark SQL's
// ORDER BY l_partkey, l_suppkey DESC, l_orderkey, l_linenumber over TPC-H's lineitem: the keys
// as the Scala side encodes them (per column a null flag, then the value big-endian with its sign
// bit flipped, inverted for DESC: 32 bytes), about 200,000 distinct first columns, so that the
// prefix after the shared bytes ties often, and 152-byte values like UnsafeRows (190 MB
// encoded). Its budget makes about 400,000 records a run, as in a Spark task with 64 MiB: two
// spills and a final merge with the records left in memory. The tasks=2 cases run two such
// sorts at once, as two tasks of an executor on two cores.
func BenchmarkSortOrderBy(b *testing.B) {
	const records = 1 << 20
	batches := benchBatches(records, orderByRecords(42))
	benchSorts(b, records, batches, []benchCase{{name: "spill/budget=80MiB", budget: 80 << 20, tasks: 1}, {name: "memory/budget=512MiB", budget: 512 << 20, tasks: 1},
		{name: "spill/budget=80MiB/tasks=2", budget: 80 << 20, tasks: 2}, {name: "memory/budget=512MiB/tasks=2", budget: 512 << 20, tasks: 2}})
}

// BenchmarkSortOrderByText is BenchmarkSortOrderBy with values that compress as the lineitem
// rows of the SQL bench do (lz4 stores 0.78 of them), runs compressed with lz4, so a run's codec
// costs what it costs there, with one sort (a core to spare) and two (none).
func BenchmarkSortOrderByText(b *testing.B) {
	const records = 1 << 20
	batches := benchBatches(records, orderByTextRecords(42))
	benchSorts(b, records, batches, []benchCase{{name: "spill/budget=80MiB/lz4/inline", budget: 80 << 20, lz4: true},
		{name: "spill/budget=80MiB/tasks=2/lz4/inline", budget: 80 << 20, tasks: 2, lz4: true}})
}

// BenchmarkSortNarrow sorts 2M records shaped like Spark SQL's narrow sort, Q18's
// ORDER BY l_orderkey over (l_orderkey, l_quantity): a 9-byte key (a null flag, the long
// big-endian with its sign flipped) over 500,000 distinct values, about 4 rows a key, and the
// 24-byte UnsafeRow (41 bytes encoded, 82 MB in all), in memory and with a budget that makes one
// spill, as a task of the SQL bench does in 256 MiB of off-heap memory shared by two; that spill
// also in lz4, the executor's default spill codec.
func BenchmarkSortNarrow(b *testing.B) {
	const records = 2 << 20
	r := rand.New(rand.NewPCG(18, 18))
	value := make([]byte, 24)
	batches := benchBatches(records, func(dst []byte) []byte {
		k := uint64(r.IntN(records/4) + 1)
		binary.LittleEndian.PutUint64(value[8:], k)
		binary.LittleEndian.PutUint64(value[16:], uint64(100*(1+r.IntN(50))))
		return AppendRecord(dst, sqlLongKey(nil, k, false), value)
	})
	cases := []benchCase{{name: "spill/budget=96MiB", budget: 96 << 20, tasks: 1},
		{name: "spill/budget=96MiB/lz4", budget: 96 << 20, tasks: 1, lz4: true}, {name: "memory/budget=256MiB", budget: 256 << 20, tasks: 1}}
	benchSorts(b, records, batches, cases)
	// The same rows in four stretches in key order, one after another (a task of the SQL bench
	// gets its rows in 2 to 4 stretches: lineitem is stored by l_orderkey): no radix sort.
	i := 0
	inOrder := benchBatches(records, func(dst []byte) []byte {
		q := records / 4
		k := uint64(((3-i/q)*q+i%q)/4 + 1) // the last quarter first
		i++
		binary.LittleEndian.PutUint64(value[8:], k)
		binary.LittleEndian.PutUint64(value[16:], uint64(100*(1+r.IntN(50))))
		return AppendRecord(dst, sqlLongKey(nil, k, false), value)
	})
	for i := range cases {
		cases[i].name = "stretches/" + cases[i].name
	}
	benchSorts(b, records, inOrder, cases)
	// The same stretches with 3 rows in 100 of a null key among them: the first task of a sort by
	// a nullable key, nulls first, gets every null (rows out of line, held apart); the last task,
	// nulls last, where they are spikes.
	withNulls := func(flag byte) [][]byte {
		i := 0
		return benchBatches(records, func(dst []byte) []byte {
			q := records / 4
			k := uint64(((3-i/q)*q+i%q)/4 + 1)
			i++
			binary.LittleEndian.PutUint64(value[8:], k)
			binary.LittleEndian.PutUint64(value[16:], uint64(100*(1+r.IntN(50))))
			key := sqlLongKey(nil, k, false)
			if r.IntN(100) < 3 {
				key = append([]byte{flag}, make([]byte, 8)...)
			}
			return AppendRecord(dst, key, value)
		})
	}
	for i := range cases {
		cases[i].name = strings.Replace(cases[i].name, "stretches/", "stretches+nulls/", 1)
	}
	benchSorts(b, records, withNulls(0), cases)
	for i := range cases {
		cases[i].name = strings.Replace(cases[i].name, "stretches+nulls/", "stretches+nullslast/", 1)
	}
	benchSorts(b, records, withNulls(2), cases[1:])
	// Half the rows in key order, then half in no order: the order lost past indexedFirst rows,
	// the first half frozen in its stretch and the second indexed.
	i = 0
	orderLost := benchBatches(records, func(dst []byte) []byte {
		k := uint64(i + 1)
		if i >= records/2 {
			k = uint64(r.IntN(records) + 1)
		}
		i++
		binary.LittleEndian.PutUint64(value[8:], k)
		binary.LittleEndian.PutUint64(value[16:], uint64(100*(1+r.IntN(50))))
		return AppendRecord(dst, sqlLongKey(nil, k, false), value)
	})
	for i := range cases {
		cases[i].name = strings.Replace(cases[i].name, "stretches+nullslast/", "order-lost-late/", 1)
	}
	benchSorts(b, records, orderLost, cases[2:])
}

// BenchmarkSortStrings sorts 1M records shaped like Spark SQL's string sort,
// ORDER BY l_comment, l_shipinstruct over (l_comment, l_shipinstruct, l_orderkey): two string
// columns as the Scala side encodes them (a null flag, the bytes, the terminator 00 01), l_comment
// 10 to 43 characters of lineitem's words, and the UnsafeRow of the three columns (its fixed part,
// then both strings padded to 8 bytes). Its records differ in size, as every sort with a string
// in its key or row does, so Add walks each batch record by record (the other benchmarks' records
// are of one size, which Add takes by stride). In memory, and with a budget that makes two runs.
func BenchmarkSortStrings(b *testing.B) {
	const records = 1 << 20
	batches := benchBatches(records, stringRecords(42))
	benchSorts(b, records, batches, []benchCase{{name: "spill/budget=48MiB", budget: 48 << 20, tasks: 1}, {name: "memory/budget=512MiB", budget: 512 << 20, tasks: 1}})
}

// stringRecords makes the records of BenchmarkSortStrings.
func stringRecords(seed uint64) func(dst []byte) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	words := []string{"furiously", "regular", "accounts", "carefully", "final", "deposits", "ironic", "pending",
		"requests", "quickly", "express", "packages", "slyly", "blithely", "bold", "the", "even", "among"}
	instructions := []string{"DELIVER IN PERSON", "TAKE BACK RETURN", "COLLECT COD", "NONE"}
	var key, row, comment []byte
	return func(dst []byte) []byte {
		comment = comment[:0]
		for target := 10 + r.IntN(34); len(comment) < target; {
			comment = append(append(comment, words[r.IntN(len(words))]...), ' ')
		}
		comment = comment[:10+r.IntN(min(34, len(comment)-9))]
		instruction := instructions[r.IntN(len(instructions))]
		key = append(append(append(key[:0], 1), comment...), 0, 1)
		key = append(append(append(key, 1), instruction...), 0, 1)
		// The UnsafeRow: the null bits, two (offset, size) words and the long, then the strings.
		row = binary.LittleEndian.AppendUint64(row[:0], 0)
		commentAt := 32
		instructionAt := commentAt + (len(comment)+7)&^7
		row = binary.LittleEndian.AppendUint64(row, uint64(commentAt)<<32|uint64(len(comment)))
		row = binary.LittleEndian.AppendUint64(row, uint64(instructionAt)<<32|uint64(len(instruction)))
		row = binary.LittleEndian.AppendUint64(row, uint64(r.IntN(6_000_000)+1))
		row = append(row, comment...)
		row = append(row, make([]byte, instructionAt-len(row))...)
		row = append(row, instruction...)
		row = append(row, make([]byte, (len(row)+7)&^7-len(row))...)
		return AppendRecord(dst, key, row)
	}
}

// BenchmarkSortedIndex sorts the index of one run's worth of records in memory (what a spill
// sorts before it writes), for the keys of BenchmarkSortOrderBy and of BenchmarkSort.
func BenchmarkSortedIndex(b *testing.B) {
	const records = 400_000
	r := rand.New(rand.NewPCG(42, 42))
	for _, bc := range []struct {
		name   string
		record func(dst []byte) []byte
	}{
		{"orderby", orderByRecords(42)},
		// The same keys over rows of many sizes, as lineitem's whole rows are (a record of 264
		// bytes on average, in steps of 8): the walk finds each record by the one before.
		{"orderby-rows", wideRecords(orderByRecords(42), r)},
		{"random16", func(dst []byte) []byte { return AppendRecord(dst, randBytes(r, 16), randBytes(r, 16)) }},
		// A sort of one long key with few values, many rows each (a day-time interval key of a
		// few hundred values, range-partitioned into 8 tasks): the ties are most of the sort.
		{"fewkeys", func(dst []byte) []byte {
			return AppendRecord(dst, sqlLongKey(nil, uint64(r.IntN(52))*60_000_000, true), randBytes(r, 8))
		}},
		// A sort-merge join's sort of lineitem by l_orderkey: one long key, about 4 rows a key.
		{"joinkey", func(dst []byte) []byte {
			return AppendRecord(dst, sqlLongKey(nil, uint64(r.IntN(records/4)+1), false), randBytes(r, 16))
		}},
		// The join key in four stretches in key order that interleave by blocks of 10,000 keys,
		// as a shuffle of a table stored by the key brings them (SortShapesBench's narrow shape):
		// merged by blocks, not radix sorted.
		{"joinkey-stretches", func() func(dst []byte) []byte {
			i := 0
			return func(dst []byte) []byte {
				const block = 40_000 // records: 10,000 keys
				stretch, j := i%(records/4*4)/(records/4), i%(records/4)
				k := uint64((j/block*4+stretch)*block+j%block)/4 + 1 // stretch s takes blocks s, s+4, ...
				i++
				return AppendRecord(dst, sqlLongKey(nil, k, false), randBytes(r, 16))
			}
		}()},
		// The join key with 1% nulls (NULLS LAST), a null written as its flag alone: keys of two lengths.
		{"joinkey-nulls-short", func(dst []byte) []byte {
			if r.IntN(100) == 0 {
				return AppendRecord(dst, []byte{2}, randBytes(r, 16))
			}
			return AppendRecord(dst, sqlLongKey(nil, uint64(r.IntN(records/4)+1), false), randBytes(r, 16))
		}},
		// The same, a null padded to the key's width with the encoding of 0: keys of one length,
		// whose high bytes a null shares with small values.
		{"joinkey-nulls-padded", func(dst []byte) []byte {
			if r.IntN(100) == 0 {
				return AppendRecord(dst, append([]byte{2}, sqlLongKey(nil, 0, false)[1:]...), randBytes(r, 16))
			}
			return AppendRecord(dst, sqlLongKey(nil, uint64(r.IntN(records/4)+1), false), randBytes(r, 16))
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			t := memTable{arena: arena{chunkSize: maxChunk}}
			defer t.reset()
			for _, batch := range benchBatches(records, bc.record) {
				for off := 0; off < len(batch); off += recordSize(batch[off:]) {
					if err := t.add(batch[off : off+recordSize(batch[off:])]); err != nil {
						b.Fatal(err)
					}
				}
			}
			for b.Loop() {
				if _, err := t.sortedIndex(false); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// orderByRecords makes the records of BenchmarkSortOrderBy.
func orderByRecords(seed uint64) func(dst []byte) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	value := make([]byte, 152)
	return func(dst []byte) []byte {
		key := sqlLongKey(nil, uint64(r.IntN(200_000)+1), false)
		key = sqlLongKey(key, uint64(r.IntN(10_000)+1), true)
		key = sqlLongKey(key, uint64(r.IntN(1_500_000)*4+1), false)
		key = binary.BigEndian.AppendUint32(append(key, 1), uint32(r.IntN(7)+1)^1<<31)
		for i := 0; i < len(value); i += 8 {
			binary.LittleEndian.PutUint64(value[i:], r.Uint64())
		}
		return AppendRecord(dst, key, value)
	}
}

// wideRecords makes records with the keys of records and rows of 192–256 bytes, in steps of 8 as
// an UnsafeRow's.
func wideRecords(records func(dst []byte) []byte, r *rand.Rand) func(dst []byte) []byte {
	value := make([]byte, 256)
	for i := range value {
		value[i] = byte(r.Uint32())
	}
	return func(dst []byte) []byte {
		rec := records(nil)
		key := rec[headerSize : headerSize+int(binary.LittleEndian.Uint32(rec))]
		return AppendRecord(dst, key, value[:192+8*r.IntN(9)])
	}
}

// orderByTextRecords is orderByRecords with 152-byte values made of lineitem's words, dates and
// small numbers.
func orderByTextRecords(seed uint64) func(dst []byte) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	words := []string{"DELIVER IN PERSON", "TAKE BACK RETURN", "COLLECT COD", "NONE", "TRUCK", "MAIL", "SHIP",
		"AIR", "REG AIR", "FOB", "RAIL", "furiously", "regular", "accounts", "carefully", "final", "deposits",
		"ironic", "pending", "requests", "quickly", "express", "packages", "slyly", "blithely", "bold"}
	key := orderByRecords(seed)
	value := make([]byte, 0, 152)
	return func(dst []byte) []byte {
		rec := key(nil) // its key, and random bytes for its value, replaced here
		k := rec[headerSize : headerSize+int(binary.LittleEndian.Uint32(rec))]
		value = value[:0]
		for len(value) < 152 {
			switch r.IntN(3) {
			case 0:
				value = binary.LittleEndian.AppendUint64(value, uint64(r.IntN(50)+1))
			case 1:
				value = append(value, fmt.Sprintf("199%d-%02d-%02d", r.IntN(9), r.IntN(12)+1, r.IntN(28)+1)...)
			default:
				value = append(append(value, words[r.IntN(len(words))]...), ' ')
			}
		}
		return AppendRecord(dst, k, value[:152])
	}
}

// sqlLongKey appends a non-null bigint column as the Scala side encodes it in a sort key.
func sqlLongKey(dst []byte, v uint64, desc bool) []byte {
	v ^= 1 << 63
	if desc {
		v = ^v
	}
	return binary.BigEndian.AppendUint64(append(dst, 1), v)
}

// benchBatches encodes records records made by appendRecord in batches of about benchBatchBytes.
func benchBatches(records int, appendRecord func(dst []byte) []byte) [][]byte {
	var batches [][]byte
	var batch []byte
	for range records {
		batch = appendRecord(batch)
		if len(batch) >= benchBatchBytes {
			batches = append(batches, batch)
			batch = nil
		}
	}
	return append(batches, batch)
}

// benchSorts sorts the batches' records, read back in batches of benchBatchBytes, once per case.
// A case with tasks > 1 runs that many sorts at once, as the tasks of an executor do, each with
// its own manager and the whole memory budget, the managers sharing one disk limit and the
// process's counters (spill.Shared): what they share (those counters, the Go runtime, memory
// bandwidth) is then measured too. Its MB/s and records/s count every task's records.
func benchSorts(b *testing.B, records int, batches [][]byte, cases []benchCase) {
	var total int64
	for _, batch := range batches {
		total += int64(len(batch))
	}
	for _, bc := range cases {
		tasks := max(1, bc.tasks)
		b.Run(bc.name, func(b *testing.B) {
			roots, err := spill.NewRoots([]string{b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			shared := &spill.Shared{}
			dsts := make([][]byte, tasks)
			for i := range dsts {
				dsts[i] = make([]byte, benchBatchBytes)
			}
			stats := make([]Stats, tasks)
			errs := make([]error, tasks)
			b.SetBytes(total * int64(tasks))
			cpu := processCPU()
			for b.Loop() {
				var wg sync.WaitGroup
				for i := range tasks {
					wg.Go(func() {
						stats[i], errs[i] = sortOnce(roots, shared, bc, batches, dsts[i])
					})
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					b.Fatal(err)
				}
			}
			st := stats[0]
			// The process's CPU, the pipeline's goroutines included: wall time alone would hide
			// what a run's encoding costs once it moves off the sorting goroutine.
			b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(records*tasks*b.N), "cpu-ns/record")
			b.ReportMetric(float64(records*tasks)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(st.Runs), "runs")
			b.ReportMetric(float64(st.MergePasses), "passes")
			b.ReportMetric(float64(st.SpilledBytes+st.IntermediateBytes)/(1<<20), "written-MB")
		})
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sortOnce sorts the batches through a new manager of its own and reads the output to its end.
func sortOnce(roots *spill.Roots, shared *spill.Shared, bc benchCase, batches [][]byte, dst []byte) (Stats, error) {
	var format spill.Format
	if bc.lz4 {
		format.Codec = chunkfile.LZ4
	}
	m, err := spill.New(spill.Config{Roots: roots, Limit: 1 << 30, Shared: shared, SharedLimit: math.MaxInt64, Format: &format})
	if err != nil {
		return Stats{}, err
	}
	defer m.Close()
	s, err := New(m, bc.budget)
	if err != nil {
		return Stats{}, err
	}
	defer s.Close()
	for _, batch := range batches {
		if err := s.Add(batch); err != nil {
			return Stats{}, err
		}
	}
	for {
		n, err := s.Next(dst)
		if err != nil {
			return Stats{}, err
		}
		if n == 0 {
			break
		}
	}
	st := s.Stats()
	if err := s.Close(); err != nil {
		return Stats{}, err
	}
	return st, m.Close()
}
