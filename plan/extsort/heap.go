package extsort

// A binary min-heap over a slice, ordered by less: the merge's sources (sourceLess) and the
// stretches of a merge of stretches (stretchLess). Ties must be broken by age in less, so that
// equal keys come out in the order they were added.

// heapify makes h a heap.
func heapify[T any](h []T, less func(a, b T) bool) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i, less)
	}
}

// pop removes the heap's root, moving the last element there; the caller sifts it down.
func pop[T any](h []T) []T {
	var zero T
	last := len(h) - 1
	h[0], h[last] = h[last], zero
	return h[:last]
}

// siftDown moves h[i] down to its place, the rest of h being a heap.
func siftDown[T any](h []T, i int, less func(a, b T) bool) {
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
