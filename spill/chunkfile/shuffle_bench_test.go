package chunkfile

import "testing"

// BenchmarkShuffle is the filter alone, on a 64 KiB chunk (a sort run's) of 41-byte rows.
func BenchmarkShuffle(b *testing.B) {
	src := make([]byte, 64<<10)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, len(src))
	b.Run("shuffle", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			shuffle(dst, src, 41)
		}
	})
	b.Run("unshuffle", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			unshuffle(dst, src, 41)
		}
	})
}
