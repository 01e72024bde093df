package extsort

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// orderArena holds records of keys and vals back to back in one chunk, as add leaves them, and
// returns it with each record's ref.
func orderArena(keys [][]byte, val func(i int) []byte) (*arena, []ref) {
	var c []byte
	refs := make([]ref, len(keys))
	for i, k := range keys {
		v := val(i)
		refs[i] = ref{i: i, pos: uint64(len(c))}
		c = binary.LittleEndian.AppendUint32(c, uint32(len(k)))
		c = binary.LittleEndian.AppendUint32(c, uint32(len(v)))
		c = append(append(c, k...), v...)
	}
	return &arena{chunks: [][]byte{c}, starts: []int{0}, n: len(keys)}, refs
}

func noVal(int) []byte { return nil }

// stretchLen is a stretch's length that observe cannot take for late records or spikes.
const stretchLen = maxPending + 2

// observed is the order of keys observed one by one, the records pending taken as stretches'
// starts at the end.
func observed(keys [][]byte) orderTracker {
	a, refs := orderArena(keys, noVal)
	var t orderTracker
	for i, r := range refs {
		if !t.observe(a, r, keys[i]) {
			break
		}
	}
	t.startPendingStretches(a)
	return t
}

// longKeys is the SQL long keys of vs.
func longKeys(vs ...int) [][]byte {
	keys := make([][]byte, len(vs))
	for i, v := range vs {
		keys[i] = sqlLongKey(nil, uint64(v), false)
	}
	return keys
}

// upTo is from, from+1, ..., to-1.
func upTo(from, to int) []int {
	var vs []int
	for v := from; v < to; v++ {
		vs = append(vs, v)
	}
	return vs
}

func ordinals(rs []ref) []int {
	is := make([]int, len(rs))
	for k, r := range rs {
		is[k] = r.i
	}
	return is
}

func TestOrderTrackerNotesStretchesHolesAndSpikes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		keys       []int
		breaks     []int
		holes      []int
		outOfOrder bool
	}{
		{name: "in order", keys: upTo(0, 200)},
		{name: "equal keys", keys: make([]int, 100)},
		{name: "two stretches", keys: append(upTo(0, 100), upTo(0, 100)...), breaks: []int{100}},
		{name: "a late record is a hole", keys: slices.Concat(upTo(0, 50), []int{5}, upTo(50, 100)), holes: []int{50}},
		{name: "maxPending late records are holes",
			keys:  slices.Concat(upTo(10, 50), make([]int, maxPending), upTo(50, 100)),
			holes: upTo(40, 40+maxPending)},
		{name: "a spike is a hole", keys: slices.Concat(upTo(0, 50), []int{1000}, upTo(50, 100)), holes: []int{50}},
		{name: "maxPending spikes are holes",
			keys:  slices.Concat(upTo(0, 50), upTo(1000, 1000+maxPending), upTo(50, 100)),
			holes: upTo(50, 50+maxPending)},
		{name: "a fall below more than maxPending records starts a stretch",
			keys:   slices.Concat(upTo(100, 200), upTo(0, maxPending+1), upTo(200, 300)),
			breaks: []int{100}},
		{name: "too many holes", keys: slices.Repeat([]int{1, 0}, 1000), outOfOrder: true},
		{name: "stretches past maxBreaks", keys: slices.Repeat(upTo(0, stretchLen), maxBreaks+10), outOfOrder: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := observed(longKeys(tc.keys...))
			assert.Equal(t, tc.outOfOrder, got.outOfOrder)
			if tc.outOfOrder {
				assert.Zero(t, got.frozen, "out of order before indexedFirst: nothing frozen")
				assert.Empty(t, got.breaks)
				assert.Empty(t, got.holes)
				return
			}
			assert.Equal(t, tc.breaks, got.breaks, "breaks")
			assert.Equal(t, tc.holes, nilIfEmpty(ordinals(got.holes)), "holes")
			assert.Empty(t, got.pending)
		})
	}
}

func nilIfEmpty(is []int) []int {
	if len(is) == 0 {
		return nil
	}
	return is
}

func TestOrderTrackerGivesUpOnKeysInNoOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]int, 20_000)
	for i := range keys {
		keys[i] = r.IntN(1 << 30)
	}
	a, refs := orderArena(longKeys(keys...), noVal)
	var tr orderTracker
	stopped := -1
	for i, ref := range refs {
		if !tr.observe(a, ref, keyOf(a.record(entry{pos: ref.pos}))) {
			stopped = i
			break
		}
	}
	require.Positive(t, stopped, "keys in no order put the input out of order")
	assert.Less(t, stopped, 5000, "within a few thousand records")
	assert.True(t, tr.outOfOrder)
	assert.Equal(t, len(refs), tr.indexed(len(refs)), "every record counts an entry")
}

