package offheap

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSmallBuffersComeFromTheGoHeap(t *testing.T) {
	before := Mapped()
	b, err := Alloc(Threshold - 1)
	require.NoError(t, err)
	assert.Len(t, b, Threshold-1)
	assert.Equal(t, Threshold-1, cap(b))
	assert.Equal(t, before, Mapped())
	Free(b) // ignored
	Free(nil)
	assert.Equal(t, before, Mapped())
}

func TestLargeBuffersAreMappedZeroedAndPageRounded(t *testing.T) {
	before := Mapped()
	b, err := Alloc(Threshold + 1)
	require.NoError(t, err)
	assert.Len(t, b, Threshold+1)
	assert.Equal(t, 0, cap(b)%pageSize)
	assert.Equal(t, Threshold+pageSize, cap(b))
	assert.Equal(t, before+int64(cap(b)), Mapped())
	for i := range b {
		require.Zero(t, b[i])
		b[i] = byte(i)
	}
	Free(b[:0]) // any length of it
	assert.Equal(t, before, Mapped())
}

func TestAllocRefusesANegativeSize(t *testing.T) {
	_, err := Alloc(-1)
	assert.ErrorContains(t, err, "-1 bytes")
}

// The point of the package: what a sort held is back with the OS when it frees it, not kept by
// the Go heap; a buffer the cache keeps goes back once it has been unused for the cache's idle
// time (shortened here). Measured as the process's resident set, as a container's limit sees it.
func TestFreedMemoryLeavesTheResidentSet(t *testing.T) {
	withCacheIdle(t, 50*time.Millisecond)
	const size = 256 << 20
	runtime.GC()
	before := residentBytes(t)
	b, err := Alloc(size)
	require.NoError(t, err)
	for i := 0; i < len(b); i += pageSize {
		b[i] = 1 // touch every page
	}
	held := residentBytes(t)
	Free(b)
	require.Eventually(t, func() bool { return Cached() == 0 }, 10*time.Second, 10*time.Millisecond, "the cache let the buffer go")
	after := residentBytes(t)
	assert.Greater(t, held-before, int64(size*9/10), "touching the buffer made it resident")
	assert.Less(t, after-before, int64(16<<20), "Free returned it to the OS: before %d, held %d, after %d", before, held, after)
}

// The cache and the callers' buffers never take more together than the callers had mapped at
// their peak: a buffer mapped because none cached was large enough makes the oldest cached go.
func TestTheCacheAndTheBuffersStayWithinTheirPeak(t *testing.T) {
	withCacheIdle(t, time.Hour)
	before := Mapped()
	var bufs [3][]byte
	for i := range bufs {
		b, err := Alloc(HugePage)
		require.NoError(t, err)
		bufs[i] = b
	}
	for _, b := range bufs {
		Free(b)
	}
	assert.Equal(t, int64(3*HugePage), Cached(), "all three kept: the callers held as much")
	larger, err := Alloc(2 * HugePage) // none cached is large enough: mapped afresh
	require.NoError(t, err)
	defer Free(larger)
	for i, b := range bufs {
		assert.Equal(t, i == 2, isMapped(t, uintptr(unsafe.Pointer(unsafe.SliceData(b)))), "buffer %d: the two oldest went", i)
	}
	assert.Equal(t, int64(HugePage), Cached())
	assert.Equal(t, before+int64(2*HugePage), Mapped())
}

// Off (idle time 0), the cache unmaps what it holds and Free unmaps at once; a shorter idle time
// applies to the buffers cached already.
func TestSetCacheIdle(t *testing.T) {
	withCacheIdle(t, time.Hour)
	require.ErrorContains(t, SetCacheIdle(-time.Second), "give 0 (no cache) or more")
	a, err := Alloc(HugePage)
	require.NoError(t, err)
	pa := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	Free(a)
	require.Equal(t, int64(HugePage), Cached(), "kept for an hour")
	require.NoError(t, SetCacheIdle(50*time.Millisecond))
	require.Eventually(t, func() bool { return Cached() == 0 }, 10*time.Second, 5*time.Millisecond, "let go after the new idle time")
	assert.False(t, isMapped(t, pa))

	b, err := Alloc(HugePage)
	require.NoError(t, err)
	pb := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	Free(b)
	require.Equal(t, int64(HugePage), Cached())
	require.NoError(t, SetCacheIdle(0))
	assert.Zero(t, Cached(), "turned off: what it held is unmapped")
	assert.False(t, isMapped(t, pb))
	c, err := Alloc(HugePage)
	require.NoError(t, err)
	pc := uintptr(unsafe.Pointer(unsafe.SliceData(c)))
	Free(c)
	assert.Zero(t, Cached(), "off: nothing is kept")
	assert.False(t, isMapped(t, pc))
}

