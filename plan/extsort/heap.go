package extsort

import "bytes"

// The merge heap: a binary min-heap of sources by their current key, ties broken by the sources'
// age (ord), so that equal keys come out in the order they were added.

func less(a, b *source) bool {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c < 0
	}
	return a.ord < b.ord
}

func heapify(h []*source) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
}

// pop removes the heap's root, moving the last element there; the caller sifts it down.
func pop(h []*source) []*source {
	last := len(h) - 1
	h[0], h[last] = h[last], nil
	return h[:last]
}

func siftDown(h []*source, i int) {
	for {
		least := i
		if l := 2*i + 1; l < len(h) && less(h[l], h[least]) {
			least = l
		}
		if r := 2*i + 2; r < len(h) && less(h[r], h[least]) {
			least = r
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}
