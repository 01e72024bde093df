package offheap

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
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
// the Go heap. Measured as the process's resident set, as a container's limit sees it.
func TestFreedMemoryLeavesTheResidentSet(t *testing.T) {
	const size = 256 << 20
	runtime.GC()
	before := residentBytes(t)
	b, err := Alloc(size)
	require.NoError(t, err)
	for i := 0; i < len(b); i += pageSize {
		b[i] = 1 // touch every page
	}
	peak := residentBytes(t)
	Free(b)
	after := residentBytes(t)
	assert.Greater(t, peak-before, int64(size*9/10), "touching the buffer made it resident")
	assert.Less(t, after-before, int64(16<<20), "Free returned it to the OS: before %d, peak %d, after %d", before, peak, after)
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
	smaps, err := os.ReadFile("/proc/self/smaps")
	require.NoError(t, err)
	in := false
	for _, line := range strings.Split(string(smaps), "\n") {
		if r, _, ok := strings.Cut(line, " "); ok && strings.Contains(r, "-") && !strings.HasSuffix(r, ":") {
			lo, _, _ := strings.Cut(r, "-")
			v, err := strconv.ParseUint(lo, 16, 64)
			in = err == nil && uintptr(v) == start
			continue
		}
		if !in {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "AnonHugePages:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			huge = kb << 10
		}
		if rest, ok := strings.CutPrefix(line, "THPeligible:"); ok {
			return strings.TrimSpace(rest) == "1", huge // the mapping's last line of the two
		}
	}
	t.Fatalf("no mapping at %#x with THPeligible in /proc/self/smaps", start)
	return false, 0
}
