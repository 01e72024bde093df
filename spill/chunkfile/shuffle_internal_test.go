package chunkfile

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The planes are laid out as the format says: each row's first byte, then each row's second
// byte, ..., then the bytes past the last whole row as they are.
func TestShuffleLayout(t *testing.T) {
	planes := make([]byte, 8)
	shuffle(planes, []byte("abcABC12"), 3)
	require.Equal(t, "aAbBcC12", string(planes))
	back := make([]byte, 8)
	unshuffle(back, planes, 3)
	require.Equal(t, "abcABC12", string(back))
}

// unshuffle undoes shuffle for every length around the eight-row steps and every kind of stride,
// and shuffle moves every byte (no input byte is where a plane of another length puts it).
func TestShuffleRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, stride := range []int{2, 3, 7, 8, 9, 16, 41, 250, 1024} {
		for _, n := range []int{0, 1, stride - 1, stride, stride + 1, 7 * stride, 8 * stride, 8*stride + 3, 17*stride + 5, 4096} {
			src := make([]byte, n)
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			planes := make([]byte, n)
			shuffle(planes, src, stride)
			rows := n / stride
			for i := 0; i < rows*stride; i++ {
				require.Equal(t, src[i], planes[(i%stride)*rows+i/stride], "stride %d, %d bytes, byte %d", stride, n, i)
			}
			require.Equal(t, src[rows*stride:], planes[rows*stride:])
			back := make([]byte, n)
			unshuffle(back, planes, stride)
			require.True(t, bytes.Equal(src, back), "stride %d, %d bytes", stride, n)
		}
	}
}
