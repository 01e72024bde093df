package extsort

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/plan/offheap"
	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
	"github.com/spillway/spillway/spill/errorfs"
)

type rec struct{ key, val []byte }

func encode(recs []rec) []byte {
	var b []byte
	for _, r := range recs {
		b = AppendRecord(b, r.key, r.val)
	}
	return b
}

// decode parses a batch independently of the package's own decoder.
func decode(t testing.TB, b []byte) []rec {
	t.Helper()
	var out []rec
	for len(b) > 0 {
		require.GreaterOrEqual(t, len(b), 8)
		k, v := int(binary.LittleEndian.Uint32(b)), int(binary.LittleEndian.Uint32(b[4:]))
		require.GreaterOrEqual(t, len(b), 8+k+v)
		out = append(out, rec{key: b[8 : 8+k], val: b[8+k : 8+k+v]})
		b = b[8+k+v:]
	}
	return out
}

func reference(recs []rec) []rec {
	out := append([]rec(nil), recs...)
	sort.SliceStable(out, func(i, j int) bool { return bytes.Compare(out[i].key, out[j].key) < 0 })
	return out
}

func newManager(t testing.TB, limit int64, fsys spill.FS) (*spill.Manager, string) {
	t.Helper()
	root := t.TempDir()
	roots, err := spill.NewRoots([]string{root})
	require.NoError(t, err)
	m, err := spill.New(spill.Config{Roots: roots, Limit: limit, LimitSetting: "test.limit", FS: fsys, Format: &testFormat.format})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m, root
}

func newSorter(t testing.TB, m *spill.Manager, budget int64) *Sorter {
	t.Helper()
	mapped := offheap.Mapped()
	s, err := New(m, budget)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s.Close()
		// Whatever the test did (a LIMIT, a failure, a merge left halfway), Close gave every byte back.
		assert.Equal(t, mapped, offheap.Mapped(), "memory mapped by the sort and not given back at Close")
	})
	return s
}

func planDirs(t testing.TB, root string) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(root, spill.DirPrefix+"*"))
	require.NoError(t, err)
	return dirs
}

// runFiles lists the files in every plan dir under root.
func runFiles(t testing.TB, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, spill.DirPrefix+"*", "spill-*"))
	require.NoError(t, err)
	return files
}

// addAll adds recs in batches of about batchBytes.
func addAll(t testing.TB, s *Sorter, recs []rec, batchBytes int) {
	t.Helper()
	var b []byte
	for _, r := range recs {
		b = AppendRecord(b, r.key, r.val)
		if len(b) >= batchBytes {
			require.NoError(t, s.Add(b))
			clear(b) // the sorter must have copied
			b = b[:0]
		}
	}
	if len(b) > 0 {
		require.NoError(t, s.Add(b))
	}
}

// drain reads every record with a dst of dstSize bytes, growing it when a record does not fit.
func drain(t testing.TB, s *Sorter, dstSize int) []rec {
	t.Helper()
	return drainEach(t, s, dstSize, func() {})
}

// drainEach is drain, calling afterNext after every Next that returned records or the end.
func drainEach(t testing.TB, s *Sorter, dstSize int, afterNext func()) []rec {
	t.Helper()
	dst := make([]byte, dstSize)
	var out []rec
	for {
		n, err := s.Next(dst)
		var tooLarge *RecordTooLargeError
		if errors.As(err, &tooLarge) {
			dst = make([]byte, tooLarge.Need)
			continue
		}
		require.NoError(t, err)
		afterNext()
		if n == 0 {
			return out
		}
		out = append(out, decode(t, bytes.Clone(dst[:n]))...)
	}
}

func assertSorted(t testing.TB, want, got []rec) {
	t.Helper()
	want = reference(want)
	require.Equal(t, len(want), len(got), "record count")
	for i := range want {
		if !bytes.Equal(want[i].key, got[i].key) || !bytes.Equal(want[i].val, got[i].val) {
			t.Fatalf("record %d: got key %x val %x, want key %x val %x", i, got[i].key, got[i].val, want[i].key, want[i].val)
		}
	}
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

func randomRecords(seed uint64, n, keyLen, maxVal int) []rec {
	r := rand.New(rand.NewPCG(seed, 1))
	recs := make([]rec, n)
	for i := range recs {
		recs[i] = rec{key: randBytes(r, keyLen), val: randBytes(r, r.IntN(maxVal+1))}
	}
	return recs
}

func TestFitsInMemoryCreatesNoDir(t *testing.T) {
	m, root := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 64<<20)
	recs := randomRecords(1, 10000, 12, 40)
	addAll(t, s, recs, 4096)
	assert.Positive(t, s.MemoryUsed())
	assertSorted(t, recs, drain(t, s, 4096))
	assert.Equal(t, Stats{Records: 10000}, s.Stats())
	assert.Zero(t, s.MemoryUsed(), "memory is freed once every record is returned")
	require.NoError(t, s.Close())
	assert.Empty(t, planDirs(t, root))
}

