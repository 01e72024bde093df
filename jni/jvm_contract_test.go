package jni

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timob/jnigi"

	"github.com/spillway/spillway/plan"
	"github.com/spillway/spillway/plan/offheap"
)

// The executor's path: nothing on disk until the first file, the plan's dir and file appear in
// one root, heap and direct writes append exactly their region, usage counts them, and releasing
// the plan leaves the roots as they were.
func TestJVMLifecycleTouchesDiskOnlyFromFirstFileToRelease(t *testing.T) {
	j := attach(t)
	base, a, b := roots(t)
	before := entries(t, base)

	dirs := j.registerLocalDirs(a, b)
	defer j.releaseLocalDirs(dirs)
	plan := j.createPlanIn(dirs, 1<<20)
	assert.Equal(t, before, entries(t, base), "registerLocalDirs and createPlanIn touch no filesystem")
	assert.Zero(t, j.used(plan))

	file := j.createTmpFile(plan)
	path := j.path(file)
	planDir := filepath.Dir(path)
	assert.Contains(t, []string{a, b}, filepath.Dir(planDir), "the plan's dir is directly in a root")
	assert.True(t, strings.HasPrefix(filepath.Base(planDir), "spillway-"), planDir)
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Zero(t, info.Size())

	heap, direct := pattern(100, 1), pattern(64, 2)
	j.write(file, j.heapBuffer(heap), 10, 50)    // bytes 10..59 of the heap buffer
	j.write(file, j.directBuffer(direct), 4, 60) // bytes 4..63 of the direct one
	assert.EqualValues(t, 110, j.used(plan))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, append(append([]byte{}, heap[10:60]...), direct[4:64]...), got)

	j.releasePlan(plan)
	assert.Equal(t, before, entries(t, base), "releasePlan removes every file and dir the plan made")
}

// A String[] the contract refuses is an IllegalArgumentException naming the element, returns no
// handle and creates nothing, on disk or in the registry.
func TestJVMBadLocalDirsAreIllegalArgumentsAndChangeNothing(t *testing.T) {
	j := attach(t)
	base, a, _ := roots(t)
	relative, empty := "relative/dir", ""
	cases := []struct {
		name  string
		arr   _Ctype_jobjectArray
		where string
	}{
		{"a null array", 0, "localDirs is null"},
		{"an empty array", j.strings(), "no local dirs"},
		{"a null element", j.strings(&a, nil), "localDirs[1]"},
		{"a relative path", j.strings(&a, &relative), `#1 "relative/dir" is a relative path`},
		{"an empty path", j.strings(&empty), "#0 is an empty string"},
		{"an unpaired surrogate", j.stringArray(j.str(append(utf16.Encode([]rune(a+"/x-")), 0xD800))), "localDirs[0]"},
		{"a NUL char", j.stringArray(j.str(utf16.Encode([]rune(a + "/x\x00y")))), "localDirs[0]"},
	}
	livePlans := registry.Stats().LivePlans
	for _, tc := range cases {
		h := Java_spillway_NativeSpill_registerLocalDirs(j.raw, 0, tc.arr)
		msg := j.thrown("java.lang.IllegalArgumentException", "registerLocalDirs with "+tc.name)
		assert.Zero(t, h, tc.name)
		assert.Contains(t, msg, tc.where, tc.name)

		p := Java_spillway_NativeSpill_createPlan(j.raw, 0, tc.arr, 1<<20)
		j.thrown("java.lang.IllegalArgumentException", "createPlan with "+tc.name)
		assert.Zero(t, p, tc.name)
	}
	assert.Equal(t, livePlans, registry.Stats().LivePlans)
	assert.Equal(t, []string{"a", "b"}, entries(t, base))
}