func TestOrderTrackerFreezesPastIndexedFirst(t *testing.T) {
	n := indexedFirst + 100
	keys := append(upTo(0, n), slices.Repeat(upTo(0, stretchLen), lazyBreaks+10)...)
	got := observed(longKeys(keys...))
	require.True(t, got.outOfOrder)
	assert.Greater(t, got.frozen, indexedFirst, "the records in order before stay in their stretches")
	assert.Len(t, got.breaks, lazyBreaks)
	assert.Equal(t, indexedFirst+len(keys)-got.frozen, got.indexed(len(keys)),
		"indexedFirst entries for the frozen records, one for each after")
}

// orderedKeys is n keys mostly in order, in stretches, with late records and spikes.
func orderedKeys(r *rand.Rand, n int) []int {
	keys := make([]int, 0, n)
	v := 0
	for len(keys) < n {
		switch p := r.IntN(100); {
		case p < 2: // a new stretch
			v = r.IntN(v + 1)
		case p < 4: // late records
			for range r.IntN(maxPending + 2) {
				keys = append(keys, r.IntN(v+1))
			}
		case p < 6: // spikes
			for range r.IntN(maxPending + 2) {
				keys = append(keys, v+1+r.IntN(1000))
			}
		}
		v += r.IntN(3)
		keys = append(keys, v)
	}
	return keys[:n]
}

// TestObserveRunIsObserveRecordByRecord checks that observeRun, which compares keys of records
// of one size inline, notes the same order as observe called for each record.
func TestObserveRunIsObserveRecordByRecord(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		keys := longKeys(orderedKeys(r, 1+r.IntN(3000))...)
		uniform := round%2 == 0 // the inline comparisons; else record by record
		val := func(i int) []byte {
			if uniform {
				return []byte("v")
			}
			return make([]byte, i%3)
		}
		a, refs := orderArena(keys, val)
		var want orderTracker
		for i, ref := range refs {
			if !want.observe(a, ref, keys[i]) {
				break
			}
		}

		b, _ := orderArena(keys, val)
		var got orderTracker
		size := 0
		if uniform {
			size = headerSize + len(keys[0]) + 1
		}
		// In batches, as adds bring them, each batch at the end of the chunk.
		recs, first := b.chunks[0], 0
		b.chunks[0] = recs[:0]
		for first < len(keys) {
			k := min(len(keys)-first, 1+r.IntN(500))
			from := len(b.chunks[0])
			end := from
			for range k {
				end += recordSize(recs[end:])
			}
			b.chunks[0] = recs[:end]
			got.observeRun(b, b.chunks[0][from:], size, first)
			first += k
		}

		require.Equal(t, want.outOfOrder, got.outOfOrder, "round %d", round)
		require.Equal(t, want.breaks, got.breaks, "round %d", round)
		require.Equal(t, want.holes, got.holes, "round %d", round)
		require.Equal(t, want.pending, got.pending, "round %d", round)
		require.Equal(t, want.lastKey, got.lastKey, "round %d", round)
		require.Equal(t, want.frozen, got.frozen, "round %d", round)
	}
}

// TestOrderSplitAndJoin checks that join puts back what split cut off, the cut a stretch's
// start.
func TestOrderSplitAndJoin(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 100 {
		keys := longKeys(orderedKeys(r, 10+r.IntN(3000))...)
		whole := observed(keys)
		if whole.outOfOrder {
			continue
		}
		n := 1 + r.IntN(len(keys)-1)
		tr := observed(keys)
		old := tr.split(n, 0)
		assert.Equal(t, n, cutAt(old.breaks, old.holes, tr.breaks, tr.holes, n), "round %d", round)
		tr.join(&old, n, 0, len(keys)-n)

		want := slices.Clone(whole.breaks)
		if k, found := slices.BinarySearch(want, n); !found {
			want = slices.Insert(want, k, n)
		}
		require.Equal(t, want, tr.breaks, "round %d: the cut starts a stretch", round)
		require.Equal(t, whole.holes, tr.holes, "round %d", round)
		require.False(t, tr.outOfOrder)
	}
}

// cutAt checks the two sides of a split at n: old's ordinals are below n, the rest's from 0 on.
// It returns n when they are.
func cutAt(oldBreaks []int, oldHoles []ref, breaks []int, holes []ref, n int) int {
	for _, b := range oldBreaks {
		if b >= n {
			return -1
		}
	}
	for _, h := range oldHoles {
		if h.i >= n {
			return -1
		}
	}
	for _, b := range breaks {
		if b <= 0 {
			return -1
		}
	}
	for _, h := range holes {
		if h.i < 0 {
			return -1
		}
	}
	return n
}