func TestTwentyTimesTheBudgetSpillsRunsAndLeavesNothing(t *testing.T) {
	m, root := newManager(t, 1<<30, nil)
	const budget = 64 << 10
	s := newSorter(t, m, budget)
	recs := randomRecords(2, 24000, 16, 40) // ≈ 1.3 MB encoded
	// The records' room: the budget less the spill writer's reservation, or the whole budget when
	// the reservation is over 1/8 of it and comes on top (Sorter.addLimit).
	room, limit := int64(budget)-s.mem.spillCost, int64(budget)
	if s.mem.spillCost > budget/8 {
		room, limit = budget, budget+s.mem.spillCost
	}
	var before int64 // the memory used before the Add that spilled last: the sort was full then
	for i, r := range recs {
		used, runs := s.MemoryUsed(), s.Stats().Runs
		require.NoError(t, s.Add(AppendRecord(nil, r.key, r.val)))
		if s.Stats().Runs > runs {
			before = used
			// Spills are not triggered early: the records held nearly the budget, less the writer's reservation.
			require.Greater(t, used-s.mem.spillCost, room*7/8, "record %d spilled early", i)
		}
		if used := s.MemoryUsed(); used > limit {
			t.Fatalf("after record %d, memory used %d is over the limit %d", i, used, limit)
		}
	}
	st := s.Stats()
	t.Logf("%+v, the memory before the last spill %d", st, before)
	assert.Greater(t, st.Runs, int64(10))
	// The first two runs hold the older half of what was held, the others all (Sorter.spill).
	assert.Less(t, st.SpilledMemory/st.Runs, room)
	assert.Greater(t, st.SpilledMemory/st.Runs, room*3/4)
	assert.Positive(t, st.SpilledBytes)
	assert.Positive(t, st.SpilledMemory)
	assert.Len(t, planDirs(t, root), 1)
	assert.Len(t, runFiles(t, root), int(st.Runs))
	assert.Equal(t, st.SpilledBytes, m.Used())

	assertSorted(t, recs, drain(t, s, 8192))
	assert.Empty(t, runFiles(t, root), "every run is released once merged")
	assert.Zero(t, m.Used())
	assert.Zero(t, s.MemoryUsed())
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	assert.Zero(t, m.Used())
	require.NoError(t, m.Close())
	assert.Empty(t, planDirs(t, root))
}

func TestRunIsReleasedAsSoonAsMerged(t *testing.T) {
	m, root := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 16<<10)
	// Ascending keys: each run holds a key range of its own, so runs end one after another.
	var recs []rec
	for i := range 5000 {
		recs = append(recs, rec{key: binary.BigEndian.AppendUint32(nil, uint32(i)), val: []byte("value")})
	}
	addAll(t, s, recs, 1024)
	runs := int(s.Stats().Runs)
	require.Greater(t, runs, 3)
	require.Len(t, runFiles(t, root), runs)

	dst := make([]byte, 17*100)
	var got []rec
	minFiles := runs
	for {
		n, err := s.Next(dst)
		require.NoError(t, err)
		if n == 0 {
			break
		}
		got = append(got, decode(t, bytes.Clone(dst[:n]))...)
		files := len(runFiles(t, root))
		require.LessOrEqual(t, files, minFiles)
		minFiles = files
		if len(got) == len(recs)/2 {
			assert.LessOrEqual(t, files, runs/2+2, "runs merged in the first half are gone (of %d)", runs)
		}
	}
	assertSorted(t, recs, got)
	assert.Zero(t, m.Used())
}

func TestEmptyInput(t *testing.T) {
	m, root := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 1<<20)
	require.NoError(t, s.Add(nil))
	freed, err := s.Spill()
	require.NoError(t, err)
	assert.Zero(t, freed)
	n, err := s.Next(make([]byte, 16))
	require.NoError(t, err)
	assert.Zero(t, n)
	n, err = s.Next(nil)
	require.NoError(t, err)
	assert.Zero(t, n, "done stays done")
	require.NoError(t, s.Close())
	assert.Empty(t, planDirs(t, root))
}

func TestOneRecord(t *testing.T) {
	m, _ := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 1<<20)
	recs := []rec{{key: []byte("k"), val: []byte("v")}}
	addAll(t, s, recs, 1)
	assertSorted(t, recs, drain(t, s, 64))
}

func TestAllKeysEqualIsStable(t *testing.T) {
	for _, budget := range []int64{1 << 30, 4 << 10} {
		m, _ := newManager(t, 1<<30, nil)
		s := newSorter(t, m, budget)
		var recs []rec
		for i := range 3000 {
			recs = append(recs, rec{key: []byte("same key, longer than eight bytes"), val: binary.BigEndian.AppendUint32(nil, uint32(i))})
		}
		addAll(t, s, recs, 700)
		if budget < 1<<20 {
			require.Greater(t, s.Stats().Runs, int64(2))
		}
		got := drain(t, s, 1000)
		assertSorted(t, recs, got) // reference is stable: values must be in sequence order
	}
}

func TestZeroLengthKeysAndValues(t *testing.T) {
	for _, budget := range []int64{1 << 30, 256} {
		m, _ := newManager(t, 1<<30, nil)
		s := newSorter(t, m, budget)
		var recs []rec
		for i := range 400 {
			var k, v []byte
			if i%3 != 0 {
				k = []byte{byte(i % 7)}
			}
			if i%2 == 0 {
				v = []byte{byte(i), byte(i >> 8)}
			}
			recs = append(recs, rec{key: k, val: v})
		}
		addAll(t, s, recs, 100)
		assertSorted(t, recs, drain(t, s, 64))
	}
}

func TestRecordsLargerThanTheBudget(t *testing.T) {
	m, root := newManager(t, 1<<30, nil)
	const budget = 512 << 10
	s := newSorter(t, m, budget)
	recs := randomRecords(3, 6, 10, 0)
	for i := range recs {
		recs[i].val = bytes.Repeat([]byte{byte(i)}, 1<<20)
		require.NoError(t, s.Add(AppendRecord(nil, recs[i].key, recs[i].val)))
		// Held alone: one record, its own chunk (mapped: whole pages), its index entry and its
		// spill's writer.
		page := int64(os.Getpagesize())
		assert.Equal(t, (int64(8+10+1<<20)+page-1)/page*page+entrySize+s.mem.spillCost, s.MemoryUsed())
	}
	assert.Equal(t, int64(5), s.Stats().Runs, "each record but the last spilled as a run of one")
	assertSorted(t, recs, drain(t, s, 64<<10)) // starts too small: RecordTooLargeError, then grows
	assert.Empty(t, runFiles(t, root))
}

// binaryKeys makes keys of bytes 0x00 and 0xFF and random bytes, many sharing prefixes longer
// than 8 bytes (so the full-key compare decides), of lengths around 8.
func binaryKeys(seed uint64, n int) []rec {
	r := rand.New(rand.NewPCG(seed, 2))
	prefixes := [][]byte{nil, bytes.Repeat([]byte{0}, 12), bytes.Repeat([]byte{0xff}, 12), []byte("common prefix!"), {0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0}}
	recs := make([]rec, n)
	for i := range recs {
		key := append([]byte(nil), prefixes[r.IntN(len(prefixes))]...)
		for range r.IntN(10) {
			switch r.IntN(3) {
			case 0:
				key = append(key, 0)
			case 1:
				key = append(key, 0xff)
			default:
				key = append(key, byte(r.UintN(256)))
			}
		}
		recs[i] = rec{key: key, val: binary.BigEndian.AppendUint32(nil, uint32(i))}
	}
	return recs
}