// Negative limits are refused with an IllegalArgumentException and no plan.
func TestJVMNegativeLimitsAreIllegalArguments(t *testing.T) {
	j := attach(t)
	_, a, b := roots(t)
	dirs := j.registerLocalDirs(a, b)
	defer j.releaseLocalDirs(dirs)
	for _, limits := range [][2]int64{{-1, math.MaxInt64}, {1 << 20, -1}, {math.MinInt64, math.MinInt64}} {
		h := Java_spillway_NativeSpill_createPlanIn(j.raw, 0, dirs, _Ctype_jlong(limits[0]), _Ctype_jlong(limits[1]))
		j.thrown("java.lang.IllegalArgumentException", fmt.Sprint("createPlanIn with limits ", limits))
		assert.Zero(t, h)
		h = Java_spillway_NativeSpill_createPlanWithExecutorLimit(j.raw, 0, j.strings(&a, &b), _Ctype_jlong(limits[0]), _Ctype_jlong(limits[1]))
		j.thrown("java.lang.IllegalArgumentException", fmt.Sprint("createPlanWithExecutorLimit with limits ", limits))
		assert.Zero(t, h)
	}
	h := Java_spillway_NativeSpill_createPlan(j.raw, 0, j.strings(&a, &b), -1)
	j.thrown("java.lang.IllegalArgumentException", "createPlan with limit -1")
	assert.Zero(t, h)
}

// A negative idle time for the memory cache is refused with an IllegalArgumentException naming
// the Spark setting; 0 turns the cache off; the longest time is taken.
func TestJVMConfigureMemoryCacheRefusesANegativeTime(t *testing.T) {
	j := attach(t)
	t.Cleanup(func() { require.NoError(t, offheap.SetCacheIdle(offheap.CacheIdle)) })
	Java_spillway_NativeSpill_configureMemoryCache(j.raw, 0, -1)
	assert.Contains(t, j.thrown("java.lang.IllegalArgumentException", "configureMemoryCache(-1)"), plan.SortMemoryCacheIdleKey)
	Java_spillway_NativeSpill_configureMemoryCache(j.raw, 0, 0)
	j.ok("configureMemoryCache(0)")
	b, err := offheap.Alloc(offheap.HugePage)
	require.NoError(t, err)
	offheap.Free(b)
	assert.Zero(t, offheap.Cached(), "off: a freed buffer is not kept")
	Java_spillway_NativeSpill_configureMemoryCache(j.raw, 0, math.MaxInt64)
	j.ok("configureMemoryCache(MaxInt64)")
}

// A handle the library did not hand out (0, forged, random) is an IllegalStateException on every
// method that takes one.
func TestJVMForgedHandlesAreIllegalStates(t *testing.T) {
	j := attach(t)
	buf := j.directBuffer(make([]byte, 16))
	for _, h := range []_Ctype_jlong{0, 1, -1, 2, math.MaxInt64, math.MinInt64, 0x5eed5eed5eed} {
		j.refusedEverywhere(h, buf)
	}
}

