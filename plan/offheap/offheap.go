// Package offheap allocates the large buffers of native operators outside the Go heap, in
// anonymous private mappings that Free returns to the OS.
//
// Why: Go's collector lets its heap grow to about twice its live bytes before it collects
// (GOGC=100) and gives memory back to the OS only slowly, so a sort holding 300 MiB of records on
// the Go heap made the process hold about 650 MiB, and kept it after the sort ended. Memory from
// Alloc is what it says — its size, rounded up to a page — from the first touch until Free (or
// until the cache below lets it go).
//
// Buffers of HugePage or more start on a huge-page boundary and are offered transparent huge
// pages (madvise MADV_HUGEPAGE). Free keeps such buffers mapped for a while, for the next Alloc
// (see "The cache of freed buffers" below); every other buffer is unmapped at once.
//
// Buffers smaller than Threshold come from the Go heap (a mapping per small buffer would cost a
// system call each and a page at least); a caller holding few of them keeps the Go heap small.
// The bytes mapped now, process-wide, are Mapped.
//
// The memory must hold no Go pointers: the collector does not scan it.
package offheap

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Threshold is the smallest buffer Alloc maps; smaller ones come from the Go heap. A multiple of
// the page size, so Free tells the two kinds apart by capacity alone.
const Threshold = 64 << 10

var (
	pageSize = unix.Getpagesize()
	mapped   atomic.Int64
	peak     atomic.Int64 // the most bytes mapped has counted: the cache and the buffers together stay within it
)

// addMapped counts n more bytes mapped for callers (n < 0: fewer), and raises peak to them.
func addMapped(n int64) {
	now := mapped.Add(n)
	for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
	}
}

// Alloc returns a zeroed buffer of length n. At or above Threshold it is mapped outside the Go
// heap, and its capacity is n rounded up to a page; it must be given back with Free. Below, it is
// a Go slice of capacity n, which Free ignores. It fails only when the OS refuses the mapping
// (ENOMEM): nothing is allocated then.
func Alloc(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("offheap: a buffer of %d bytes", n)
	}
	if n < Threshold {
		return make([]byte, n), nil
	}
	size := Size(n)
	var p unsafe.Pointer
	var err error
	if size >= HugePage {
		if b := takeCached(size); b != nil {
			clear(b) // Alloc's buffers are zeroed; a cached one holds what its last owner wrote
			addMapped(int64(size))
			return b[:n], nil
		}
		p, err = mapHuge(size)
	} else {
		p, err = unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	}
	if err != nil {
		return nil, fmt.Errorf("offheap: mapping %d bytes of memory: %w", size, err)
	}
	addMapped(int64(size))
	if size >= HugePage && Cached() > 0 {
		trimToPeak() // a new mapping, none cached being large enough: the cache makes room for it
	}
	return unsafe.Slice((*byte)(p), size)[:n], nil
}

// HugePage is the size of a transparent huge page (with 4 KiB base pages, on amd64 and arm64):
// buffers of at least this size start on a multiple of it and are offered to the kernel for
// huge pages.
const HugePage = 2 << 20

// mapHuge maps size bytes starting on a HugePage boundary and asks the kernel to back them with
// transparent huge pages (MADV_HUGEPAGE: where THP is set to "madvise", a common default, only
// such mappings get them). A sort reads its records in key order, scattered over the whole arena:
// with 4 KiB pages nearly every record is a TLB miss, which in a virtual machine costs a
// two-level page walk. The advice is best effort (THP may be off); the memory is what it would
// be anyway: no more than size, from the first touch of each page until Free.
func mapHuge(size int) (unsafe.Pointer, error) {
	span := size + HugePage - pageSize // holds a size-byte range starting on a HugePage boundary
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(span), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	head := int(-uintptr(p) & (HugePage - 1))
	aligned := unsafe.Add(p, head)
	// Unmapping parts of a fresh private mapping fails only for a bad range: a bug.
	if head > 0 {
		mustUnmap(p, head)
	}
	if tail := span - head - size; tail > 0 {
		mustUnmap(unsafe.Add(aligned, size), tail)
	}
	_ = unix.Madvise(unsafe.Slice((*byte)(aligned), size), unix.MADV_HUGEPAGE) // EINVAL where the kernel has no THP
	return aligned, nil
}

func mustUnmap(p unsafe.Pointer, n int) {
	if err := unix.MunmapPtr(p, uintptr(n)); err != nil {
		panic(fmt.Sprintf("offheap: unmapping %d bytes at %p: %v", n, p, err))
	}
}

