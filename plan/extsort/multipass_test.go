package extsort

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/faultenv"
)

// memoryBound is the package doc's bound on MemoryUsed for s's budget and a largest record: the
// smallest merge reads two runs, each through a chunk reader (shuffled runs' hold a chunk more)
// and a record buffer, into a third.
func memoryBound(s *Sorter, largest int64) int64 {
	budget := s.budget
	if s.mem.spillCost > s.budget/8 { // the writer's reservation on top of a small budget
		budget += s.mem.spillCost
	}
	return max(budget, largest+entrySize+s.mem.spillCost, 2*(s.shuffledReadCost()+largest)+s.writeCost)
}

// peakMeter samples MemoryUsed after every call and, through the test hook, after every record
// an intermediate pass writes.
type peakMeter struct {
	s          *Sorter
	peak       int64
	mergeSteps int64
	onStep     func() // extra work at each merge step, with the sorter locked
}

func newPeakMeter(s *Sorter) *peakMeter {
	p := &peakMeter{s: s}
	s.onMergeStep = func() { // called with s.mu held
		p.mergeSteps++
		p.peak = max(p.peak, s.memoryUsed())
		if p.onStep != nil {
			p.onStep()
		}
	}
	return p
}

// sample is called between the sorter's calls, from the goroutine making them.
func (p *peakMeter) sample() {
	p.peak = max(p.peak, p.s.MemoryUsed())
}

// manyRuns makes records of keys from a small alphabet, so that many keys are equal and the
// order of equal keys across runs is tested, with the record's sequence number in its value.
func manyRuns(seed uint64, n, maxPad int) []rec {
	r := rand.New(rand.NewPCG(seed, 3))
	recs := make([]rec, n)
	for i := range recs {
		key := make([]byte, 1+r.IntN(3))
		for j := range key {
			key[j] = byte('a' + r.IntN(4))
		}
		val := binary.BigEndian.AppendUint32(nil, uint32(i))
		recs[i] = rec{key: key, val: append(val, randBytes(r, r.IntN(maxPad+1))...)}
	}
	return recs
}

// addSpilling adds recs in batches of perRun records and asks for a spill after each, as Spark's
// memory manager may, so that a few MB of input make thousands of runs.
func addSpilling(t *testing.T, s *Sorter, p *peakMeter, recs []rec, perRun int) {
	t.Helper()
	for i := 0; i < len(recs); i += perRun {
		require.NoError(t, s.Add(encode(recs[i:min(i+perRun, len(recs))])))
		p.sample()
		_, err := s.Spill()
		require.NoError(t, err)
		p.sample()
	}
}

func drainSampling(t *testing.T, s *Sorter, p *peakMeter, dstSize int) []rec {
	t.Helper()
	return drainEach(t, s, dstSize, p.sample)
}

func TestThousandsOfRunsHoldTheBudget(t *testing.T) {
	for _, tc := range []struct {
		name      string
		budget    int64
		largest   int   // one record with a value this large, 0 for none
		maxPasses int64 // 0 for no check
	}{
		{"budget=64KiB", 64 << 10, 0, 3},
		// Only the merges of the run holding the large record plan for it: planning every
		// merge for it made fan-in 2 and 11 passes.
		{"budget=64KiB/a 20KiB record", 64 << 10, 20 << 10, 3},
		{"budget=6KiB, under the smallest merge", 6 << 10, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, root := newManager(t, 1<<30, nil)
			s, err := New(m, tc.budget)
			require.NoError(t, err)
			p := newPeakMeter(s)
			recs := manyRuns(20, 25_000, 24)
			if tc.largest > 0 {
				recs[777].val = append(recs[777].val, make([]byte, tc.largest)...)
			}
			addSpilling(t, s, p, recs[:24_000], 12)
			// The last records stay in memory for Next, which must spill them to make room.
			for _, r := range recs[24_000:] {
				require.NoError(t, s.Add(AppendRecord(nil, r.key, r.val)))
				p.sample()
			}
			require.Positive(t, s.MemoryUsed())
			st := s.Stats()
			require.GreaterOrEqual(t, st.Runs, int64(2000))
			require.Len(t, runFiles(t, root), int(st.Runs))

			dst := make([]byte, 4096)
			k, err := s.Next(dst)
			require.NoError(t, err)
			p.sample()
			freed, err := s.Spill()
			require.NoError(t, err)
			assert.Zero(t, freed, "the records in memory were spilled before the passes")
			got := append(decode(t, bytes.Clone(dst[:k])), drainSampling(t, s, p, 4096)...)
			assertSorted(t, recs, got) // against sort.SliceStable: equal keys in insertion order

			st = s.Stats()
			t.Logf("%+v peak %d over %d merge steps", st, p.peak, p.mergeSteps)
			assert.Greater(t, st.MergePasses, int64(1))
			if tc.maxPasses > 0 {
				assert.LessOrEqual(t, st.MergePasses, tc.maxPasses)
			}
			assert.Positive(t, st.IntermediateRuns)
			assert.Positive(t, st.IntermediateBytes)
			assert.Positive(t, p.mergeSteps, "the hook saw the intermediate passes")
			bound := memoryBound(s, int64(len(AppendRecord(nil, recs[777].key, recs[777].val))))
			assert.LessOrEqual(t, p.peak, bound, "peak memory over the documented bound")
			// Under 1 MiB of budget, runs have 1 KiB chunks: a reader holds about 2 KiB, a
			// writer about 1 KiB, or 2.4 KiB when it compresses.
			assert.LessOrEqual(t, bound, tc.budget+2*(3<<10+int64(tc.largest)+64)+3<<10)

			assert.Zero(t, s.MemoryUsed())
			assert.Empty(t, runFiles(t, root))
			require.NoError(t, s.Close())
			assert.Zero(t, m.Used())
			require.NoError(t, m.Close())
			assert.Empty(t, planDirs(t, root))
		})
	}
}