func TestRandomBinaryKeys(t *testing.T) {
	for _, budget := range []int64{1 << 30, 8 << 10} {
		m, _ := newManager(t, 1<<30, nil)
		s := newSorter(t, m, budget)
		recs := binaryKeys(4, 20000)
		addAll(t, s, recs, 3000)
		assertSorted(t, recs, drain(t, s, 5000))
	}
}

func TestExplicitSpillMidInput(t *testing.T) {
	m, _ := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 1<<30)
	recs := binaryKeys(5, 6000)
	addAll(t, s, recs[:2000], 512)
	held := s.MemoryUsed()
	freed, err := s.Spill()
	require.NoError(t, err)
	assert.Equal(t, held, freed)
	assert.Zero(t, s.MemoryUsed())
	logical := int64(len(encode(recs[:2000])))
	// Spark's memoryBytesSpilled is the records' memory, not the writer's reservation.
	assert.Equal(t, Stats{Records: 2000, Runs: 1, SpilledBytes: m.Used(), SpilledLogicalBytes: logical, SpilledMemory: held - s.mem.spillCost}, s.Stats())
	freed, err = s.Spill()
	require.NoError(t, err)
	assert.Zero(t, freed, "nothing held")

	addAll(t, s, recs[2000:], 512)
	assertSorted(t, recs, drain(t, s, 4096))
}

func TestSpillDuringNext(t *testing.T) {
	m, root := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 1<<30)
	recs := binaryKeys(6, 30000)
	addAll(t, s, recs, 4096)
	dst := make([]byte, 4096)
	n, err := s.Next(dst)
	require.NoError(t, err)
	got := decode(t, bytes.Clone(dst[:n]))

	held := s.MemoryUsed()
	freed, err := s.Spill()
	require.NoError(t, err)
	assert.Positive(t, freed)
	assert.Equal(t, held-freed, s.MemoryUsed(), "only the run's read buffer is left")
	assert.Equal(t, int64(1), s.Stats().Runs)
	assert.Len(t, runFiles(t, root), 1)

	got = append(got, drain(t, s, 4096)...)
	assertSorted(t, recs, got)
	assert.Empty(t, runFiles(t, root))
}

func TestNextWithTooSmallBufferConsumesNothing(t *testing.T) {
	m, _ := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 1<<20)
	recs := []rec{{key: []byte("b"), val: make([]byte, 100)}, {key: []byte("a"), val: []byte("x")}}
	addAll(t, s, recs, 1<<20)

	dst := make([]byte, 50)
	n, err := s.Next(dst)
	require.NoError(t, err)
	assert.Equal(t, 10, n, "the small record fits, the large one waits")
	n, err = s.Next(dst)
	var tooLarge *RecordTooLargeError
	require.ErrorAs(t, err, &tooLarge)
	assert.Zero(t, n)
	assert.Equal(t, 8+1+100, tooLarge.Need)
	assert.Contains(t, err.Error(), "at least 109 bytes")

	dst = make([]byte, tooLarge.Need)
	n, err = s.Next(dst)
	require.NoError(t, err)
	assert.Equal(t, []rec{recs[0]}, decode(t, dst[:n]))
	n, err = s.Next(dst)
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestLimitTooSmall(t *testing.T) {
	t.Run("add", func(t *testing.T) {
		m, root := newManager(t, 2<<10, nil)
		s, err := New(m, 4<<10)
		require.NoError(t, err)
		recs := randomRecords(7, 2000, 16, 16)
		var addErr error
		for _, r := range recs {
			if addErr = s.Add(AppendRecord(nil, r.key, r.val)); addErr != nil {
				break
			}
		}
		var limitErr *spill.LimitError
		require.ErrorAs(t, addErr, &limitErr)
		assert.Contains(t, addErr.Error(), "test.limit")
		require.ErrorAs(t, s.Add(encode(recs[:1])), &limitErr, "the broken sort keeps failing")
		_, err = s.Next(make([]byte, 100))
		require.ErrorAs(t, err, &limitErr)

		require.NoError(t, s.Close())
		assert.Empty(t, runFiles(t, root))
		assert.Zero(t, m.Used())
		assert.Zero(t, s.MemoryUsed())
		require.NoError(t, m.Close())
		assert.Empty(t, planDirs(t, root))
	})
	t.Run("explicit spill keeps the records", func(t *testing.T) {
		m, root := newManager(t, 100, nil)
		s := newSorter(t, m, 1<<20)
		recs := randomRecords(8, 200, 16, 16)
		addAll(t, s, recs, 1000)
		held := s.MemoryUsed()
		freed, err := s.Spill()
		var limitErr *spill.LimitError
		require.ErrorAs(t, err, &limitErr)
		assert.Zero(t, freed)
		assert.Equal(t, held, s.MemoryUsed())
		assert.Empty(t, runFiles(t, root))
		assertSorted(t, recs, drain(t, s, 1000)) // still usable, from memory
	})
}

// A sort whose input is a little larger than its budget writes the older half of its records at
// its first spill, not all of them: the rest fits in the chunks that half leaves, so it spills
// once and writes about half a budget. Keys repeat, so the output also shows that records of the
// run and of memory with equal keys come out in the order they were added.
func TestFirstSpillWritesTheOlderHalf(t *testing.T) {
	m, root := newManager(t, 1<<30, nil)
	const budget = 4 << 20
	s := newSorter(t, m, budget)
	recs := randomRecords(21, 120_000, 1, 40) // ~5.4 MB held: 1.3 budgets
	addAll(t, s, recs, 64<<10)
	st := s.Stats()
	require.Equal(t, int64(1), st.Runs)
	assert.Len(t, runFiles(t, root), 1)
	assert.Greater(t, st.SpilledMemory, int64(budget/3), "about half the budget written")
	assert.Less(t, st.SpilledMemory, int64(budget*2/3), "about half the budget written")
	assertSorted(t, recs, drain(t, s, 64<<10))
}

