package chunkfile_test

import (
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/spillway/spillway/spill/chunkfile"
	"github.com/stretchr/testify/require"
)

func TestParseCodecTakesSparkNames(t *testing.T) {
	for name, want := range map[string]string{
		"none": "none", "NONE": "none", " lz4 ": "lz4", "LZ4": "lz4", "Zstd": "zstd(level 1)", "zstd": "zstd(level 1)",
		"org.apache.spark.io.LZ4CompressionCodec":  "lz4",
		"org.apache.spark.io.ZStdCompressionCodec": "zstd(level 1)",
	} {
		c, err := chunkfile.ParseCodec(name)
		require.NoError(t, err, name)
		require.Equal(t, want, c.String(), name)
	}
	for _, name := range []string{"", "gzip", "lz4x", "zstd:3"} {
		_, err := chunkfile.ParseCodec(name)
		require.EqualError(t, err, fmt.Sprintf("spill chunk file: unknown compression codec %q; use one of none, lz4, zstd", name))
	}
	for _, name := range []string{"snappy", "LZF", "org.apache.spark.io.SnappyCompressionCodec"} {
		_, err := chunkfile.ParseCodec(name)
		require.EqualError(t, err, fmt.Sprintf("spill chunk file: compression codec %q is not supported for native spills; use one of none, lz4, zstd", name))
	}
}

func TestZstdLevels(t *testing.T) {
	for _, level := range []int{1, 3, 9, 22} {
		c, err := chunkfile.Zstd(level)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("zstd(level %d)", level), c.String())
	}
	for _, level := range []int{-1, 0, 23} {
		_, err := chunkfile.Zstd(level)
		require.EqualError(t, err, fmt.Sprintf("spill chunk file: zstd level %d; give 1 to 22 (spark.io.compression.zstd.level)", level))
	}
	require.Equal(t, chunkfile.None, chunkfile.Codec{}, "the zero Codec is None")
}

func TestKeys(t *testing.T) {
	for _, bits := range []int{128, 192, 256} {
		a, err := chunkfile.NewKey(bits)
		require.NoError(t, err)
		require.Equal(t, bits, a.Bits())
		// Printing a key never shows its bytes.
		require.Equal(t, fmt.Sprintf("chunkfile.Key(AES-%d, in memory)", bits), fmt.Sprintf("%v", a))
		require.Equal(t, fmt.Sprintf("chunkfile.Key(AES-%d, in memory)", bits), fmt.Sprintf("%#v", a))
	}
	for _, bits := range []int{0, 64, 127, 512} {
		_, err := chunkfile.NewKey(bits)
		require.EqualError(t, err, fmt.Sprintf("spill chunk file: a %d-bit key; AES takes 128, 192 or 256 bits (spark.io.encryption.keySizeBits)", bits))
	}
	_, err := chunkfile.KeyForTesting(make([]byte, 20))
	require.ErrorContains(t, err, "a 160-bit key")
	secret, _ := hex.DecodeString("000102030405060708090a0b0c0d0e0f")
	k, err := chunkfile.KeyForTesting(secret)
	require.NoError(t, err)
	require.NotContains(t, fmt.Sprintf("%v %+v %#v %s", k, k, k, k), "0102")
}