// Released handles are IllegalStateExceptions, double releases included, and a plan handle is
// not a file handle nor the other way round.
func TestJVMReleasedAndMismatchedHandlesAreIllegalStates(t *testing.T) {
	j := attach(t)
	base, a, b := roots(t)
	buf := j.heapBuffer(pattern(8, 3))

	dirs := j.registerLocalDirs(a, b)
	plan := j.createPlanIn(dirs, 1<<20)
	file := j.createTmpFile(plan)
	Java_spillway_NativeSpill_createTmpFile(j.raw, 0, file)
	j.thrown("java.lang.IllegalStateException", "createTmpFile(file handle)")
	Java_spillway_NativeSpill_write(j.raw, 0, plan, obj(buf), 0, 8)
	j.thrown("java.lang.IllegalStateException", "write(plan handle)")
	j.write(file, buf, 0, 8) // both handles still work
	assert.EqualValues(t, 8, j.used(plan))

	// Each kind of file has its release: the other kind's refuses the handle and keeps the file.
	spillFile := Java_spillway_NativeSpill_createSpillFile(j.raw, 0, plan)
	j.ok("createSpillFile")
	Java_spillway_NativeSpill_releaseTmpFile(j.raw, 0, spillFile)
	assert.Contains(t, j.thrown("java.lang.IllegalStateException", "releaseTmpFile(spill file)"), "releaseSpillFile")
	Java_spillway_NativeSpill_releaseSpillFile(j.raw, 0, file)
	assert.Contains(t, j.thrown("java.lang.IllegalStateException", "releaseSpillFile(tmp file)"), "tmp file")
	Java_spillway_NativeSpill_releaseSpillFile(j.raw, 0, spillFile)
	j.ok("releaseSpillFile")
	Java_spillway_NativeSpill_releaseSpillFile(j.raw, 0, spillFile)
	j.thrown("java.lang.IllegalStateException", "second releaseSpillFile")

	Java_spillway_NativeSpill_releaseTmpFile(j.raw, 0, file)
	j.ok("releaseTmpFile")
	Java_spillway_NativeSpill_releaseTmpFile(j.raw, 0, file)
	j.thrown("java.lang.IllegalStateException", "second releaseTmpFile")
	assert.Zero(t, j.used(plan), "a released file's bytes return to the plan")

	j.releasePlan(plan)
	j.refusedEverywhere(plan, buf)
	j.releaseLocalDirs(dirs)
	Java_spillway_NativeSpill_releaseLocalDirs(j.raw, 0, dirs)
	j.thrown("java.lang.IllegalStateException", "second releaseLocalDirs")
	Java_spillway_NativeSpill_createPlanIn(j.raw, 0, dirs, 1<<20, math.MaxInt64)
	j.thrown("java.lang.IllegalStateException", "createPlanIn with released dirs")
	assert.Equal(t, []string{"a", "b"}, entries(t, base))
}

// A write of a region outside the buffer, or of no buffer, is an IllegalArgumentException that
// writes nothing and counts nothing.
func TestJVMBadWriteRegionsAreIllegalArgumentsAndWriteNothing(t *testing.T) {
	j := attach(t)
	_, a, b := roots(t)
	dirs := j.registerLocalDirs(a, b)
	defer j.releaseLocalDirs(dirs)
	plan := j.createPlanIn(dirs, 1<<20)
	defer j.releasePlan(plan)
	file := j.createTmpFile(plan)
	path := j.path(file)
	heap, direct := j.heapBuffer(pattern(16, 4)), j.directBuffer(pattern(16, 5))
	for _, buf := range []*jnigi.ObjectRef{heap, direct} {
		for _, region := range [][2]int32{{-1, 1}, {0, -1}, {0, 17}, {16, 1}, {1, 16}, {math.MaxInt32, math.MaxInt32}} {
			Java_spillway_NativeSpill_write(j.raw, 0, file, obj(buf), _Ctype_jint(region[0]), _Ctype_jint(region[1]))
			j.thrown("java.lang.IllegalArgumentException", fmt.Sprint("write of region ", region))
		}
	}
	Java_spillway_NativeSpill_write(j.raw, 0, file, 0, 0, 1)
	j.thrown("java.lang.IllegalArgumentException", "write of a null buffer")
	assert.Zero(t, j.used(plan))
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Zero(t, info.Size())
}

// A write that would take the plan over its limit is the contract's SpillLimitExceededException
// naming the limit and the request; nothing of it is written, and up to the limit still is.
func TestJVMWriteOverTheLimitIsSpillLimitExceededAndAllOrNothing(t *testing.T) {
	j := attach(t)
	_, a, b := roots(t)
	dirs := j.registerLocalDirs(a, b)
	defer j.releaseLocalDirs(dirs)
	plan := j.createPlanIn(dirs, 1000)
	defer j.releasePlan(plan)
	first, second := j.createTmpFile(plan), j.createTmpFile(plan)
	j.write(first, j.heapBuffer(pattern(600, 6)), 0, 600)

	Java_spillway_NativeSpill_write(j.raw, 0, second, obj(j.directBuffer(pattern(555, 7))), 0, 555)
	msg := j.thrown(limitExceptionClass(), "write of 555 bytes over a limit of 1000 with 600 used")
	for _, part := range []string{"1000", "600", "555", "spark.spillway.maxTempDirectorySize"} {
		assert.Contains(t, msg, part)
	}
	assert.EqualValues(t, 600, j.used(plan))
	info, err := os.Stat(j.path(second))
	require.NoError(t, err)
	assert.Zero(t, info.Size(), "a refused write writes nothing")

	j.write(second, j.heapBuffer(pattern(400, 8)), 0, 400) // exactly up to the limit
	assert.EqualValues(t, 1000, j.used(plan))
}