// splitOlder counts the records it moves from the chunks' starts, without reading them: records
// of many sizes, added one by one and by runs, the counts checked against a walk of the chunks;
// rejoin puts the table back as it was.
func TestSplitOlderCountsRecordsAndRejoinRestores(t *testing.T) {
	recs := randomRecords(23, 30_000, 9, 60)
	mt := memTable{arena: arena{chunkSize: 64 << 10}}
	addBatch(t, &mt, encode(recs[:10_000]))
	for _, r := range recs[10_000:] {
		require.NoError(t, mt.add(AppendRecord(nil, r.key, r.val)))
	}
	defer mt.reset()
	walk := func(chunks [][]byte) (n int) {
		for _, c := range chunks {
			for off := 0; off < len(c); off += recordSize(c[off:]) {
				n++
			}
		}
		return n
	}
	chunks, n, arena := slices.Clone(mt.chunks), mt.n, mt.mapped
	old, ok := mt.splitOlder()
	require.True(t, ok)
	assert.Equal(t, walk(old.chunks), old.n)
	assert.Equal(t, walk(mt.chunks), mt.n)
	assert.Equal(t, n, old.n+mt.n)
	assert.InDelta(t, n/2, old.n, float64(n)/4, "about half the records")
	assert.Equal(t, arena, old.mapped+mt.mapped)
	assert.Zero(t, mt.starts[0])
	mt.rejoin(&old)
	assert.Equal(t, chunks, mt.chunks)
	assert.Equal(t, n, mt.n)
	assert.Equal(t, arena, mt.mapped)
	for i := range mt.chunks {
		assert.Equal(t, walk(mt.chunks[:i]), mt.starts[i], "chunk %d", i)
	}
}

// When the older half cannot be written, the records go back where they were: the sort holds
// what it held, in the order they came, and stays usable.
func TestFirstSpillThatFailsKeepsTheRecordsInOrder(t *testing.T) {
	m, root := newManager(t, 1<<10, nil)
	s := newSorter(t, m, 4<<20)
	recs := randomRecords(22, 20_000, 1, 40) // several chunks, under the budget
	addAll(t, s, recs, 64<<10)
	require.Greater(t, len(s.mem.chunks), 2)
	held, chunks := s.MemoryUsed(), len(s.mem.chunks)
	freed, err := s.SpillToRefill()
	var limitErr *spill.LimitError
	require.ErrorAs(t, err, &limitErr)
	assert.Zero(t, freed)
	assert.Equal(t, held, s.MemoryUsed())
	assert.Len(t, s.mem.chunks, chunks)
	assert.Empty(t, runFiles(t, root))
	assertSorted(t, recs, drain(t, s, 64<<10))
}

func TestWriteErrorDuringSpillLeaksNothing(t *testing.T) {
	fsys := errorfs.Wrap(spill.OSFS{}, errorfs.Errno(syscall.EIO, errorfs.OnOp(errorfs.OpWrite)))
	m, root := newManager(t, 1<<30, fsys)
	s, err := New(m, 8<<10)
	require.NoError(t, err)
	recs := randomRecords(9, 2000, 16, 16)
	var addErr error
	for _, r := range recs {
		if addErr = s.Add(AppendRecord(nil, r.key, r.val)); addErr != nil {
			break
		}
	}
	require.ErrorIs(t, addErr, syscall.EIO)
	assert.Contains(t, addErr.Error(), "writing a sorted run")
	assert.Empty(t, runFiles(t, root), "the failed run is released at once")
	assert.Zero(t, m.Used())
	require.NoError(t, s.Close())
	require.NoError(t, m.Close())
	assert.Empty(t, planDirs(t, root))
}

func TestMalformedBatches(t *testing.T) {
	valid := AppendRecord(nil, []byte("key"), []byte("value")) // 16 bytes
	header := func(k, v uint32) []byte {
		return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, k), v)
	}
	cases := []struct {
		name   string
		batch  []byte
		offset int
		reason string
	}{
		{"truncated header", []byte{1, 0, 0}, 0, "truncated record header"},
		{"key past the end", append(header(5, 0), 'a', 'b'), 0, "runs past the end"},
		{"value past the end", append(header(1, 4), 'k', 'v'), 0, "runs past the end"},
		{"key length over MaxInt32", append(header(math.MaxInt32+1, 0), make([]byte, 64)...), 0, "key length 2147483648"},
		{"value length over MaxInt32", header(0, math.MaxUint32), 0, "value length 4294967295"},
		{"both lengths at MaxInt32", header(math.MaxInt32, math.MaxInt32), 0, "runs past the end"},
		{"valid record then garbage", append(bytes.Clone(valid), 0xde, 0xad, 0xbe), 16, "truncated record header"},
		{"valid record then bad lengths", append(bytes.Clone(valid), header(0xffffffff, 0)...), 16, "key length"},
		// As long as two valid records: one stride of validate's check for a batch of one size.
		{"valid records then bad lengths, a record long", append(append(bytes.Clone(valid), valid...), append(header(0xffffffff, 0), make([]byte, 8)...)...), 32, "key length"},
		{"valid records then a longer one, a record long", append(append(bytes.Clone(valid), valid...), append(header(3, 6), "keyvalue"...)...), 32, "runs past the end"},
	}
	m, root := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 32) // any record added would be visible in memory or on disk
	for _, tc := range cases {
		err := s.Add(tc.batch)
		var be *BatchError
		require.ErrorAs(t, err, &be, tc.name)
		assert.Equal(t, tc.offset, be.Offset, tc.name)
		assert.Contains(t, err.Error(), tc.reason, tc.name)
		assert.Contains(t, err.Error(), "at byte", tc.name)
	}
	assert.Zero(t, s.Stats().Records)
	assert.Zero(t, s.MemoryUsed())
	assert.Empty(t, planDirs(t, root))

	recs := randomRecords(10, 100, 4, 4)
	addAll(t, s, recs, 64)
	assertSorted(t, recs, drain(t, s, 64))
}