func TestFewRunsMergeInOnePass(t *testing.T) {
	m, root := newManager(t, 1<<30, nil)
	const budget = 256 << 10
	s := newSorter(t, m, budget)
	p := newPeakMeter(s)
	recs := randomRecords(22, 40_000, 16, 40) // about 8 runs
	addAll(t, s, recs, 8192)
	require.Greater(t, s.Stats().Runs, int64(3))
	assertSorted(t, recs, drainSampling(t, s, p, 8192))
	st := s.Stats()
	assert.Equal(t, int64(1), st.MergePasses)
	assert.Zero(t, st.IntermediateRuns)
	assert.Zero(t, st.IntermediateBytes)
	assert.Zero(t, p.mergeSteps)
	assert.LessOrEqual(t, p.peak, int64(budget))
	require.NoError(t, s.Close())
	assert.Empty(t, runFiles(t, root))
	assert.Zero(t, m.Used())
}

// A budget of gigabytes (a sort that follows a large grant of Spark's) still opens no more than
// maxMergeReaders of runs in one merge: 700 runs of about 128 KiB of readers each are merged in
// intermediate passes instead of opened at once.
func TestALargeBudgetBoundsTheRunsOneMergeOpens(t *testing.T) {
	m, root := newManager(t, 1<<30, nil)
	s, err := New(m, 4<<30)
	require.NoError(t, err)
	p := newPeakMeter(s)
	recs := manyRuns(23, 2800, 8)
	addSpilling(t, s, p, recs, 4)
	st := s.Stats()
	require.Equal(t, int64(700), st.Runs)
	require.Greater(t, st.Runs*s.readCost, int64(maxMergeReaders), "the runs' readers together exceed the cap")

	assertSorted(t, recs, drainSampling(t, s, p, 8192))
	st = s.Stats()
	t.Logf("%+v peak %d", st, p.peak)
	assert.Greater(t, st.MergePasses, int64(1), "intermediate passes, not one merge of every run")
	assert.Positive(t, st.IntermediateRuns)
	assert.LessOrEqual(t, p.peak, int64(maxMergeReaders), "no merge held more than the cap")
	require.NoError(t, s.Close())
	assert.Empty(t, runFiles(t, root))
	assert.Zero(t, m.Used())
}

// When a disk fills up in the middle of an intermediate pass, the run being written is dropped
// and the group merged again from the start into a file on the other disk: the pass's inputs are
// kept until its output is whole, and every record comes out once, in order.
func TestRealENOSPCDuringAnIntermediatePass(t *testing.T) {
	small, good := faultenv.Tmpfs(t, "size=16m"), t.TempDir()
	m := managerOver(t, small, good)
	s := newSorter(t, m, 32<<10)
	p := newPeakMeter(s)
	// Once a run being written on the small disk holds data, fill that disk.
	fills := 0
	p.onStep = func() {
		f := s.pass.w.run.file
		onSmall := strings.HasPrefix(f.Path(), small+string(filepath.Separator))
		if onSmall && f.Size() > 0 && fills == 0 {
			faultenv.Fill(t, filepath.Join(small, "ballast"))
			fills++
		}
	}
	recs := manyRuns(23, 20_000, 24)
	addSpilling(t, s, p, recs, 40)
	got := drainSampling(t, s, p, 4096)
	require.Positive(t, fills, "an intermediate run was written on the small disk")
	t.Logf("%+v", s.Stats())
	assert.Positive(t, s.Stats().RewrittenRuns, "the run was written again on the other disk")
	assertSorted(t, recs, got)
	assert.Greater(t, s.Stats().MergePasses, int64(1))
	require.NoError(t, s.Close())
	assert.Zero(t, m.Used())
	assert.Empty(t, runFiles(t, small))
	assert.Empty(t, runFiles(t, good))
}