// Free gives back a buffer Alloc returned (any length of it, its capacity intact); nil and Go-heap
// buffers are ignored. Nothing may touch the buffer afterwards.
func Free(b []byte) {
	size := cap(b)
	if size < Threshold {
		return
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%uintptr(pageSize) != 0 || size >= HugePage && uintptr(p)%HugePage != 0 {
		// A subslice of a mapping (b[k:] keeps a large capacity): unmapping it would cut the mapping.
		panic(fmt.Sprintf("offheap: Free of %d bytes at %p, not the start of a buffer Alloc returned", size, p))
	}
	addMapped(-int64(size))
	if size >= HugePage && putCached(p, size) {
		return
	}
	unmap(p, size)
}

func unmap(p unsafe.Pointer, size int) {
	if err := unix.MunmapPtr(p, uintptr(size)); err != nil {
		// Only a buffer Alloc did not return gets here (EINVAL): a bug, never a runtime condition.
		panic(fmt.Sprintf("offheap: unmapping %d bytes at %p: %v", size, p, err))
	}
}

// Size is the memory Alloc(n) takes: n rounded up to a page from Threshold on, n below. What a
// caller plans for a buffer it will Alloc must be counted with it, or a mapping's rounding goes
// uncounted.
func Size(n int) int {
	if n < Threshold {
		return n
	}
	return (n + pageSize - 1) &^ (pageSize - 1)
}

// Mapped is the bytes mapped by Alloc and not yet freed, in the whole process (the cache's bytes
// are not in it: see Cached).
func Mapped() int64 { return mapped.Load() }

// The cache of freed buffers.
//
// Why: a sort maps fresh memory for every task, and the kernel must find, clear and map each of
// its pages on first touch. In a virtual machine whose host takes back the memory a guest freed,
// that first touch also waits for the host: measured in a Spark task (TPC-H lineitem, 3 M narrow
// rows), the same 540 page faults of a sort's arena cost 5-13 ms of system time in some runs and
// 100-450 ms in others, which made the stage's time bimodal. A buffer freed by one sort and
// taken by the next, before it has left the process, takes no page fault and no wait for the
// host; Alloc only zeroes it, which the kernel did for a fresh page anyway.
//
// So Free keeps freed buffers of HugePage or more (the sorts' arena chunks and indexes), and Alloc
// takes the smallest that is large enough (of those, the most recently freed), so that an arena's
// chunks leave a freed index for the next index. Of a larger one it takes the head; the rest from
// the next huge-page boundary on stays cached (so every cached buffer starts on one), and the
// pages between are unmapped.
//
// What it holds is bounded three ways:
//   - The cached buffers and those mapped for callers never take more together than the most
//     the callers have had mapped at once (the peak of Mapped): the cache sizes itself to the
//     memory the executor's sorts were granted, and never makes the process hold more than they
//     did. When Alloc must map a buffer, none cached being large enough, the oldest cached go.
//   - A cached buffer is advised MADV_FREE: the kernel may take its pages back at once under
//     memory pressure (they are then mapped afresh on the next touch, as without the cache), and
//     a container's working set does not count them.
//   - Whatever the kernel has not taken is unmapped once it has been unused for the idle time
//     that SetCacheIdle set, so an executor whose sorts have ended holds nothing that long after.
//
// The cache is off unless SetCacheIdle turns it on (CacheIdle is 0): what it keeps is memory
// Spark no longer counts, which Spark may grant again to the next task's operators on the JVM's
// side, and which a YARN container monitor reading RSS counts against the container. Off, the
// memory a sort frees leaves the process with the sort, as Spark's own sort's leaves its task.

// CacheIdle is how long a cached buffer stays mapped unused unless SetCacheIdle says otherwise:
// 0, no buffer is cached.
const CacheIdle time.Duration = 0

type cachedBuffer struct {
	p     unsafe.Pointer
	size  int
	freed time.Time
}

var cache struct {
	mu      sync.Mutex
	buffers []cachedBuffer // in the order they were cached (a split's rest at the end); the first go first
	bytes   int64          // of buffers
	trim    *time.Timer    // armed while buffers are cached
	idle    time.Duration  // 0: no buffer is cached
}

// cachedBytes is Cached: cache.bytes, and the buffers taken out of the cache until they are
// unmapped, so that a reader who sees 0 finds them gone.
var cachedBytes atomic.Int64

func init() { cache.idle = CacheIdle }

// SetCacheIdle sets how long a cached buffer stays mapped unused, for the whole process; 0 turns
// the cache off (Free unmaps at once). Buffers cached already that have been unused that long are
// unmapped now, the others when they reach it.
func SetCacheIdle(idle time.Duration) error {
	if idle < 0 {
		return fmt.Errorf("offheap: a cache idle time of %v; give 0 (no cache) or more", idle)
	}
	cache.mu.Lock()
	cache.idle = idle
	cache.mu.Unlock()
	trimIdle()
	return nil
}

// Cached is the bytes the cache of freed buffers holds now, in the whole process: mapped, unused,
// and free for the kernel to take back.
func Cached() int64 { return cachedBytes.Load() }

// takeCached returns a cached buffer of size bytes (a multiple of the page size, HugePage or
// more), or nil.
func takeCached(size int) []byte {
	cache.mu.Lock()
	best := -1
	for i := len(cache.buffers) - 1; i >= 0; i-- {
		if c := cache.buffers[i]; c.size >= size && (best < 0 || c.size < cache.buffers[best].size) {
			best = i
		}
	}
	if best < 0 {
		cache.mu.Unlock()
		return nil
	}
	c := cache.buffers[best]
	cache.buffers = append(cache.buffers[:best], cache.buffers[best+1:]...)
	cache.bytes -= int64(c.size)
	aligned := min((size+HugePage-1)&^(HugePage-1), c.size)
	if rest := c.size - aligned; rest > 0 {
		cache.buffers = append(cache.buffers, cachedBuffer{unsafe.Add(c.p, aligned), rest, c.freed})
		cache.bytes += int64(rest)
	}
	cache.mu.Unlock()
	cachedBytes.Add(-int64(size))
	if gap := aligned - size; gap > 0 {
		unmap(unsafe.Add(c.p, size), gap)
		cachedBytes.Add(-int64(gap))
	}
	return unsafe.Slice((*byte)(c.p), size)
}

// putCached caches the buffer of size bytes at p, freed (mapped no longer counts it), unless the
// cache is off; it reports whether it did. It unmaps the oldest buffers past the peak's room.
func putCached(p unsafe.Pointer, size int) bool {
	// The advice may fail only where the kernel has no MADV_FREE (before Linux 4.5): then the
	// buffer is unmapped at once, as without the cache. It is made outside the lock, so with the
	// cache off it is made for nothing: off is an operator's rare choice.
	if unix.Madvise(unsafe.Slice((*byte)(p), size), unix.MADV_FREE) != nil {
		return false
	}
	cache.mu.Lock()
	if cache.idle == 0 { // off
		cache.mu.Unlock()
		return false
	}
	cache.buffers = append(cache.buffers, cachedBuffer{p, size, time.Now()})
	cache.bytes += int64(size)
	cachedBytes.Add(int64(size))
	evicted := evictPastPeak()
	if cache.trim == nil && len(cache.buffers) > 0 {
		cache.trim = time.AfterFunc(cache.idle, trimIdle)
	}
	cache.mu.Unlock()
	unmapCached(evicted)
	return true
}

// trimToPeak unmaps the oldest cached buffers past the peak's room.
func trimToPeak() {
	cache.mu.Lock()
	evicted := evictPastPeak()
	cache.mu.Unlock()
	unmapCached(evicted)
}

// evictPastPeak takes out of the cache, oldest first, the buffers that take the cache and the
// callers' buffers together past peak, and returns them to be unmapped. cache.mu is held.
func evictPastPeak() []cachedBuffer {
	room := peak.Load() - mapped.Load()
	k := 0
	for k < len(cache.buffers) && cache.bytes > room {
		cache.bytes -= int64(cache.buffers[k].size)
		k++
	}
	if k == 0 {
		return nil
	}
	evicted := slices.Clone(cache.buffers[:k])
	clear(cache.buffers[:k]) // no stale pointers in the backing array
	cache.buffers = cache.buffers[k:]
	return evicted
}

// trimIdle unmaps the buffers cached for the idle time or more (every one if the cache is off),
// and arms itself again for the others.
func trimIdle() {
	var idle []cachedBuffer
	cache.mu.Lock()
	if cache.trim != nil {
		cache.trim.Stop() // when SetCacheIdle calls it: the timer it replaces
		cache.trim = nil
	}
	now := time.Now()
	kept := cache.buffers[:0]
	next := time.Duration(0)
	for _, c := range cache.buffers {
		if age := now.Sub(c.freed); age >= cache.idle {
			idle = append(idle, c)
			cache.bytes -= int64(c.size)
		} else {
			kept = append(kept, c)
			if left := cache.idle - age; next == 0 || left < next {
				next = left
			}
		}
	}
	clear(cache.buffers[len(kept):]) // no stale pointers past the end
	cache.buffers = kept
	if len(kept) > 0 {
		cache.trim = time.AfterFunc(next, trimIdle)
	}
	cache.mu.Unlock()
	unmapCached(idle)
}

// unmapCached unmaps buffers taken out of the cache; Cached counts each until it is unmapped.
func unmapCached(bufs []cachedBuffer) {
	for _, c := range bufs {
		unmap(c.p, c.size)
		cachedBytes.Add(-int64(c.size))
	}
}

// Allocator is Alloc and Free as a value, for packages that take their buffers from a caller.
type Allocator struct{}

// Alloc is the package's Alloc.
func (Allocator) Alloc(n int) ([]byte, error) { return Alloc(n) }

// Free is the package's Free.
func (Allocator) Free(b []byte) { Free(b) }
