package chunkfile_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spillway/spillway/spill/chunkfile"
	"github.com/stretchr/testify/require"
)

// vectorDir holds files in the chunk format shared with the JVM side: NAME.chunk with either
// NAME.plain (what it decodes to) or NAME.error (the error it must give). A sealed vector is sealed
// under the test key of its header's key size: bytes 0, 1, 2, ... (see README.md there).
var vectorDir = filepath.Join("..", "..", "testdata", "spillfile")

var update = flag.Bool("update", false, "rewrite the shared test vectors and the fuzz seeds")

// Every vector in the folder decodes to its .plain or fails with its .error; no file in the
// folder is left unchecked.
func TestVectors(t *testing.T) {
	if *update {
		writeVectors(t)
	}
	entries, err := os.ReadDir(vectorDir)
	require.NoError(t, err)
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	checked := map[string]bool{"README.md": true}
	vectors := 0
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".chunk")
		if !ok {
			continue
		}
		vectors++
		file, err := os.ReadFile(filepath.Join(vectorDir, e.Name()))
		require.NoError(t, err)
		key := vectorKey(t, file)
		got, err := decode(file, key, chunkfile.ReaderOptions{})
		plainName, errorName := name+".plain", name+".error"
		require.NotEqual(t, names[plainName], names[errorName], "%s needs exactly one of %s and %s", e.Name(), plainName, errorName)
		if names[plainName] {
			want, rerr := os.ReadFile(filepath.Join(vectorDir, plainName))
			require.NoError(t, rerr)
			require.NoError(t, err, e.Name())
			require.True(t, bytes.Equal(want, got), "%s decodes to %d bytes that are not %s", e.Name(), len(got), plainName)
			checked[plainName] = true
		} else {
			want, rerr := os.ReadFile(filepath.Join(vectorDir, errorName))
			require.NoError(t, rerr)
			require.EqualError(t, err, strings.TrimSpace(string(want)), e.Name())
			checked[errorName] = true
		}
		checked[e.Name()] = true
	}
	for name := range names {
		require.True(t, checked[name], "%s in %s belongs to no vector: name it NAME.chunk with NAME.plain or NAME.error", name, vectorDir)
	}
	require.GreaterOrEqual(t, vectors, 10)
}

// vectorKey is the test key for a sealed vector (by its header's key size), nil otherwise.
func vectorKey(t testing.TB, file []byte) *chunkfile.Key {
	if len(file) < 12 || file[10] != 1 {
		return nil
	}
	switch bits := int(file[11]) * 8; bits {
	case 128, 192, 256:
		return testKey(t, bits)
	}
	return nil
}

