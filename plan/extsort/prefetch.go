//go:build amd64 || arm64

package extsort

import "unsafe"

// prefetch asks the CPU to load the two cache lines at p, without waiting for them: the sort
// reads its records in key order, scattered over the whole arena, and each is a cache miss
// (and, often, a TLB miss). Issued some records ahead of need, the misses are served in parallel
// instead of one after the other. A load used for the same purpose would block the instructions
// after it from retiring until its data came; a prefetch does not, and never faults.
//
//go:noescape
func prefetch(p unsafe.Pointer)