// The cache: a huge buffer freed is kept mapped, advised MADV_FREE (the kernel may take its pages
// back), and is what the next Alloc of its size or less gets, zeroed; a larger one is split at a
// huge-page boundary, its rest kept.
func TestFreedHugeBuffersServeTheNextAllocs(t *testing.T) {
	withCacheIdle(t, time.Hour)
	mappedBefore := Mapped()
	b, err := Alloc(4 * HugePage)
	require.NoError(t, err)
	for i := range b {
		b[i] = 0xA5
	}
	p := unsafe.SliceData(b)
	Free(b)
	assert.Equal(t, int64(4*HugePage), Cached())
	assert.Equal(t, mappedBefore, Mapped(), "a cached buffer is not a caller's")
	assert.True(t, isMapped(t, uintptr(unsafe.Pointer(p))), "kept mapped")
	if lazy, ok := mappingLazyFree(t, uintptr(unsafe.Pointer(p))); ok {
		assert.Equal(t, int64(4*HugePage), lazy, "advised MADV_FREE: the kernel may take the pages back")
	} else {
		t.Log("this kernel's smaps has no LazyFree: the advice is not checked")
	}

	small, err := Alloc(HugePage + 1) // a page more than a huge page: the head of the cached buffer
	require.NoError(t, err)
	assert.Equal(t, p, unsafe.SliceData(small), "the cached buffer, reused")
	assert.Equal(t, HugePage+pageSize, cap(small))
	assert.Equal(t, int64(2*HugePage), Cached(), "from the next huge page on, it stays cached")
	assert.False(t, isMapped(t, uintptr(unsafe.Pointer(p))+uintptr(HugePage+pageSize)), "the pages between are unmapped")
	assert.True(t, bytes.Equal(make([]byte, cap(small)), small[:cap(small)]), "zeroed, as a fresh mapping")
	rest, err := Alloc(2 * HugePage)
	require.NoError(t, err)
	assert.Equal(t, unsafe.Add(unsafe.Pointer(p), 2*HugePage), unsafe.Pointer(unsafe.SliceData(rest)), "the other half")
	assert.Zero(t, Cached())
	assert.Equal(t, mappedBefore+int64(3*HugePage+pageSize), Mapped())
	Free(small)
	Free(rest)
	assert.Equal(t, int64(3*HugePage+pageSize), Cached())
	assert.Equal(t, mappedBefore, Mapped())
}

// Alloc takes the smallest cached buffer that is large enough, whenever it was freed: a sort's
// arena chunks leave its index for the next index.
func TestAllocTakesTheSmallestCachedBufferLargeEnough(t *testing.T) {
	withCacheIdle(t, time.Hour)
	chunk, err := Alloc(2 * HugePage)
	require.NoError(t, err)
	index, err := Alloc(8 * HugePage)
	require.NoError(t, err)
	pc, pi := unsafe.SliceData(chunk), unsafe.SliceData(index)
	Free(chunk)
	Free(index) // the most recent
	again, err := Alloc(2 * HugePage)
	require.NoError(t, err)
	assert.Equal(t, pc, unsafe.SliceData(again), "the chunk, not the head of the index")
	assert.Equal(t, int64(8*HugePage), Cached())
	index2, err := Alloc(7*HugePage + pageSize)
	require.NoError(t, err)
	assert.Equal(t, pi, unsafe.SliceData(index2), "the index")
	Free(again)
	Free(index2)
}

// A cached buffer unused for the idle time is unmapped; so is every other, in time.
func TestIdleCachedBuffersAreUnmapped(t *testing.T) {
	const idle = time.Second
	withCacheIdle(t, idle)
	a, err := Alloc(HugePage)
	require.NoError(t, err)
	b, err := Alloc(HugePage)
	require.NoError(t, err)
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	Free(a)
	time.Sleep(idle / 2)
	Free(b)
	freedB := time.Now()
	require.Eventually(t, func() bool { return Cached() < 2*HugePage }, 10*time.Second, 5*time.Millisecond)
	assert.False(t, isMapped(t, pa), "the older buffer went first")
	if time.Since(freedB) < idle*3/4 { // else b may have gone too, on a slow machine
		assert.True(t, isMapped(t, pb), "the newer one is still kept")
	}
	require.Eventually(t, func() bool { return Cached() == 0 }, 10*time.Second, 5*time.Millisecond)
	assert.False(t, isMapped(t, pb))
}

// withCacheIdle empties the cache, sets its idle time for one test and makes the callers' peak
// what they hold now, then empties the cache again.
func withCacheIdle(t *testing.T, idle time.Duration) {
	emptyCache := func() {
		cache.mu.Lock()
		bufs := cache.buffers
		cache.buffers, cache.bytes = nil, 0
		if cache.trim != nil {
			cache.trim.Stop()
			cache.trim = nil
		}
		cache.mu.Unlock()
		unmapCached(bufs)
	}
	emptyCache()
	cache.mu.Lock()
	saved := cache.idle
	cache.mu.Unlock()
	require.NoError(t, SetCacheIdle(idle))
	peak.Store(Mapped())
	t.Cleanup(func() {
		emptyCache()
		require.NoError(t, SetCacheIdle(saved))
	})
}

