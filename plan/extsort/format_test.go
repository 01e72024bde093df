package extsort

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
)

type namedFormat struct {
	name   string
	format spill.Format
}

// testFormat is the run file format the package's tests run with; TestMain runs them once for
// each of suiteFormats.
var testFormat namedFormat

func allFormats() []namedFormat {
	zstd, err := chunkfile.Zstd(3)
	if err != nil {
		panic(err)
	}
	key, err := spill.ProcessKey(128)
	if err != nil {
		panic(err)
	}
	var out []namedFormat
	for _, c := range []chunkfile.Codec{chunkfile.None, chunkfile.LZ4, zstd} {
		out = append(out,
			namedFormat{c.String() + "/plain", spill.Format{Codec: c}},
			namedFormat{c.String() + "/sealed", spill.Format{Codec: c, Key: key}})
	}
	return out
}

// suiteFormats covers every codec and both sealings in three runs of the suite; every one of the
// six combinations is in TestRunsInEveryFormat.
func suiteFormats() []namedFormat {
	all := allFormats()
	return []namedFormat{all[0], all[3], all[4]} // none/plain, lz4/sealed, zstd/plain
}

// TestMain runs the suite once per suiteFormats, and only once (in the first) when it runs
// benchmarks: they write in the manager's default format whatever testFormat is, and a second
// run would start -cpuprofile again, which fails and leaves the profile empty.
func TestMain(m *testing.M) {
	flag.Parse()
	formats := suiteFormats()
	if flag.Lookup("test.bench").Value.String() != "" {
		formats = formats[:1]
	}
	code := 0
	for _, f := range formats {
		testFormat = f
		fmt.Fprintf(os.Stderr, "extsort: run files %s\n", f.name)
		if c := m.Run(); c != 0 {
			code = c
		}
	}
	os.Exit(code)
}

// formatManager is a manager writing in format under one new root, closed when the test ends.
func formatManager(t *testing.T, format spill.Format) (root string, m *spill.Manager) {
	t.Helper()
	root = t.TempDir()
	roots, err := spill.NewRoots([]string{root})
	require.NoError(t, err)
	m, err = spill.New(spill.Config{Roots: roots, Limit: 1 << 30, Format: &format})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return root, m
}

// Records the sort spills in every format come back sorted; the stats count the bytes on disk
// and the records' bytes; sealed runs hold no plaintext, compressed ones take less disk.
func TestRunsInEveryFormat(t *testing.T) {
	marker := []byte("PLAINTEXT-MARKER-")
	for _, f := range allFormats() {
		t.Run(f.name, func(t *testing.T) {
			root, m := formatManager(t, f.format)
			s := newSorter(t, m, 64<<10)
			recs := manyRuns(31, 20_000, 24)
			for i := range recs {
				recs[i].val = append(recs[i].val, marker...)
			}
			p := newPeakMeter(s)
			addSpilling(t, s, p, recs, 200)
			st := s.Stats()
			require.Greater(t, st.Runs, int64(50))
			assert.Equal(t, st.SpilledBytes, m.Used(), "SpilledBytes is what the runs take on disk")
			assert.Equal(t, int64(len(encode(recs))), st.SpilledLogicalBytes)
			var onDisk int64
			for _, path := range runFiles(t, root) {
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				onDisk += int64(len(b))
				if f.format.Key != nil { // compression keeps literals: only sealing hides them
					assert.False(t, bytes.Contains(b, marker), "%s holds the plaintext marker", path)
				}
			}
			assert.Equal(t, st.SpilledBytes, onDisk)
			if f.format.Codec != chunkfile.None {
				assert.Less(t, st.SpilledBytes, st.SpilledLogicalBytes, "compressed runs take less disk")
			}
			assertSorted(t, recs, drainSampling(t, s, p, 4096))
			assert.Greater(t, s.Stats().MergePasses, int64(1))
			assert.LessOrEqual(t, p.peak, memoryBound(s, 64))
			require.NoError(t, s.Close())
			assert.Zero(t, m.Used())
			assert.Empty(t, runFiles(t, root))
		})
	}
}

// A run file changed on disk makes Next fail with an error naming the file and the chunk,
// never return wrong records; Close still removes everything.
func TestCorruptRunFailsNextNamingFileAndChunk(t *testing.T) {
	for _, f := range allFormats() {
		t.Run(f.name, func(t *testing.T) {
			root, m := formatManager(t, f.format)
			s := newSorter(t, m, 1<<20)
			recs := randomRecords(32, 5000, 16, 40)
			addAll(t, s, recs[:2500], 4096)
			_, err := s.Spill()
			require.NoError(t, err)
			addAll(t, s, recs[2500:], 4096)
			_, err = s.Spill()
			require.NoError(t, err)
			files := runFiles(t, root)
			require.Len(t, files, 2)
			victim := files[0]
			b, err := os.ReadFile(victim)
			require.NoError(t, err)
			b[len(b)/2] ^= 0x01
			require.NoError(t, os.WriteFile(victim, b, 0o600))

			var got []rec
			var nextErr error
			dst := make([]byte, 4096)
			for {
				n, err := s.Next(dst)
				if err != nil {
					nextErr = err
					break
				}
				if n == 0 {
					break
				}
				got = append(got, decode(t, bytes.Clone(dst[:n]))...)
			}
			require.Error(t, nextErr, "a corrupt run is never read as records")
			var fe *chunkfile.FormatError
			require.ErrorAs(t, nextErr, &fe)
			assert.Contains(t, nextErr.Error(), victim)
			assert.Contains(t, nextErr.Error(), fmt.Sprintf("chunk %d", fe.Chunk))
			// What came out before the error is a sorted prefix of the right answer.
			want := reference(recs)
			require.LessOrEqual(t, len(got), len(want))
			for i := range got {
				require.Equal(t, want[i].key, got[i].key, "record %d", i)
			}
			require.NoError(t, s.Close())
			assert.Empty(t, runFiles(t, root))
			assert.Zero(t, m.Used())
		})
	}
}