func TestAddAfterNextAndUseAfterClose(t *testing.T) {
	m, _ := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 1<<20)
	require.NoError(t, s.Add(encode([]rec{{key: []byte("a")}})))
	_, err := s.Next(make([]byte, 1))
	require.ErrorAs(t, err, new(*RecordTooLargeError))
	require.ErrorIs(t, s.Add(encode([]rec{{key: []byte("b")}})), ErrAddAfterNext)

	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Add(nil), ErrClosed)
	_, err = s.Next(nil)
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.Spill()
	require.ErrorIs(t, err, ErrClosed)
}

func TestNewRejectsBadArguments(t *testing.T) {
	m, _ := newManager(t, 1<<30, nil)
	for _, budget := range []int64{0, -1} {
		_, err := New(m, budget)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Contains(t, err.Error(), "positive")
	}
	_, err := New(nil, 1)
	require.ErrorAs(t, err, new(*ConfigError))
}

func TestCloseWithRunsHeldReleasesThem(t *testing.T) {
	m, root := newManager(t, 1<<30, nil)
	s, err := New(m, 4<<10)
	require.NoError(t, err)
	addAll(t, s, randomRecords(11, 3000, 16, 16), 1024)
	_, err = s.Next(make([]byte, 100)) // merge under way: runs open
	require.NoError(t, err)
	require.NotEmpty(t, runFiles(t, root))
	require.NoError(t, s.Close())
	assert.Empty(t, runFiles(t, root))
	assert.Zero(t, m.Used())
}

func TestConcurrentSpillWhileAdding(t *testing.T) {
	m, _ := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 1<<20)
	recs := binaryKeys(12, 20000)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				if _, err := s.Spill(); err != nil {
					t.Error(err)
					return
				}
				_ = s.MemoryUsed()
			}
		}
	})
	addAll(t, s, recs, 512)
	got := drain(t, s, 2048)
	close(done)
	wg.Wait()
	assertSorted(t, recs, got)
	assert.Positive(t, s.Stats().Runs)
}

func FuzzAdd(f *testing.F) {
	f.Add([]byte{})
	f.Add(encode([]rec{{key: []byte("b"), val: []byte("1")}, {key: []byte("a"), val: []byte("2")}, {key: []byte("b")}}))
	f.Add([]byte{1, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add(append(encode([]rec{{key: []byte{0, 0xff}, val: nil}}), 2, 0, 0, 0, 0, 0, 0, 0, 'x'))
	roots, err := spill.NewRoots([]string{f.TempDir()})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, batch []byte) {
		m, err := spill.New(spill.Config{Roots: roots, Limit: 1 << 20})
		require.NoError(t, err)
		defer m.Close()
		s, err := New(m, 256) // small enough that many inputs spill
		require.NoError(t, err)
		defer s.Close()
		if err := s.Add(batch); err != nil {
			var be *BatchError
			require.ErrorAs(t, err, &be)
			require.True(t, be.Offset >= 0 && be.Offset < len(batch))
			require.Zero(t, s.Stats().Records)
			require.Zero(t, s.MemoryUsed())
			return
		}
		assertSorted(t, decode(t, batch), drain(t, s, 64))
	})
}

// addGranted adds batch as the JVM does, held to a grant: it grants the sort what it holds, then,
// each time AddWithin stops short, what it says the next record needs, and checks that the sort
// never holds more than it was granted.
func addGranted(t *testing.T, s *Sorter, batch []byte) {
	t.Helper()
	limit := s.MemoryUsed()
	for off := 0; off < len(batch); {
		taken, need, err := s.AddWithin(batch[off:], limit)
		require.NoError(t, err)
		require.LessOrEqual(t, s.MemoryUsed(), limit, "the sort holds no more than its grant")
		off += taken
		if off < len(batch) {
			require.Greater(t, need, limit, "stopped short: the next record needs more than the grant")
			limit = need
		}
	}
}

// AddWithin never grows the sort's memory past its limit, the grant of the JVM, whatever the
// chunk size (budget) and the record sizes, and says what to grant for it to go on.
func TestAddWithinHoldsNoMoreThanItsLimit(t *testing.T) {
	for _, budget := range []int64{1 << 10, 64 << 10, 64 << 20} {
		m, _ := newManager(t, 1<<30, nil)
		s := newSorter(t, m, budget)
		var all []rec
		for round, valueLen := range []int{0, 7, 300, 5000} {
			var recs []rec
			for i := 0; i < 50; i++ {
				recs = append(recs, rec{key: []byte(fmt.Sprintf("k%06d-%d", i, round)), val: bytes.Repeat([]byte{1}, valueLen)})
			}
			addGranted(t, s, encode(recs))
			all = append(all, recs...)
		}
		assert.Equal(t, reference(all), drain(t, s, 1<<20), "budget %d", budget)
	}
}

// A batch that fits in the last chunk's room grows the sort by its index entries alone, and
// AddWithin asks for no more: the JVM does not ask Spark for a chunk the add will not take.
func TestAddWithinAsksForWhatTheRestNeeds(t *testing.T) {
	m, _ := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 256<<20)
	require.NoError(t, s.Add(encode([]rec{{key: []byte("a"), val: []byte("b")}})))
	first := encode([]rec{{key: []byte("k1"), val: []byte("v1")}})
	batch := encode([]rec{{key: []byte("k1"), val: []byte("v1")}, {key: []byte("k2"), val: []byte("v2")}})
	before := s.MemoryUsed()
	taken, need, err := s.AddWithin(batch, before+entrySize)
	require.NoError(t, err)
	assert.Equal(t, len(first), taken, "one entry granted: one record taken")
	assert.Equal(t, before+2*entrySize, need)
	assert.Equal(t, before+entrySize, s.MemoryUsed())
	taken, need, err = s.AddWithin(batch[taken:], need)
	require.NoError(t, err)
	assert.Equal(t, len(batch)-len(first), taken)
	assert.Zero(t, need)
	assert.Equal(t, before+2*entrySize, s.MemoryUsed())
}

