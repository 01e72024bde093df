package extsort

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill"
)

var updateVectors = flag.Bool("update-vectors", false, "rewrite testdata/sort/*.in and *.out")

// vectorsDir holds batches shared with the JVM suites, which encode and decode the same format:
// NAME.in is an input batch, NAME.out the same records sorted, both in the batch format.
const vectorsDir = "../../testdata/sort"

// vectorInputs are the shared cases; -update-vectors writes them and their sorted form (from
// the test's reference sort, never from the sorter under test).
func vectorInputs() map[string][]rec {
	r := rand.New(rand.NewPCG(7, 7))
	random := make([]rec, 3000)
	for i := range random {
		random[i] = rec{key: randBytes(r, r.IntN(24)), val: randBytes(r, r.IntN(40))}
	}
	ties := make([]rec, 0, 300)
	for i := range 300 {
		ties = append(ties, rec{key: []byte{byte(i % 3), 0xff}, val: []byte{byte(i >> 8), byte(i)}})
	}
	return map[string][]rec{
		"edges": {
			{key: []byte{0xff, 0xff}, val: []byte("ff ff")},
			{key: nil, val: []byte("empty key")},
			{key: []byte{0x00}, val: nil},
			{key: []byte("abcdefgh-long-shared-prefix-2"), val: []byte("2")},
			{key: []byte("abcdefgh-long-shared-prefix-1"), val: []byte("1")},
			{key: []byte("abcdefgh"), val: []byte("prefix of the two above")},
			{key: []byte{0x00, 0x00}, val: []byte("two zeros")},
			{key: nil, val: nil},
			{key: []byte{0x80}, val: []byte("unsigned: after 0x7f")},
			{key: []byte{0x7f}, val: []byte("0x7f")},
		},
		"ties":   ties,
		"random": random,
	}
}

func TestSharedVectors(t *testing.T) {
	if *updateVectors {
		require.NoError(t, os.MkdirAll(vectorsDir, 0o755))
		for name, recs := range vectorInputs() {
			require.NoError(t, os.WriteFile(filepath.Join(vectorsDir, name+".in"), encode(recs), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(vectorsDir, name+".out"), encode(reference(recs)), 0o644))
		}
	}
	ins, err := filepath.Glob(filepath.Join(vectorsDir, "*.in"))
	require.NoError(t, err)
	require.Len(t, ins, len(vectorInputs()), "run go test ./plan/extsort -run TestSharedVectors -update-vectors")
	// Every file is half of a NAME.in/NAME.out pair: a stray one would be read by no test.
	entries, err := os.ReadDir(vectorsDir)
	require.NoError(t, err)
	for _, e := range entries {
		base, ext := strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())), filepath.Ext(e.Name())
		_, known := vectorInputs()[base]
		require.True(t, known && (ext == ".in" || ext == ".out"), "%s in %s is no vector of vectorInputs", e.Name(), vectorsDir)
	}
	roots, err := spill.NewRoots([]string{t.TempDir()})
	require.NoError(t, err)
	for _, in := range ins {
		for _, budget := range []int64{512, 64 << 20} { // spilling, and in memory
			input, err := os.ReadFile(in)
			require.NoError(t, err)
			want, err := os.ReadFile(in[:len(in)-len(".in")] + ".out")
			require.NoError(t, err)
			m, err := spill.New(spill.Config{Roots: roots, Limit: 1 << 30})
			require.NoError(t, err)
			s, err := New(m, budget)
			require.NoError(t, err)
			require.NoError(t, s.Add(input))
			var got bytes.Buffer
			for _, r := range drain(t, s, 1024) {
				got.Write(AppendRecord(nil, r.key, r.val))
			}
			if !bytes.Equal(want, got.Bytes()) {
				t.Errorf("%s with a %d-byte budget: the output differs from %s.out", in, budget, filepath.Base(in[:len(in)-3]))
			}
			require.NoError(t, s.Close())
			require.NoError(t, m.Close())
		}
	}
}
