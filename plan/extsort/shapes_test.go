package extsort

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/plan/offheap"
	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/errorfs"
)

// shape is how orderShapes lays out a sort's input: how long its stretches in key order run, how
// often rows come out of line among them, how often keys come in no order at all.
type shape struct {
	rows       int
	stretchLen int  // a stretch's rows at most, before it goes on or starts below
	outOfLine  int  // in 1000 rows
	noOrder    int  // blocks of keys in no order, in 1000 stretches
	odd        bool // some values longer
	varKeys    bool // keys of many lengths: the long key's trailing zero bytes dropped
}

// orderShapes is rows whose keys come as a sort's input does from shuffled blocks of tables stored
// by the key, and worse: stretches in key order, with ties, that go on or start below; rows out of
// line among them (nulls first, nulls last, rows that came late, ties, spikes above), alone or a
// few in a row, sometimes more than are held apart; now and then a block of keys in no order. The
// values carry the row's ordinal, so the reference's order checks stability too.
func orderShapes(r *rand.Rand, s shape) []rec {
	recs := make([]rec, 0, s.rows)
	push := func(key []byte) {
		val := binary.LittleEndian.AppendUint64(make([]byte, 0, 32), uint64(len(recs)))
		if s.odd && r.IntN(5) == 0 {
			val = append(val, make([]byte, 1+r.IntN(20))...)
		}
		recs = append(recs, rec{key: key, val: val})
	}
	long := func(v uint64) []byte {
		k := sqlLongKey(nil, v, false)
		if s.varKeys { // dropping trailing zeros keeps the keys' order
			for len(k) > 1 && k[len(k)-1] == 0 {
				k = k[:len(k)-1]
			}
		}
		return k
	}
	cur := r.Uint64N(1 << 40)
	for len(recs) < s.rows {
		if r.IntN(1000) < s.noOrder {
			for range 1 + r.IntN(3000) {
				push(long(r.Uint64N(cur + 1000)))
			}
		}
		if r.IntN(3) == 0 {
			cur = r.Uint64N(cur + 1) // a stretch that starts below (or at) the last key
		}
		maxStep := []uint64{0, 1, 3, 1 << 20}[r.IntN(4)]
		for range 1 + r.IntN(s.stretchLen) {
			cur += r.Uint64N(maxStep + 1)
			push(long(cur))
			if r.IntN(1000) >= s.outOfLine {
				continue
			}
			count := 1 + r.IntN(1+r.IntN(12)) // mostly one, now and then past maxPending
			kind := r.IntN(5)
			for range count {
				switch kind {
				case 0:
					push(nullKey(0))
				case 1:
					push(nullKey(2))
				case 2: // came late, ties with an older row now and then
					push(long(r.Uint64N(cur + 1)))
				case 3: // a spike above
					push(long(cur + 1 + r.Uint64N(1<<30)))
				case 4:
					push(long(cur))
				}
			}
		}
	}
	return recs
}

// shapesSeed is the seed of TestOrderShapesAtRandom's inputs: SPILLWAY_SHAPES_SEED when set (to
// look further, or to run a failure again), else one for each of the suite's run formats, so
// that the suite's runs sort different inputs.
func shapesSeed(t *testing.T) uint64 {
	if s := os.Getenv("SPILLWAY_SHAPES_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "SPILLWAY_SHAPES_SEED")
		return seed
	}
	h := fnv.New64a()
	h.Write([]byte(testFormat.name))
	return h.Sum64() % 1_000_000
}

// The sort against a stable reference, on inputs whose order the memory table reads in every way
// it can (stretches merged by blocks, rows held apart, stretches frozen when order is lost late,
// keys in no order), of a few rows and past indexedFirst, added by batches of any size, spilled
// when the budget says or when asked between batches (whole or the older half), and read into buffers of any size with a spill of Spark's in the middle of the merge; a
// third of the spills asked fail (EIO), which leaves the records in memory; with no more memory
// mapped than counted at any point, and no add growing past the bound the JVM reserves for it.
func TestOrderShapesAtRandom(t *testing.T) {
	seed := shapesSeed(t)
	cases := 8
	if n, err := strconv.Atoi(os.Getenv("SPILLWAY_SHAPES_CASES")); err == nil {
		cases = n
	}
	for c := range cases {
		r := rand.New(rand.NewPCG(seed, uint64(c)))
		s := shape{
			rows:       []int{2_000, 30_000, indexedFirst + 1 + r.IntN(80_000)}[r.IntN(3)],
			stretchLen: []int{40, 2_000, 40_000}[r.IntN(3)],
			outOfLine:  []int{0, 1, 20, 50}[r.IntN(4)],
			noOrder:    []int{0, 0, 50}[r.IntN(3)],
			odd:        r.IntN(2) == 0,
			varKeys:    r.IntN(3) == 0,
		}
		budget := []int64{64 << 20, 64 << 20, 3 << 20, 1 << 20}[r.IntN(4)]
		perBatch := []int{50, 1_000, 20_000}[r.IntN(3)] // rows a batch, on average
		// Spills asked between batches (the older half's or whole, at random) after these rows;
		// none in half the cases, else few sorts would hold more than indexedFirst rows in memory.
		var spillAfter []int
		if r.IntN(2) == 0 {
			for range 1 + r.IntN(3) {
				spillAfter = append(spillAfter, r.IntN(s.rows))
			}
			slices.Sort(spillAfter)
		}
		_ = r.IntN(2) // drawn still (once whether runs were pipelined), so each seed makes its cases
		t.Run(fmt.Sprintf("seed=%d/case=%d", seed, c), func(t *testing.T) {
			t.Logf("%+v, budget %d", s, budget)
			recs := orderShapes(r, s)
			var failing atomic.Bool // a third of the spills asked fail: their writes get EIO
			m, _ := newManager(t, 1<<30, errorfs.Wrap(spill.OSFS{}, errorfs.Errno(syscall.EIO, errorfs.OnOp(errorfs.OpWrite), errorfs.While(&failing))))
			spillAsked := func(call func() (int64, error)) {
				failing.Store(r.IntN(3) == 0)
				_, err := call()
				if failing.Swap(false) && err != nil { // nil when nothing was written
					require.ErrorIs(t, err, syscall.EIO)
					return
				}
				require.NoError(t, err)
			}
			mappedBefore := offheap.Mapped()
			sorter := newSorter(t, m, budget)
			var batch []byte
			inBatch := 0
			for i, rc := range recs {
				batch = AppendRecord(batch, rc.key, rc.val)
				if inBatch++; i < len(recs)-1 && r.IntN(perBatch) != 0 {
					continue
				}
				addGranted(t, sorter, batch) // never past what it asks for
				batch, inBatch = batch[:0], 0
				checkMemory(t, sorter, mappedBefore, "adding")
				if len(spillAfter) > 0 && i >= spillAfter[0] {
					spillAfter = spillAfter[1:]
					spillAsked(func() (int64, error) {
						if r.IntN(2) == 0 {
							return sorter.SpillToRefill()
						}
						return sorter.Spill()
					})
					checkMemory(t, sorter, mappedBefore, "after a spill")
				}
			}
			nextsToSpill, nexts := r.IntN(200), 0
			got := drainEach(t, sorter, 100+r.IntN(64<<10), func() {
				if nexts++; nexts == nextsToSpill {
					spillAsked(sorter.Spill)
				}
				checkMemory(t, sorter, mappedBefore, "reading")
			})
			assertSorted(t, recs, got)
		})
	}
}