// Stopped short, AddWithin asks for what the rest of its batch needs, not its next record alone:
// granted that, it takes the rest in one call, so the JVM asks Spark once per batch, in large steps.
func TestAddWithinAsksForTheRestOfItsBatch(t *testing.T) {
	m, _ := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 256<<20)
	require.NoError(t, s.Add(encode([]rec{{key: []byte("a"), val: []byte("b")}})))
	for _, uniform := range []bool{true, false} {
		var recs []rec
		for i := 0; i < 3000; i++ {
			val := bytes.Repeat([]byte{2}, 100)
			if !uniform {
				val = val[:i%100]
			}
			recs = append(recs, rec{key: []byte(fmt.Sprintf("k%06d", i)), val: val})
		}
		batch := encode(recs)
		before := s.MemoryUsed()
		taken, need, err := s.AddWithin(batch, before)
		require.NoError(t, err)
		require.Less(t, taken, len(batch))
		rest := len(batch) - taken
		assert.Greater(t, need, before+int64(rest), "uniform %v: the rest's bytes and entries, not one record's", uniform)
		assert.LessOrEqual(t, need, before+int64(rest)+int64(len(recs)+maxPending)*entrySize+int64(offheap.Size(s.mem.chunkSize)), "uniform %v", uniform)
		n, again, err := s.AddWithin(batch[taken:], need)
		require.NoError(t, err)
		assert.Equal(t, rest, n, "uniform %v: granted what it asked, it takes the rest", uniform)
		assert.Zero(t, again)
		assert.LessOrEqual(t, s.MemoryUsed(), need)
	}
	// A record larger than the room needs a new chunk: nothing is mapped until it is granted.
	big := encode([]rec{{key: []byte("k3"), val: make([]byte, s.mem.room())}})
	before := s.MemoryUsed()
	taken, need, err := s.AddWithin(big, before)
	require.NoError(t, err)
	assert.Zero(t, taken)
	assert.GreaterOrEqual(t, need, before+entrySize+int64(offheap.Size(max(s.mem.newChunkSize(), len(big)))))
	assert.Equal(t, before, s.MemoryUsed(), "nothing taken, nothing mapped")
}

// A small sort under a large budget holds a small first chunk, not the budget's full chunk; the
// chunks then double up to the full size, and a spill keeps them full-size.
func TestSmallSortAllocatesLittle(t *testing.T) {
	m, _ := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 1<<30)
	require.NoError(t, s.Add(encode([]rec{{key: []byte("k"), val: []byte("v")}})))
	assert.Equal(t, int64(firstChunk)+entrySize+s.mem.spillCost, s.MemoryUsed(), "a first chunk, an entry, the spill's writer reserved")

	recs := randomRecords(7, 20000, 16, 200) // about 2.3 MB
	addAll(t, s, recs, 1<<20)
	for i, c := range s.mem.chunks {
		assert.Equal(t, min(firstChunk<<i, maxChunk), cap(c), "chunk %d: chunks of 64 KiB, 128 KiB ... 2 MiB, not 4 MiB each from the start", i)
	}
	assert.Equal(t, maxChunk, s.mem.newChunkSize(), "doubled up to the full chunk")
	assertSorted(t, append([]rec{{key: []byte("k"), val: []byte("v")}}, recs...), drain(t, s, 1<<20))
	require.NoError(t, s.Close())
}

// The in-memory sort (a radix sort on prefixes that skip the bytes all keys share) against a
// stable reference, on key shapes that each take one of its paths: integer-like keys of one
// length behind a shared head (the prefix decides), the same with duplicates (ties by insertion
// order), keys that differ only past the prefix or by trailing zero bytes (the prefix's padding),
// keys that are prefixes of each other, a shared head longer than the tracked maximum, and keys
// that tie past the prefix (the radix sort goes on with the keys' next bytes).
func TestInMemorySortKeyShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	head := bytes.Repeat([]byte{0x01, 0x80}, maxTracked) // more shared bytes than tracked
	shapes := []struct {
		name string
		key  func() []byte
	}{
		{"int keys", func() []byte {
			return binary.BigEndian.AppendUint64([]byte{1}, uint64(r.IntN(1<<20))^1<<63)
		}},
		{"int keys, many equal", func() []byte {
			return binary.BigEndian.AppendUint64([]byte{1}, uint64(r.IntN(50)))
		}},
		// Seven varying bytes of nine: the one spare prefix byte cannot number 20000 records,
		// so the ties go to the sort by position.
		{"int keys, many equal, one spare prefix byte", func() []byte {
			return binary.BigEndian.AppendUint64([]byte{1}, uint64(r.IntN(40))*0x01010101010101)
		}},
		// Keys of two lengths: a null written as its flag alone, as the SQL encoder writes a string
		// key's null (a fixed-width key's it pads), the others nine bytes.
		{"int keys with nulls, many equal", func() []byte {
			if r.IntN(5) == 0 {
				return []byte{0}
			}
			return binary.BigEndian.AppendUint64([]byte{1}, uint64(r.IntN(50)))
		}},
		{"differ past the prefix", func() []byte {
			return append(bytes.Repeat([]byte{7}, 3+8+r.IntN(3)), byte(r.IntN(3)), byte(r.IntN(256)))
		}},
		{"trailing zeros", func() []byte {
			return append([]byte{9, byte(r.IntN(3))}, make([]byte, r.IntN(12))...)
		}},
		{"prefixes of each other", func() []byte {
			return bytes.Repeat([]byte{byte(r.IntN(2))}, r.IntN(20))
		}},
		{"long shared head", func() []byte {
			return append(append([]byte(nil), head...), randBytes(r, r.IntN(10))...)
		}},
		// Keys of SQL columns (null flag, sign-flipped big-endian) whose first column ties in
		// runs larger than radixCutoff, with equal keys, and whose 8-byte windows past the
		// prefix are often all equal (the high bytes of small integers).
		{"columns, large ties", func() []byte {
			return sqlColumns(uint64(r.IntN(20)), uint64(r.IntN(300)), uint64(r.IntN(4)), uint64(r.IntN(3)))
		}},
		// The same with runs of equal prefixes smaller than radixCutoff.
		{"columns, small ties", func() []byte {
			return sqlColumns(uint64(r.IntN(2000)), uint64(r.IntN(3)), uint64(r.IntN(2)), uint64(r.IntN(2)))
		}},
		// Ten varying bytes in five columns (two in each), fewer than 8000 distinct keys: ties
		// past the varying bytes the prefix holds.
		{"columns, ties past the varying bytes", func() []byte {
			col := func() uint64 { return uint64(r.IntN(3)<<8 | r.IntN(2)) }
			return sqlColumns(col(), col(), col(), col(), col())
		}},
		// Keys of zero, one and 0xff bytes of every length up to 40 behind a shared head: keys
		// ending at and around every window edge, zero bytes there ("ab" against "ab\x00"), and
		// keys that are prefixes of others, in long runs of equal 8-byte windows.
		{"short alphabet, every length", func() []byte {
			key := []byte{5, 5, 5}
			for range r.IntN(41) {
				key = append(key, []byte{0, 0, 0, 1, 0xff}[r.IntN(5)])
			}
			return key
		}},
		// Segments of eight equal bytes, cut anywhere: equal windows, then a difference.
		{"equal windows, cut anywhere", func() []byte {
			var key []byte
			for range 1 + r.IntN(4) {
				key = append(key, bytes.Repeat([]byte{[]byte{0, 7, 0xff}[r.IntN(3)]}, 8)...)
			}
			return key[:r.IntN(len(key)+1)]
		}},
	}
	for _, shape := range shapes {
		t.Run(shape.name, func(t *testing.T) {
			m, _ := newManager(t, 1<<30, nil)
			s := newSorter(t, m, 64<<20)
			recs := make([]rec, 20000)
			for i := range recs {
				recs[i] = rec{key: shape.key(), val: binary.BigEndian.AppendUint32(nil, uint32(i))}
			}
			addAll(t, s, recs, 4096)
			assertSorted(t, recs, drain(t, s, 4096))
			require.NoError(t, s.Close())
		})
	}
}

