package chunkfile_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/spillway/spillway/spill/chunkfile"
	"github.com/stretchr/testify/require"
)

// The benchmarks write and read benchFileSize bytes per op in 1 MiB writes, to files in one temp
// dir: raw (*os.File, the baseline), and through the chunk format for each codec, plain and
// sealed (AES-256). "disk-B/B" is bytes on disk per logical byte. Compare with benchstat:
//
//	go test -run '^$' -bench . -benchtime 4x -count 3 ./spill/chunkfile | tee new.txt
const (
	benchFileSize  = 32 << 20
	benchWriteSize = 1 << 20
)

type benchData struct {
	name string
	data func() []byte
}

var benchDatas = []benchData{
	{"random", func() []byte { return randomBytes(benchFileSize, 77) }},
	{"lineitem", func() []byte { return lineitemRun(benchFileSize) }},
}

type benchFormat struct {
	name string
	raw  bool
	opts chunkfile.Options
}

func benchFormats(b *testing.B) []benchFormat {
	key, err := chunkfile.NewKey(256)
	require.NoError(b, err)
	out := []benchFormat{{name: "raw", raw: true}}
	for _, c := range []codecCase{{"none", chunkfile.None}, {"lz4", chunkfile.LZ4}, {"zstd1", mustZstd(b, 1)}} {
		out = append(out,
			benchFormat{name: c.name + "-plain", opts: chunkfile.Options{Codec: c.codec}},
			benchFormat{name: c.name + "-aes256", opts: chunkfile.Options{Codec: c.codec, Key: key}})
	}
	return out
}

// writeFile writes data to path in 1 MiB writes, raw or framed, and returns the bytes on disk.
func writeFile(b *testing.B, path string, data []byte, f benchFormat) int64 {
	file, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	require.NoError(b, err)
	var w io.Writer = file
	var cw *chunkfile.Writer
	if !f.raw {
		cw, err = chunkfile.NewWriter(file, f.opts)
		require.NoError(b, err)
		w = cw
	}
	for p := data; len(p) > 0; p = p[min(len(p), benchWriteSize):] {
		_, err := w.Write(p[:min(len(p), benchWriteSize)])
		require.NoError(b, err)
	}
	if cw != nil {
		require.NoError(b, cw.Close())
	}
	st, err := file.Stat()
	require.NoError(b, err)
	require.NoError(b, file.Close())
	return st.Size()
}

func BenchmarkWrite(b *testing.B) {
	dir := b.TempDir()
	for _, d := range benchDatas {
		data := d.data()
		for _, f := range benchFormats(b) {
			b.Run(d.name+"/"+f.name, func(b *testing.B) {
				path := filepath.Join(dir, "w-"+d.name+"-"+f.name)
				b.SetBytes(int64(len(data)))
				var stored int64
				for b.Loop() {
					stored = writeFile(b, path, data, f)
				}
				b.ReportMetric(float64(stored)/float64(len(data)), "disk-B/B")
				require.NoError(b, os.Remove(path))
			})
		}
	}
}

func BenchmarkRead(b *testing.B) {
	dir := b.TempDir()
	buf := make([]byte, benchWriteSize)
	for _, d := range benchDatas {
		data := d.data()
		for _, f := range benchFormats(b) {
			path := filepath.Join(dir, "r-"+d.name+"-"+f.name)
			stored := writeFile(b, path, data, f)
			modes := []string{"readahead", "sync"}
			if f.raw {
				modes = []string{""}
			}
			for _, mode := range modes {
				name := d.name + "/" + f.name
				if mode != "" {
					name += "/" + mode
				}
				b.Run(name, func(b *testing.B) {
					b.SetBytes(int64(len(data)))
					for b.Loop() {
						file, err := os.Open(path)
						require.NoError(b, err)
						var r io.Reader = file
						var cr *chunkfile.Reader
						if !f.raw {
							cr, err = chunkfile.NewReader(file, stored, f.opts.Key, chunkfile.ReaderOptions{Synchronous: mode == "sync"})
							require.NoError(b, err)
							r = cr
						}
						n, err := io.CopyBuffer(io.Discard, onlyReader{r}, buf)
						require.NoError(b, err)
						require.Equal(b, int64(len(data)), n)
						if cr != nil {
							require.NoError(b, cr.Close())
						}
						require.NoError(b, file.Close())
					}
					b.ReportMetric(float64(stored)/float64(len(data)), "disk-B/B")
				})
			}
			require.NoError(b, os.Remove(path))
		}
	}
}

// onlyReader hides WriterTo/ReaderFrom so every path copies through the same 1 MiB buffer.
type onlyReader struct{ io.Reader }