// Heap buffers whose array the library cannot reach (read-only) or that are too large for one
// pooled copy are written whole and in order, through the C copy paths.
func TestJVMReadOnlyAndLargeHeapBuffersAreWrittenExactly(t *testing.T) {
	j := attach(t)
	_, a, b := roots(t)
	dirs := j.registerLocalDirs(a, b)
	defer j.releaseLocalDirs(dirs)
	plan := j.createPlanIn(dirs, 8<<20)
	defer j.releasePlan(plan)
	file := j.createTmpFile(plan)

	small := pattern(1000, 9)
	large := pattern(pooledCopySize*3+5, 10)
	j.write(file, j.readOnly(j.heapBuffer(small)), 7, 900)
	j.write(file, j.heapBuffer(large), 0, int32(len(large)))
	j.write(file, j.readOnly(j.directBuffer(small)), 0, 3)
	got, err := os.ReadFile(j.path(file))
	require.NoError(t, err)
	want := append(append(append([]byte{}, small[7:907]...), large...), small[:3]...)
	assert.True(t, bytes.Equal(want, got), "file content differs from what was written (%d bytes, want %d)", len(got), len(want))
	assert.EqualValues(t, len(want), j.used(plan))
}

// The JVM learns the stats arrays' layouts from the library, in plan's order.
func TestJVMStatsLayoutsAreThePlanTables(t *testing.T) {
	j := attach(t)
	var names, kinds, sortNames []string
	for _, s := range plan.StatsLayout {
		names = append(names, s.Name)
		kinds = append(kinds, string(s.Kind))
	}
	for _, s := range plan.SortStatsLayout {
		sortNames = append(sortNames, s.Name)
	}
	assert.Equal(t, names, j.goStrings(Java_spillway_NativeSpill_statsNames(j.raw, 0)))
	j.ok("statsNames")
	assert.Equal(t, kinds, j.goStrings(Java_spillway_NativeSpill_statsKinds(j.raw, 0)))
	j.ok("statsKinds")
	assert.Equal(t, sortNames, j.goStrings(Java_spillway_NativeSpill_sortStatsNames(j.raw, 0)))
	j.ok("sortStatsNames")
}

// stats refuses an array too short for its counters and fills one that is long enough.
func TestJVMStatsFillsTheCountersAndRefusesAShortArray(t *testing.T) {
	j := attach(t)
	layout := plan.StatsLayout
	statsLen := len(layout)
	for _, n := range []int{0, statsLen - 1} {
		Java_spillway_NativeSpill_stats(j.raw, 0, j.longArray(n))
		j.thrown("java.lang.IllegalArgumentException", fmt.Sprintf("stats with a long[%d]", n))
	}
	Java_spillway_NativeSpill_stats(j.raw, 0, 0)
	j.thrown("java.lang.IllegalArgumentException", "stats(null)")

	_, a, b := roots(t)
	dirs := j.registerLocalDirs(a, b)
	defer j.releaseLocalDirs(dirs)
	plan := j.createPlanIn(dirs, 1<<20)
	defer j.releasePlan(plan)
	j.write(j.createTmpFile(plan), j.heapBuffer(pattern(10, 11)), 0, 10)
	out := j.longArray(statsLen + 1)
	Java_spillway_NativeSpill_stats(j.raw, 0, out)
	j.ok("stats")
	got := j.longs(out)
	st := registry.Stats()
	byName := map[string]int64{}
	for i, s := range layout {
		byName[s.Name] = got[i]
		if s.Name != "goHeapBytes" { // moves between the two reads
			assert.Equal(t, s.Value(&st), got[i], s.Name)
		}
	}
	assert.GreaterOrEqual(t, byName["bytesInUse"], int64(10), "bytes in live spill files")
	assert.Positive(t, byName["goHeapBytes"], "Go heap bytes")
	assert.Zero(t, got[statsLen], "stats writes only its own counters")
}