// writeVectors makes the vectors (go test ./spill/chunkfile -run TestVectors -update). File ids
// are random, so every run makes new bytes; commit them only when the format changes.
func writeVectors(t *testing.T) {
	require.NoError(t, os.MkdirAll(vectorDir, 0o755))
	old, err := filepath.Glob(filepath.Join(vectorDir, "*.*"))
	require.NoError(t, err)
	for _, p := range old {
		if filepath.Base(p) != "README.md" {
			require.NoError(t, os.Remove(p))
		}
	}
	text := compressibleBytes(3500, 42)
	random := randomBytes(2500, 43)
	records := sortedRecords(80)[:3000]
	zstd19 := mustZstd(t, 19)
	good := []struct {
		name string
		data []byte
		opts chunkfile.Options
	}{
		{"none-empty", nil, chunkfile.Options{ChunkSize: 1024}},
		{"none-one-chunk", text[:100], chunkfile.Options{ChunkSize: 1024}},
		{"none-exact-chunks", text[:2048], chunkfile.Options{ChunkSize: 1024}},
		{"none-multi", text, chunkfile.Options{ChunkSize: 1024}},
		{"lz4-multi", text, chunkfile.Options{Codec: chunkfile.LZ4, ChunkSize: 1024}},
		{"lz4-incompressible", random, chunkfile.Options{Codec: chunkfile.LZ4, ChunkSize: 1024}},
		{"zstd1-multi", text, chunkfile.Options{Codec: mustZstd(t, 1), ChunkSize: 1024}},
		{"zstd19-multi", text, chunkfile.Options{Codec: zstd19, ChunkSize: 1024}},
		{"lz4-default-chunk", text, chunkfile.Options{Codec: chunkfile.LZ4}},
		{"aes128-lz4-multi", text, chunkfile.Options{Codec: chunkfile.LZ4, Key: testKey(t, 128), ChunkSize: 1024}},
		{"aes192-none-multi", text, chunkfile.Options{Key: testKey(t, 192), ChunkSize: 1024}},
		{"aes256-zstd1-multi", text, chunkfile.Options{Codec: mustZstd(t, 1), Key: testKey(t, 256), ChunkSize: 1024}},
		{"aes256-lz4-empty", nil, chunkfile.Options{Codec: chunkfile.LZ4, Key: testKey(t, 256), ChunkSize: 1024}},
		// Records of 41 bytes, shuffled: rows straddle the 1 KiB chunks, and the last chunk has a tail.
		{"lz4-shuffled", records, chunkfile.Options{Codec: chunkfile.LZ4, ChunkSize: 1024, Shuffle: 41}},
		{"aes128-none-shuffled", records, chunkfile.Options{Key: testKey(t, 128), ChunkSize: 1024, Shuffle: 41}},
	}
	files := map[string][]byte{}
	for _, v := range good {
		files[v.name] = encode(t, v.data, v.opts, false)
		writeVector(t, v.name+".chunk", files[v.name])
		writeVector(t, v.name+".plain", v.data)
	}
	// Bad vectors: each is a good one changed as its name says.
	spans := chunkSpans(t, files["lz4-multi"])
	bad := map[string][]byte{
		"bad-lz4-cut-at-chunk-boundary": files["lz4-multi"][:spans[3][1]],
		"bad-lz4-cut-mid-chunk":         files["lz4-multi"][:spans[2][0]+20],
		"bad-lz4-flipped-bit":           flip(files["lz4-multi"], spans[2][0]+30),
		"bad-none-flipped-bit":          flip(files["none-multi"], 32+9+500),
		"bad-aes128-flipped-bit":        flip(files["aes128-lz4-multi"], chunkSpans(t, files["aes128-lz4-multi"])[3][0]+15),
		"bad-lz4-trailing-byte":         append(bytes.Clone(files["lz4-multi"]), 0),
		"bad-version":                   func() []byte { b := bytes.Clone(files["none-one-chunk"]); b[8] = 2; return b }(),
		"bad-shuffle-past-chunk":        func() []byte { b := bytes.Clone(files["lz4-shuffled"]); b[14] = 8; return b }(),
	}
	four := randomBytes(4*1024+100, 44) // five chunks, four of them full
	a := encode(t, four, chunkfile.Options{Key: testKey(t, 256), ChunkSize: 1024}, false)
	b := encode(t, four, chunkfile.Options{Key: testKey(t, 256), ChunkSize: 1024}, false)
	sa := chunkSpans(t, a)
	bad["bad-aes256-spliced"] = append(append(bytes.Clone(a[:sa[2][0]]), b[sa[2][0]:sa[2][1]]...), a[sa[2][1]:]...)
	bad["bad-aes256-reordered"] = bytes.Join([][]byte{a[:sa[2][0]], a[sa[3][0]:sa[3][1]], a[sa[2][0]:sa[2][1]], a[sa[3][1]:]}, nil)
	var names []string
	for name := range bad {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		file := bad[name]
		_, err := decode(file, vectorKey(t, file), chunkfile.ReaderOptions{})
		require.Error(t, err, name)
		writeVector(t, name+".chunk", file)
		writeVector(t, name+".error", []byte(err.Error()+"\n"))
	}
	// The fuzzer starts from the vectors.
	seedDir := filepath.Join("testdata", "fuzz", "FuzzRead")
	require.NoError(t, os.RemoveAll(seedDir))
	require.NoError(t, os.MkdirAll(seedDir, 0o755))
	for name, file := range files {
		require.NoError(t, os.WriteFile(filepath.Join(seedDir, name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", file), 0o644))
	}
	for name, file := range bad {
		require.NoError(t, os.WriteFile(filepath.Join(seedDir, name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", file), 0o644))
	}
}

func writeVector(t *testing.T, name string, b []byte) {
	require.NoError(t, os.WriteFile(filepath.Join(vectorDir, name), b, 0o644))
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x10
	return c
}