// isMapped says whether the address p is in a mapping of this process.
func isMapped(t *testing.T, p uintptr) bool {
	return mappingFields(t, func(lo, hi uintptr) bool { return lo <= p && p < hi }) != nil
}

// mappingLazyFree reads the LazyFree bytes of the mapping that contains p (false where the kernel
// does not report them).
func mappingLazyFree(t *testing.T, p uintptr) (int64, bool) {
	lazy, ok := mappingFields(t, func(lo, hi uintptr) bool { return lo <= p && p < hi })["LazyFree"]
	if !ok {
		return 0, false
	}
	return kibibytes(t, lazy), true
}

// mappingFields reads /proc/self/smaps and returns the fields ("Rss" -> "4 kB", ...) of the first
// mapping whose range [lo, hi) match accepts, or nil if there is none.
func mappingFields(t *testing.T, match func(lo, hi uintptr) bool) map[string]string {
	smaps, err := os.ReadFile("/proc/self/smaps")
	require.NoError(t, err)
	var fields map[string]string
	for _, line := range strings.Split(string(smaps), "\n") {
		if r, _, ok := strings.Cut(line, " "); ok && strings.Contains(r, "-") && !strings.HasSuffix(r, ":") {
			if fields != nil {
				return fields // the matched mapping's fields are all read
			}
			lo, hi, _ := strings.Cut(r, "-")
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil && match(uintptr(l), uintptr(h)) {
				fields = map[string]string{}
			}
			continue
		}
		if name, value, ok := strings.Cut(line, ":"); ok && fields != nil {
			fields[name] = strings.TrimSpace(value)
		}
	}
	return fields
}

// kibibytes parses a smaps size ("1024 kB") into bytes.
func kibibytes(t *testing.T, size string) int64 {
	kb, err := strconv.ParseInt(strings.TrimSuffix(size, " kB"), 10, 64)
	require.NoError(t, err)
	return kb << 10
}

func residentBytes(t *testing.T) int64 {
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// Size is what Alloc takes, so a caller can count a buffer before it maps it.
func TestSizeIsWhatAllocTakes(t *testing.T) {
	for _, n := range []int{0, 1, Threshold - 1, Threshold, Threshold + 1, Threshold + 25, 1 << 20} {
		b, err := Alloc(n)
		require.NoError(t, err)
		assert.Equal(t, Size(n), cap(b), "n=%d", n)
		Free(b)
	}
}

// A subslice that starts inside a mapping is not a buffer Alloc returned: Free refuses it rather
// than cut the mapping.
func TestFreeRefusesASubsliceOfAMapping(t *testing.T) {
	b, err := Alloc(4 * Threshold)
	require.NoError(t, err)
	defer Free(b)
	assert.Panics(t, func() { Free(b[100:]) })
}

// Buffers of a huge page or more start on a huge-page boundary, hold exactly their size, and are
// backed by transparent huge pages where the kernel offers them to mappings that ask
// (/sys/kernel/mm/transparent_hugepage/enabled is "always" or "madvise").
func TestLargeBuffersAreOfferedHugePages(t *testing.T) {
	withCacheIdle(t, time.Hour) // a fresh mapping
	size := 4*HugePage + pageSize
	before := Mapped()
	b, err := Alloc(size)
	require.NoError(t, err)
	defer Free(b)
	assert.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(b)))%HugePage, "starts on a huge-page boundary")
	assert.Equal(t, size, cap(b))
	assert.Equal(t, before+int64(size), Mapped())
	// Written before read: a read first would map the shared zero page, which a write then
	// splits into small pages on kernels before 6.12.
	for i := 0; i < len(b); i += pageSize {
		b[i] = 1
		require.Zero(t, b[i+1])
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Logf("transparent huge pages are off here (%q, %v): only the alignment is checked", strings.TrimSpace(string(mode)), err)
		return
	}
	eligible, huge := mappingHugePages(t, uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	require.True(t, eligible, "THP is %q, yet the mapping may not have huge pages: was it advised?", strings.TrimSpace(string(mode)))
	assert.GreaterOrEqual(t, huge, int64(HugePage), "the mapping is eligible for huge pages, yet none backs it")
	assert.LessOrEqual(t, huge, int64(size), "a huge page past the buffer's end")
}

// mappingHugePages reads, from /proc/self/smaps, whether the mapping that starts at start may
// have transparent huge pages (THPeligible) and how many bytes of them it has (AnonHugePages).
func mappingHugePages(t *testing.T, start uintptr) (eligible bool, huge int64) {
	fields := mappingFields(t, func(lo, _ uintptr) bool { return lo == start })
	thp, ok := fields["THPeligible"]
	require.True(t, ok, "no mapping at %#x with THPeligible in /proc/self/smaps", start)
	return thp == "1", kibibytes(t, fields["AnonHugePages"])
}