// sqlColumns is a sort key of non-null bigint columns as the Scala side encodes them.
func sqlColumns(values ...uint64) []byte {
	var key []byte
	for _, v := range values {
		key = binary.BigEndian.AppendUint64(append(key, 1), v^1<<63)
	}
	return key
}

// The insertion ordinal goes into the prefix only where it cannot change the order: keys of one
// length, in the prefix bytes past every key, and only as many records as those bytes number.
func TestOrdinalFitsOnlyPastEveryKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys [][]byte
		fits bool
	}{
		{"one long key, low byte varies", [][]byte{sqlColumns(1), sqlColumns(2), sqlColumns(2)}, true},
		{"all keys equal", [][]byte{sqlColumns(7), sqlColumns(7)}, true},
		{"keys of two lengths", [][]byte{sqlColumns(1), {0}, sqlColumns(2)}, false},
		// Spare bytes, but "\x05" sorts before "\x05\x00": the insertion order must not decide.
		{"a key and its zero-padded extension", [][]byte{{5, 0}, {5}}, false},
		{"eight varying bytes", [][]byte{make([]byte, 9), bytes.Repeat([]byte{1}, 9)}, false},
		{"seven varying bytes, 256 records", repeatKeys(256, make([]byte, 9), append([]byte{0, 0}, bytes.Repeat([]byte{1}, 7)...)), true},
		{"seven varying bytes, 257 records", repeatKeys(257, make([]byte, 9), append([]byte{0, 0}, bytes.Repeat([]byte{1}, 7)...)), false},
		{"keys longer than the bytes tracked", [][]byte{make([]byte, maxTracked+9), append(make([]byte, maxTracked+8), 1)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mt := tableOf(t, tc.keys)
			w := mt.window()
			assert.Equal(t, tc.fits, mt.indexer().ordinalFits(&w))
		})
	}
}

// tableOf is a memTable holding a record of each key and no value, reset when the test ends.
func tableOf(t *testing.T, keys [][]byte) *memTable {
	mt := &memTable{arena: arena{chunkSize: maxChunk}}
	t.Cleanup(mt.reset)
	for _, k := range keys {
		require.NoError(t, mt.add(AppendRecord(nil, k, nil)))
	}
	return mt
}

// repeatKeys is n keys, a and b in turn.
func repeatKeys(n int, a, b []byte) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = [][]byte{a, b}[i%2]
	}
	return keys
}

// At its bound (one spare prefix byte, 256 records) the ordinal path still sorts stably: equal
// keys come out in insertion order, the last record's ordinal being 255.
func TestOrdinalPathAtItsBound(t *testing.T) {
	a, b := make([]byte, 9), append([]byte{0, 0}, bytes.Repeat([]byte{1}, 7)...)
	recs := make([]rec, 256)
	for i := range recs {
		recs[i] = rec{key: [][]byte{b, a}[i%2], val: binary.BigEndian.AppendUint32(nil, uint32(i))}
	}
	mt := memTable{arena: arena{chunkSize: maxChunk}}
	for _, r := range recs {
		require.NoError(t, mt.add(AppendRecord(nil, r.key, r.val)))
	}
	w := mt.window()
	require.True(t, mt.indexer().ordinalFits(&w), "the case must take the ordinal path")
	mt.reset()

	m, _ := newManager(t, 1<<30, nil)
	s := newSorter(t, m, 64<<20)
	addAll(t, s, recs, 4096)
	assertSorted(t, recs, drain(t, s, 4096))
	require.NoError(t, s.Close())
}