// Without the shim's classes on the class path, JNI_OnLoad falls back to IOException for a
// write over the limit (still an IOException, as SpillLimitExceededException is): the test runs
// this package's limit test again in a child process whose JVM lacks the class.
func TestJVMLimitWithoutShimClassesIsAnIOException(t *testing.T) {
	if os.Getenv(noShimClassesEnv) != "" {
		t.Skip(noShimClassesEnv + " is set: this is the child process, whose JVM lacks the class on purpose")
	}
	child := exec.Command(os.Args[0], "-test.run=^TestJVMWriteOverTheLimitIsSpillLimitExceededAndAllOrNothing$", "-test.count=1", "-test.v")
	child.Env = append(os.Environ(), noShimClassesEnv+"=1")
	out, err := child.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "--- PASS: TestJVMWriteOverTheLimitIsSpillLimitExceededAndAllOrNothing", "%s", out)
}

func limitExceptionClass() string {
	if os.Getenv(noShimClassesEnv) != "" {
		return "java.io.IOException"
	}
	return limitException
}

// Java threads call into one plan at once: each attached thread creates its own file and writes
// heap and direct buffers while the others do, and usage, stats and the files agree afterwards
// (under -race, the detector watches the library's Go side of every call).
func TestJVMConcurrentThreadsShareAPlanExactly(t *testing.T) {
	const threads, writes = 4, 50
	statsLen := len(plan.StatsLayout)
	j := attach(t)
	base, a, b := roots(t)
	dirs := j.registerLocalDirs(a, b)
	defer j.releaseLocalDirs(dirs)
	plan := j.createPlanIn(dirs, 1<<30)

	paths := make([]string, threads)
	var wg sync.WaitGroup
	for i := range threads {
		wg.Add(1)
		go t.Run(fmt.Sprintf("thread %d", i), func(t *testing.T) {
			defer wg.Done()
			j := attach(t)
			file := j.createTmpFile(plan)
			paths[i] = j.path(file)
			heap, direct := j.heapBuffer(pattern(300, i)), j.directBuffer(pattern(300, i))
			for w := range writes {
				buf := heap
				if w%2 == 1 {
					buf = direct
				}
				j.write(file, buf, int32(w), 100)
				j.used(plan)
				Java_spillway_NativeSpill_stats(j.raw, 0, j.longArray(statsLen))
				j.ok("stats")
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	assert.EqualValues(t, threads*writes*100, j.used(plan))
	for i, path := range paths {
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		var want []byte
		for w := range writes {
			want = append(want, pattern(300, i)[w:w+100]...)
		}
		assert.True(t, bytes.Equal(want, got), "thread %d's file differs from what it wrote", i)
	}
	j.releasePlan(plan)
	assert.Equal(t, []string{"a", "b"}, entries(t, base))
}

// A Go panic inside an entry point, here a real SIGSEGV in Go code (a nil registry), is a
// RuntimeException saying it is an internal error, and the library works on afterwards. (It also
// proves the JVM's signal handlers hand a fault in Go code on to the Go runtime in this host.)
func TestJVMPanicInAnEntryPointIsARuntimeException(t *testing.T) {
	j := attach(t)
	saved := registry
	registry = nil
	used := Java_spillway_NativeSpill_usedDiskSpace(j.raw, 0, 1)
	registry = saved
	msg := j.thrown("java.lang.RuntimeException", "usedDiskSpace with a nil registry")
	assert.Zero(t, used)
	assert.Contains(t, msg, "internal error")
	assert.Contains(t, msg, "nil pointer dereference")

	_, a, b := roots(t)
	dirs := j.registerLocalDirs(a, b)
	defer j.releaseLocalDirs(dirs)
	plan := j.createPlanIn(dirs, 1<<20)
	j.write(j.createTmpFile(plan), j.directBuffer(pattern(5, 12)), 0, 5)
	assert.EqualValues(t, 5, j.used(plan))
	j.releasePlan(plan)
}