// Add keeps room for the final merge's read buffers, so the records in memory at the end stay
// there for the merge even when the budget was filled to the last record; a Spill during the
// merge still writes them out.
func TestRecordsInMemoryStayForTheFinalMerge(t *testing.T) {
	const budget = 1 << 20
	recs := randomRecords(24, 150_000, 16, 24)
	// Find how many records fill three runs and the memory up to the last record before a
	// fourth spill.
	m, _ := newManager(t, 1<<30, nil)
	probe := newSorter(t, m, budget)
	n := 0
	for ; n < len(recs); n++ {
		require.NoError(t, probe.Add(AppendRecord(nil, recs[n].key, recs[n].val)))
		if probe.Stats().Runs == 4 {
			break
		}
	}
	require.Less(t, n, len(recs))
	recs = recs[:n] // the record that caused the fourth spill is left out

	m, root := newManager(t, 1<<30, nil)
	s := newSorter(t, m, budget)
	p := newPeakMeter(s)
	addAll(t, s, recs, 1)
	require.Equal(t, int64(3), s.Stats().Runs)
	tail := s.MemoryUsed()
	require.Greater(t, tail, int64(budget)-int64(budget)/reserveShare-1024, "memory is full but for the reserve")

	dst := make([]byte, 4096)
	k, err := s.Next(dst)
	require.NoError(t, err)
	got := decode(t, bytes.Clone(dst[:k]))
	p.sample()
	assert.Equal(t, int64(3), s.Stats().Runs, "the records in memory were not spilled to make room")
	assert.Greater(t, s.MemoryUsed(), tail, "the tail is held, plus three read buffers")

	freed, err := s.Spill()
	require.NoError(t, err)
	assert.Positive(t, freed)
	assert.Equal(t, int64(4), s.Stats().Runs)
	assert.Len(t, runFiles(t, root), 4)
	p.sample()

	got = append(got, drainSampling(t, s, p, 4096)...)
	assertSorted(t, recs, got)
	st := s.Stats()
	assert.Equal(t, int64(1), st.MergePasses)
	assert.Zero(t, st.IntermediateRuns)
	assert.LessOrEqual(t, p.peak, int64(budget))
	require.NoError(t, s.Close())
	assert.Empty(t, runFiles(t, root))
	assert.Zero(t, m.Used())
}

// An intermediate run counts against the manager's limit like any other: a pass that cannot
// write it fails the sort with the limit's error, and Close leaves nothing behind.
func TestIntermediatePassOverTheLimitFailsCleanly(t *testing.T) {
	const budget = 64 << 10
	recs := manyRuns(25, 6_000, 24)
	probeManager, _ := newManager(t, 1<<30, nil)
	probe := newSorter(t, probeManager, budget)
	addSpilling(t, probe, newPeakMeter(probe), recs, 12)
	spilled := probeManager.Used()

	// Room for every run spilled, and less than a pass needs beside them.
	m, root := newManager(t, spilled+4<<10-1, nil)
	s := newSorter(t, m, budget)
	addSpilling(t, s, newPeakMeter(s), recs, 12)
	require.Equal(t, spilled, m.Used())
	_, err := s.Next(make([]byte, 4096))
	var limitErr *spill.LimitError
	require.ErrorAs(t, err, &limitErr)
	assert.Contains(t, err.Error(), "merging")
	assert.Contains(t, err.Error(), "test.limit")
	_, err = s.Next(make([]byte, 4096))
	require.ErrorAs(t, err, &limitErr, "the broken sort keeps failing")
	require.NoError(t, s.Close())
	assert.Empty(t, runFiles(t, root))
	assert.Zero(t, m.Used())
	assert.Zero(t, s.MemoryUsed())
}

// A disk that fills up in the middle of an intermediate pass and is freed again while the sort
// goes on (someone removed what filled it) takes the sort's files again: the pass is written
// again on the other disk, later passes come back to the freed one, and the sort completes with
// every record in order and exact accounting.
func TestRealDiskThatFillsAndFreesDuringTheMergeTakesRunsAgain(t *testing.T) {
	small, good := faultenv.Tmpfs(t, "size=16m"), t.TempDir()
	m := managerOver(t, small, good)
	s := newSorter(t, m, 32<<10)
	p := newPeakMeter(s)
	ballast := filepath.Join(small, "ballast")
	var filled, freed, backOnSmall bool
	p.onStep = func() {
		f := s.pass.w.run.file
		onSmall := strings.HasPrefix(f.Path(), small+string(filepath.Separator))
		switch {
		case !filled && onSmall && f.Size() > 0:
			faultenv.Fill(t, ballast)
			filled = true
		case filled && !freed && !onSmall:
			require.NoError(t, os.Remove(ballast)) // the pass went on on the other disk
			freed = true
		case freed && onSmall:
			backOnSmall = true
		}
	}
	recs := manyRuns(26, 20_000, 24)
	addSpilling(t, s, p, recs, 40)
	got := drainSampling(t, s, p, 4096)
	require.True(t, freed, "the small disk filled under a pass, which went on elsewhere")
	assert.True(t, backOnSmall, "a later pass wrote on the disk once it was freed")
	assert.Positive(t, s.Stats().RewrittenRuns)
	assertSorted(t, recs, got)
	require.NoError(t, s.Close())
	assert.Zero(t, m.Used())
	assert.Empty(t, runFiles(t, small))
	assert.Empty(t, runFiles(t, good))
}
