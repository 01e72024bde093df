// Package offheap allocates the large buffers of native operators outside the Go heap, in
// anonymous private mappings that Free returns to the OS at once.
//
// Why: Go's collector lets its heap grow to about twice its live bytes before it collects
// (GOGC=100) and gives memory back to the OS only slowly, so a sort holding 300 MiB of records on
// the Go heap made the process hold about 650 MiB, and kept it after the sort ended. Memory from
// Alloc is what it says — its size, rounded up to a page — from the first touch until Free.
//
// Buffers of HugePage or more start on a huge-page boundary and are offered transparent huge
// pages (madvise MADV_HUGEPAGE).
//
// Buffers smaller than Threshold come from the Go heap (a mapping per small buffer would cost a
// system call each and a page at least); a caller holding few of them keeps the Go heap small.
// The bytes mapped now, process-wide, are Mapped.
//
// The memory must hold no Go pointers: the collector does not scan it.
package offheap

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Threshold is the smallest buffer Alloc maps; smaller ones come from the Go heap. A multiple of
// the page size, so Free tells the two kinds apart by capacity alone.
const Threshold = 64 << 10

var (
	pageSize = unix.Getpagesize()
	mapped   atomic.Int64
)

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
		p, err = mapHuge(size)
	} else {
		p, err = unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	}
	if err != nil {
		return nil, fmt.Errorf("offheap: mapping %d bytes of memory: %w", size, err)
	}
	mapped.Add(int64(size))
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
	if uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(pageSize) != 0 {
		// A subslice of a mapping (b[k:] keeps a large capacity): unmapping it would cut the mapping.
		panic(fmt.Sprintf("offheap: Free of %d bytes at %p, not the start of a buffer Alloc returned", size, unsafe.SliceData(b)))
	}
	if err := unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(size)); err != nil {
		// Only a buffer Alloc did not return gets here (EINVAL): a bug, never a runtime condition.
		panic(fmt.Sprintf("offheap: unmapping %d bytes at %p: %v", size, unsafe.SliceData(b), err))
	}
	mapped.Add(-int64(size))
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

// Mapped is the bytes mapped by Alloc and not yet freed, in the whole process.
func Mapped() int64 { return mapped.Load() }

// Allocator is Alloc and Free as a value, for packages that take their buffers from a caller.
type Allocator struct{}

// Alloc is the package's Alloc.
func (Allocator) Alloc(n int) ([]byte, error) { return Alloc(n) }

// Free is the package's Free.
func (Allocator) Free(b []byte) { Free(b) }