// narrowRows are n records as the SQL sort spills a narrow row (a long key, an UnsafeRow of a
// long and a decimal: 41 bytes each), in random order; with odd, every 100th row has a value one
// byte longer, so no run holds records of one size.
func narrowRows(n int, odd bool) []rec {
	r := rand.New(rand.NewPCG(41, 1))
	recs := make([]rec, n)
	for i := range recs {
		k := uint64(r.IntN(n))
		val := binary.LittleEndian.AppendUint64(make([]byte, 8), k)
		val = binary.LittleEndian.AppendUint64(val, uint64(100*(1+r.IntN(50))))
		if odd && i%100 == 0 {
			val = append(val, 0)
		}
		recs[i] = rec{key: sqlLongKey(nil, k, false), val: val}
	}
	return recs
}

// Runs of records of one size are written shuffled, with a codec: they take far fewer bytes on
// disk than the same rows when some are of another size, and read back the same. Without a codec
// nothing is shuffled.
func TestRunsOfRecordsOfOneSizeAreShuffled(t *testing.T) {
	spilled := map[bool]Stats{}
	for _, odd := range []bool{false, true} {
		m, _ := newManager(t, 1<<30, nil)
		s := newSorter(t, m, 256<<10)
		recs := narrowRows(60_000, odd)
		addAll(t, s, recs, 16<<10)
		assertSorted(t, recs, drain(t, s, 8192))
		spilled[odd] = s.Stats()
		require.Greater(t, s.Stats().Runs, int64(5))
	}
	one, several := spilled[false], spilled[true]
	t.Logf("%s: %d runs of one size, %d bytes on disk for %d; %d runs of several sizes, %d bytes for %d",
		testFormat.name, one.Runs, one.SpilledBytes, one.SpilledLogicalBytes, several.Runs, several.SpilledBytes, several.SpilledLogicalBytes)
	if testFormat.format.Codec == chunkfile.None {
		assert.InDelta(t, float64(several.SpilledBytes)/float64(several.SpilledLogicalBytes), float64(one.SpilledBytes)/float64(one.SpilledLogicalBytes), 0.01)
		return
	}
	most := 0.6 // lz4 shrinks planes about 2.3 times more here
	if testFormat.format.Codec != chunkfile.LZ4 {
		most = 0.9 // zstd finds more of the repeats in rows as they are
	}
	assert.Less(t, float64(one.SpilledBytes)/float64(one.SpilledLogicalBytes), most*float64(several.SpilledBytes)/float64(several.SpilledLogicalBytes))
}

// validate finds a batch whose records all have one header, and only such a batch.
func TestValidateFindsBatchesOfOneRecordSize(t *testing.T) {
	rec := func(k, v string) []byte { return AppendRecord(nil, []byte(k), []byte(v)) }
	cat := func(recs ...[]byte) []byte { return bytes.Join(recs, nil) }
	for _, tc := range []struct {
		name  string
		batch []byte
		want  int
	}{
		{"empty", nil, 0},
		{"one record", rec("key", "value"), 16},
		{"three of one size", cat(rec("k1", "v1"), rec("k2", "v2"), rec("k3", "v3")), 12},
		{"one size, another split", cat(rec("k1", "v1"), rec("k", "v12")), 0},
		{"sizes that differ", cat(rec("k1", "v1"), rec("k2", "v22")), 0},
		{"empty records", cat(rec("", ""), rec("", "")), headerSize},
	} {
		got, err := validate(tc.batch)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
}

// addRun takes records up to the last chunk's room and the budget, no further, and leaves the
// table as adding them one by one does, whether or not it is told they all have one size, for
// keys whose tracked bytes end inside a word, at a word's end, or past maxTracked.
func TestAddRunStopsAtTheRoomAndTheBudget(t *testing.T) {
	for _, keyLen := range []int{3, 8, 9, 20, maxTracked + 6} {
		for _, uniform := range []bool{false, true} {
			t.Run(fmt.Sprintf("key=%d/uniform=%t", keyLen, uniform), func(t *testing.T) {
				testAddRunStops(t, keyLen, uniform)
			})
		}
	}
}

func testAddRunStops(t *testing.T, keyLen int, uniform bool) {
	size := headerSize + keyLen + 8 // each record's bytes
	var batch []byte
	for i := range 100 {
		// Keys that differ in a few bytes only, the last among them, so that the tracked
		// differences say which.
		key := bytes.Repeat([]byte{0x5a}, keyLen)
		key[keyLen-1] ^= byte(i)
		key[keyLen/2] ^= byte(i % 3)
		batch = AppendRecord(batch, key, binary.LittleEndian.AppendUint64(nil, uint64(i)))
	}
	given := 0
	if uniform {
		given = size
	}
	for _, tc := range []struct {
		name        string
		room        int   // bytes left in the last chunk after the first record
		limitAfter  int64 // entries the budget has room for after the first record
		wantRecords int
	}{
		{"the room ends it", 10*size + size/2, 1000, 10},
		{"the budget ends it", 1000 * size, 7, 7},
		{"the whole batch", 1000 * size, 1000, 99},
		{"no room for one", size - 1, 1000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			one, each := memTable{arena: arena{chunkSize: size + tc.room}}, memTable{arena: arena{chunkSize: size + tc.room}}
			defer one.reset()
			defer each.reset()
			require.NoError(t, one.add(batch[:size]))
			chunk := &one.chunks[0][0]
			limit := one.memory() + tc.limitAfter*entrySize
			taken, records := one.addRun(batch[size:], limit, given)
			assert.Equal(t, tc.wantRecords, records)
			assert.Equal(t, tc.wantRecords*size, taken)
			assert.Same(t, chunk, &one.chunks[0][0], "the chunk moved")
			assert.LessOrEqual(t, one.memory(), limit)
			for off := 0; off < size+taken; off += size {
				require.NoError(t, each.add(batch[off:off+size]))
			}
			assert.Equal(t, each.chunks, one.chunks)
			assert.Equal(t, each.n, one.n)
			assert.Equal(t, each.diff, one.diff)
			assert.Equal(t, [4]int{each.minKey, each.maxKey, each.minRec, each.maxRec}, [4]int{one.minKey, one.maxKey, one.minRec, one.maxRec})
		})
	}
}
