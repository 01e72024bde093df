package chunkfile_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillway/spillway/spill/chunkfile"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The benchmarks write and read benchFileSize bytes per op in 1 MiB writes, to files in one temp
// dir: raw (*os.File, the baseline), and through the chunk format for each codec, plain and
// sealed (AES-256), and lz4 shuffled by 41-byte records. "disk-B/B" is bytes on disk per logical
// byte. Compare with benchstat:
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
	// A SQL sort's run of narrow rows: 41-byte records, the shape the shuffle is for.
	{"records41", func() []byte { return sortedRecords(benchFileSize / 41) }},
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
	// Shuffled by the records41 data's record size (on other data it shows the shuffle's cost).
	out = append(out, benchFormat{name: "lz4-shuffle41-plain", opts: chunkfile.Options{Codec: chunkfile.LZ4, Shuffle: 41}})
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
		var data []byte
		for _, f := range benchFormats(b) {
			b.Run(d.name+"/"+f.name, func(b *testing.B) {
				if data == nil { // made only if a sub-benchmark of d runs, outside the clocks
					data = d.data()
				}
				path := filepath.Join(dir, "w-"+d.name+"-"+f.name)
				b.SetBytes(int64(len(data)))
				var stored int64
				cpu := startCPU()
				for b.Loop() {
					stored = writeFile(b, path, data, f)
				}
				cpu.report(b, int64(len(data)))
				b.ReportMetric(float64(stored)/float64(len(data)), "disk-B/B")
				require.NoError(b, os.Remove(path))
			})
		}
	}
}

// BenchmarkRead reads each file from the page cache ("warm") and, for raw, none and lz4, after
// dropping the file's pages ("cold", posix_fadvise DONTNEED after an fsync), where the read-ahead
// has disk reads to overlap.
func BenchmarkRead(b *testing.B) {
	dir := b.TempDir()
	buf := make([]byte, benchWriteSize)
	for _, d := range benchDatas {
		var data []byte
		for _, f := range benchFormats(b) {
			path := filepath.Join(dir, "r-"+d.name+"-"+f.name)
			var stored int64
			// readahead and sync read a chunk's size at a time, through the Reader's buffers;
			// direct reads 1 MiB at a time, which the Reader decodes in place, chunk by chunk.
			modes := []string{"readahead", "sync", "direct"}
			if f.raw {
				modes = []string{"raw"}
			}
			for _, cache := range []string{"warm", "cold"} {
				if cache == "cold" && strings.HasPrefix(f.name, "zstd") {
					continue
				}
				for _, mode := range modes {
					name := d.name + "/" + f.name + "/" + cache
					if !f.raw {
						name += "/" + mode
					}
					b.Run(name, func(b *testing.B) {
						if stored == 0 { // written once, by the first sub-benchmark that runs
							if data == nil {
								data = d.data()
							}
							stored = writeFile(b, path, data, f)
						}
						b.SetBytes(int64(len(data)))
						cpu := startCPU()
						for b.Loop() {
							file, err := os.Open(path)
							require.NoError(b, err)
							if cache == "cold" {
								require.NoError(b, file.Sync())
								require.NoError(b, unix.Fadvise(int(file.Fd()), 0, 0, unix.FADV_DONTNEED))
							}
							var r io.Reader = file
							var cr *chunkfile.Reader
							if !f.raw {
								cr, err = chunkfile.NewReader(file, stored, f.opts.Key, chunkfile.ReaderOptions{Synchronous: mode == "sync"})
								require.NoError(b, err)
								r = cr
							}
							p := buf
							if mode == "readahead" || mode == "sync" {
								p = buf[:chunkfile.DefaultChunkSize]
							}
							n, err := io.CopyBuffer(onlyWriter{io.Discard}, onlyReader{r}, p)
							require.NoError(b, err)
							require.Equal(b, int64(len(data)), n)
							if cr != nil {
								require.NoError(b, cr.Close())
							}
							require.NoError(b, file.Close())
						}
						cpu.report(b, int64(len(data)))
						b.ReportMetric(float64(stored)/float64(len(data)), "disk-B/B")
					})
				}
			}
			if stored != 0 {
				require.NoError(b, os.Remove(path))
			}
		}
	}
}

// cpuClock measures the process's CPU time (user and system, every thread: the read-ahead
// goroutine and the GC included), which a machine shared with other work does not inflate as
// it does wall time.
type cpuClock struct{ start time.Duration }

func startCPU() cpuClock { return cpuClock{cpuTime()} }

func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report adds "cpu-ms/GiB": CPU time per GiB of logical bytes.
func (c cpuClock) report(b *testing.B, bytesPerOp int64) {
	used := cpuTime() - c.start
	gib := float64(bytesPerOp) * float64(b.N) / (1 << 30)
	b.ReportMetric(float64(used.Milliseconds())/gib, "cpu-ms/GiB")
}

// onlyReader and onlyWriter hide WriterTo and ReaderFrom (io.Discard is a ReaderFrom, which
// would read 8 KiB at a time), so every path reads into the buffer given to io.CopyBuffer.
type (
	onlyReader struct{ io.Reader }
	onlyWriter struct{ io.Writer }
)
