package lz4c

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/require"
)

// Blocks of every shape decode with the pure-Go decoder (the readers') to what went in, through
// one Compressor reused across blocks (its state is reset cheaply between them).
func TestBlocksDecodeWithTheGoDecoder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var c Compressor
	words := []string{"furiously ", "quickly ", "regular ", "deposits ", "|", "1996-03-13", "DELIVER IN PERSON"}
	for i := range 300 {
		var src []byte
		n := r.IntN(256 << 10)
		switch i % 3 {
		case 0: // text-like: compresses
			for len(src) < n {
				src = append(src, words[r.IntN(len(words))]...)
			}
		case 1: // random: does not
			src = make([]byte, n)
			for j := range src {
				src[j] = byte(r.Uint32())
			}
		default: // runs of one byte
			src = bytes.Repeat([]byte{byte(i)}, n)
		}
		dst := make([]byte, lz4.CompressBlockBound(len(src)))
		m := c.CompressBlock(src, dst)
		if len(src) == 0 {
			require.Zero(t, m)
			continue
		}
		require.Positive(t, m, "a block of %d bytes into its bound", len(src))
		out := make([]byte, len(src))
		got, err := lz4.UncompressBlock(dst[:m], out)
		require.NoError(t, err)
		require.Equal(t, len(src), got)
		require.True(t, bytes.Equal(src, out), "block %d round trip", i)

		// Into less room than the input, random bytes give up (0), and whatever comes out decodes.
		short := make([]byte, len(src)-1)
		if m := c.CompressBlock(src, short); m > 0 {
			got, err := lz4.UncompressBlock(short[:m], out)
			require.NoError(t, err)
			require.True(t, bytes.Equal(src, out[:got]))
		} else if len(src) >= 1<<10 {
			require.Equal(t, 1, i%3, "only random bytes should fail to shrink (block %d)", i)
		}
	}
}

func TestEmptyInputOrOutputGivesZero(t *testing.T) {
	var c Compressor
	require.Zero(t, c.CompressBlock(nil, make([]byte, 16)))
	require.Zero(t, c.CompressBlock([]byte("abc"), nil))
}
