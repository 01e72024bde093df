package extsort

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/spillway/spillway/plan/offheap"
)

// A merge gives the budget its runs leave to their remote readers' spans: in equal shares, in
// whole chunks, never more than the share, within maxRemoteRunSpans chunks, and never below the
// span the runs' costs planned (remoteRunSpan).
func TestRemoteSpanInSharesTheSpareBudget(t *testing.T) {
	const chunk = 64 << 10
	base := remoteRunSpan(chunk)
	assert.Equal(t, base, remoteSpanIn(chunk, 0, 16), "no spare")
	assert.Equal(t, base, remoteSpanIn(chunk, -1<<20, 16), "over the budget already")
	assert.Equal(t, base, remoteSpanIn(chunk, 1<<30, 0), "no remote run")
	assert.Equal(t, base, remoteSpanIn(chunk, 2*chunk*16-1, 16), "less than a chunk more for each of the two spans")
	assert.Equal(t, base+chunk, remoteSpanIn(chunk, 2*chunk*16, 16))
	assert.Equal(t, maxRemoteRunSpans*chunk, remoteSpanIn(chunk, 1<<40, 3), "at most maxRemoteRunSpans chunks")
	for _, c := range []int{1 << 10, 3 << 10, 64 << 10} {
		for _, spare := range []int64{0, 5 << 10, 100 << 10, 1 << 20, 13 << 20} {
			for _, k := range []int{1, 7, 16} {
				span := remoteSpanIn(c, spare, k)
				grown := 2 * int64(offheap.Size(span)-offheap.Size(remoteRunSpan(c)))
				assert.LessOrEqual(t, grown*int64(k), max(spare, 0), "chunk %d, spare %d, %d runs: the spans fit in the spare", c, spare, k)
				assert.Zero(t, span%c, "whole chunks")
			}
		}
	}
}
