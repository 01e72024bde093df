//go:build s3server

package spill_test

// The remote tier's throughput against a real S3-compatible server (make bench-remote,
// docs/benchmarks/remote.md), each beside its baseline in the same iterations, alternating which
// goes first, so that the ratio holds on a machine others share:
//
//   - BenchmarkRemoteWrite: a framed spill file written through a Manager whose only tier is the
//     Remote, against the client's own PutObject of the bytes that file stored (its on-wire
//     bytes, compressed and sealed), so that compression flatters neither side;
//   - BenchmarkRemoteRead: that file read in order through its Reader, against one GET of the
//     whole object;
//   - BenchmarkRemoteMerge16: the external sort's final merge (plan/extsort) of 16 runs that are
//     all remote files, with every request to the store held benchRemoteLatency by the fault
//     proxy, against the same merge through the proxy with no delay.
//
// Throughput is of on-wire bytes (the objects' sizes) for write and read, of the records' bytes
// for the merge.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/spillway/spillway/plan/extsort"
	"github.com/spillway/spillway/spill"
	"github.com/spillway/spillway/spill/chunkfile"
	"github.com/spillway/spillway/spill/internal/faultproxy"
)

const (
	// benchRemoteBytes is the plain bytes of the file BenchmarkRemoteWrite and Read spill
	// (SPILLWAY_BENCH_REMOTE_MB overrides it, in MiB).
	benchRemoteBytes = 256 << 20
	// benchMergeRuns runs of benchMergeRunShare of benchBytes()/benchMergeRuns of records each
	// make BenchmarkRemoteMerge16's input: 12 MiB a run by default, near the budget's half as a
	// sort's runs are, and under a part once stored (one PUT each): through the fault proxy,
	// s3proxy's filesystem backend now and then loses a part of a multipart upload (its
	// completion fails, "unexpected EOF"), which BenchmarkRemoteWrite measures directly.
	benchMergeRuns     = 16
	benchMergeRunShare = 0.75
	// benchMergeBudget is the sort's budget: a Spark task's share of a modest executor. It sets
	// the runs' chunk size (64 KiB) and holds one run's records before each spill.
	benchMergeBudget = 32 << 20
	// benchRemoteLatency is what the fault proxy adds to every request of the slow merge: a
	// store across a region, or a busy one.
	benchRemoteLatency = 20 * time.Millisecond
)

func benchBytes() int {
	if mb, err := strconv.Atoi(os.Getenv("SPILLWAY_BENCH_REMOTE_MB")); err == nil && mb > 0 {
		return mb << 20
	}
	return benchRemoteBytes
}

// benchRows is n bytes of rows like a spilled table's (TPC-H lineitem as text: numbers, dates,
// flags and a comment of dictionary words): lz4 stores about half of them.
func benchRows(n int, seed uint64) []byte {
	words := strings.Fields("the quick express deposits sleep carefully final packages wake furiously " +
		"regular accounts haggle blithely pending requests among ironic theodolites cajole slyly " +
		"special instructions nag bold foxes above unusual pinto beans integrate quietly")
	flags := []string{"N|O", "R|F", "A|F", "N|F"}
	modes := []string{"TRUCK", "MAIL", "SHIP", "AIR", "RAIL", "FOB", "REG AIR"}
	r := rand.New(rand.NewPCG(seed, 6))
	b := bytes.NewBuffer(make([]byte, 0, n+256))
	for b.Len() < n {
		fmt.Fprintf(b, "%d|%d|%d|%d|%d|%.2f|0.0%d|0.0%d|%s|1996-%02d-%02d|1996-%02d-%02d|DELIVER IN PERSON|%s|",
			r.IntN(6_000_000), r.IntN(200_000), r.IntN(10_000), 1+r.IntN(7), 1+r.IntN(50), 900+r.Float64()*100_000,
			r.IntN(10), r.IntN(9), flags[r.IntN(len(flags))], 1+r.IntN(12), 1+r.IntN(28), 1+r.IntN(12), 1+r.IntN(28),
			modes[r.IntN(len(modes))])
		for i := range 3 + r.IntN(6) {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[r.IntN(len(words))])
		}
		b.WriteByte('\n')
	}
	return b.Bytes()[:n]
}

// rawClient is a minio client of the server, as s3store's but driven directly: the baseline.
func rawClient(b testing.TB) *minio.Client {
	b.Helper()
	endpoint := strings.TrimPrefix(envOr(b, "SPILLWAY_S3_ENDPOINT"), "http://")
	c, err := minio.New(endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(envOr(b, "SPILLWAY_S3_ACCESS_KEY"), envOr(b, "SPILLWAY_S3_SECRET_KEY"), ""),
		Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
	})
	require.NoError(b, err)
	return c
}

// objectKey is the key in the bucket of a store's location or a remote file's path.
func objectKey(location string) string {
	return strings.TrimPrefix(location, "s3a://"+os.Getenv("SPILLWAY_S3_BUCKET")+"/")
}

func mbps(bytes int64, d time.Duration) float64 { return float64(bytes) / 1e6 / d.Seconds() }

// writeSpill writes data to a new framed file of m in writes of 1 MiB and closes its Writer.
func writeSpill(b testing.TB, m *spill.Manager, data []byte) *spill.File {
	b.Helper()
	w, err := m.CreateFramedFile()
	require.NoError(b, err)
	require.True(b, w.File().Remote(), "the file went to a local root: the benchmark measures the remote tier")
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 1<<20)
		_, err := w.Write(rest[:n])
		require.NoError(b, err)
		rest = rest[n:]
	}
	require.NoError(b, w.Close())
	return w.File()
}

func lz4Format() *spill.Format { return &spill.Format{Codec: chunkfile.LZ4} }

// BenchmarkRemoteWrite: per iteration one spill file of benchBytes() through the Manager (lz4,
// sealed: its remote Format) and one PutObject of the bytes such a file stores, with the client's
// defaults (parts of 16 MiB, four sent at once); and the same file written to a local dir.
func BenchmarkRemoteWrite(b *testing.B) {
	s := testStore(b)
	c := rawClient(b)
	m, _ := remoteManager(b, []string{b.TempDir()}, givenUp(), newRemote(b, s, 1<<40), lz4Format())
	data := benchRows(benchBytes(), 1)
	ctx := context.Background()
	bucket := os.Getenv("SPILLWAY_S3_BUCKET")

	// The on-wire bytes: what one such file stored.
	f := writeSpill(b, m, data)
	stored := make([]byte, f.Size())
	_, err := f.ReadAt(stored, 0)
	require.NoError(b, err)
	require.NoError(b, f.Release())
	rawKey := objectKey(s.Location()) + "/raw-put"
	local := localManager(b)

	var spillTime, rawTime, localTime time.Duration
	var spillCPU, rawCPU cpuTotal
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		lf := writeLocal(b, local, data)
		localTime += time.Since(start)
		require.NoError(b, lf.Release())
		for j := range 2 {
			if (i+j)%2 == 0 {
				cpu := startCPU()
				start := time.Now()
				_, err := c.PutObject(ctx, bucket, rawKey, bytes.NewReader(stored), int64(len(stored)), minio.PutObjectOptions{})
				rawTime += time.Since(start)
				rawCPU.add(cpu)
				require.NoError(b, err)
				require.NoError(b, c.RemoveObject(ctx, bucket, rawKey, minio.RemoveObjectOptions{}))
			} else {
				cpu := startCPU()
				start := time.Now()
				f := writeSpill(b, m, data)
				spillTime += time.Since(start)
				spillCPU.add(cpu)
				require.Equal(b, int64(len(stored)), f.Size())
				require.NoError(b, f.Release())
			}
		}
	}
	b.StopTimer()
	n := int64(len(stored)) * int64(b.N)
	b.ReportMetric(mbps(n, spillTime), "spill-MB/s")
	b.ReportMetric(mbps(n, rawTime), "raw-MB/s")
	b.ReportMetric(rawTime.Seconds()/spillTime.Seconds(), "spill/raw")
	b.ReportMetric(float64(len(stored))/float64(len(data)), "stored/plain")
	reportFloor(b, n, spillTime, rawTime, localTime)
	spillCPU.report(b, "spill", n)
	rawCPU.report(b, "raw", n)
}

// reportFloor reports local-MB/s, the same spill file's bytes through a local file (framing,
// compression and sealing alone), and spill/floor: the tier's time against the raw call's and the
// local file's added up, what it takes when neither overlaps the other, as on a machine whose
// cores the server shares.
func reportFloor(b *testing.B, n int64, spillTime, rawTime, localTime time.Duration) {
	b.ReportMetric(mbps(n, localTime), "local-MB/s")
	b.ReportMetric((rawTime+localTime).Seconds()/spillTime.Seconds(), "spill/floor")
}

// localManager is a manager of one local dir, framing as the Remote does (lz4, sealed under the
// key of RemoteKeyBits): what the tier's bytes cost with no store.
func localManager(b *testing.B) *spill.Manager {
	key, err := spill.ProcessKey(spill.RemoteKeyBits)
	require.NoError(b, err)
	m, _ := remoteManager(b, []string{b.TempDir()}, nil, nil, &spill.Format{Codec: chunkfile.LZ4, Key: key})
	return m
}

func writeLocal(b *testing.B, m *spill.Manager, data []byte) *spill.File {
	b.Helper()
	w, err := m.CreateFramedFile()
	require.NoError(b, err)
	require.False(b, w.File().Remote())
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 1<<20)
		_, err := w.Write(rest[:n])
		require.NoError(b, err)
		rest = rest[n:]
	}
	require.NoError(b, w.Close())
	return w.File()
}

// BenchmarkRemoteRead: per iteration the spill file read in order through its Reader (read-ahead
// on, reads of 32 KiB as io.Copy makes them) and one GET of the whole object, read to its end;
// and, for what decoding alone costs, the same bytes spilled to a local file read so.
func BenchmarkRemoteRead(b *testing.B) {
	s := testStore(b)
	c := rawClient(b)
	m, _ := remoteManager(b, []string{b.TempDir()}, givenUp(), newRemote(b, s, 1<<40), lz4Format())
	data := benchRows(benchBytes(), 2)
	ctx := context.Background()
	bucket := os.Getenv("SPILLWAY_S3_BUCKET")
	f := writeSpill(b, m, data)
	key := objectKey(f.Path())
	lf := writeLocal(b, localManager(b), data)

	var spillTime, rawTime, localTime time.Duration
	var spillCPU, rawCPU cpuTotal
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		r, err := lf.OpenReader(spill.ReaderOptions{})
		require.NoError(b, err)
		_, err = io.Copy(io.Discard, r)
		localTime += time.Since(start)
		require.NoError(b, err)
		require.NoError(b, r.Close())
		for j := range 2 {
			if (i+j)%2 == 0 {
				cpu := startCPU()
				start := time.Now()
				o, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
				require.NoError(b, err)
				n, err := io.Copy(io.Discard, o)
				rawTime += time.Since(start)
				rawCPU.add(cpu)
				require.NoError(b, err)
				require.Equal(b, f.Size(), n)
				require.NoError(b, o.Close())
			} else {
				cpu := startCPU()
				start := time.Now()
				r, err := f.OpenReader(spill.ReaderOptions{})
				require.NoError(b, err)
				n, err := io.Copy(io.Discard, r)
				spillTime += time.Since(start)
				spillCPU.add(cpu)
				require.NoError(b, err)
				require.Equal(b, int64(len(data)), n)
				require.NoError(b, r.Close())
			}
		}
	}
	b.StopTimer()
	n := f.Size() * int64(b.N)
	b.ReportMetric(mbps(n, spillTime), "spill-MB/s")
	b.ReportMetric(mbps(n, rawTime), "raw-MB/s")
	b.ReportMetric(rawTime.Seconds()/spillTime.Seconds(), "spill/raw")
	reportFloor(b, n, spillTime, rawTime, localTime)
	spillCPU.report(b, "spill", n)
	rawCPU.report(b, "raw", n)
}

// mergeRecords are the benchmark's records in the sort's batch format, in batches of one run
// each: a random 16-byte key and a row of benchRows as the value.
func mergeRecords(seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 16))
	runBytes := int(benchMergeRunShare * float64(benchBytes()/benchMergeRuns))
	rows := bytes.Split(benchRows(runBytes*benchMergeRuns+benchMergeRuns<<10, seed), []byte("\n"))
	key := make([]byte, 16)
	batches := make([][]byte, benchMergeRuns)
	for i := range batches {
		var batch []byte
		for len(batch) < runBytes && len(rows) > 0 {
			for k := range key {
				key[k] = byte(r.Uint32())
			}
			batch = extsort.AppendRecord(batch, key, rows[0])
			rows = rows[1:]
		}
		batches[i] = batch
	}
	return batches
}

// mergeOnce spills each batch as one run (all remote: m has no usable local root), then times the
// final merge of them all, read out in batches of 1 MiB, with delay added to every request to
// the store meanwhile. It returns the merge's time and the records' bytes merged.
func mergeOnce(b *testing.B, rt *spill.Remote, p *faultproxy.Proxy, batches [][]byte, delay time.Duration) (time.Duration, int64) {
	b.Helper()
	// A manager of its own, as each Spark task has: a plan of its own under the Remote's prefix.
	m, _ := remoteManager(b, []string{b.TempDir()}, givenUp(), rt, lz4Format())
	defer func() { require.NoError(b, m.Close()) }()
	s, err := extsort.New(m, benchMergeBudget)
	require.NoError(b, err)
	defer s.Close()
	for _, batch := range batches {
		require.NoError(b, s.Add(batch))
		_, err := s.Spill()
		require.NoError(b, err)
	}
	require.EqualValues(b, len(batches), s.Stats().Runs)
	if delay > 0 {
		p.Inject(func(*http.Request) bool { return true }, 0, faultproxy.Fault{Delay: delay})
		defer p.Clear()
	}
	dst := make([]byte, 1<<20)
	var merged int64
	start := time.Now()
	for {
		n, err := s.Next(dst)
		require.NoError(b, err)
		if n == 0 {
			break
		}
		merged += int64(n)
	}
	took := time.Since(start)
	require.EqualValues(b, 1, s.Stats().MergePasses, "one merge of every run, no intermediate pass")
	return took, merged
}

// BenchmarkRemoteMerge16: per iteration the final merge of benchMergeRuns remote runs through the
// fault proxy, once with benchRemoteLatency added to every request and once without.
func BenchmarkRemoteMerge16(b *testing.B) {
	direct := testStore(b)
	p := faultProxy(b)
	rt := newRemote(b, proxied(b, p, direct), 1<<40)
	batches := mergeRecords(3)

	var slow, fast time.Duration
	var merged int64
	b.ResetTimer()
	for i := range b.N {
		for j := range 2 {
			if (i+j)%2 == 0 {
				d, n := mergeOnce(b, rt, p, batches, 0)
				fast += d
				merged += n
			} else {
				d, _ := mergeOnce(b, rt, p, batches, benchRemoteLatency)
				slow += d
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(mbps(merged, fast), "fast-MB/s")
	b.ReportMetric(mbps(merged, slow), "slow-MB/s")
	b.ReportMetric(fast.Seconds()/slow.Seconds(), "slow/fast")
}

// cpuSample is the CPU time used so far by this process and by the server (SPILLWAY_S3_PID,
// from /proc: 0 when it is not set or cannot be read).
type cpuSample struct{ self, server time.Duration }

// cpuTotal adds up the CPU time of the phases measured with startCPU and add.
type cpuTotal struct{ self, server time.Duration }

// procCPU is the user and system time of process pid so far, from /proc/<pid>/stat (in clock
// ticks of 10 ms, the kernel's USER_HZ on every platform Spillway builds for).
func procCPU(pid string) time.Duration {
	if pid == "" {
		return 0
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:])) // fields from the state on
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func startCPU() cpuSample {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return cpuSample{self: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), server: procCPU(os.Getenv("SPILLWAY_S3_PID"))}
}

// add adds the CPU time used since s.
func (t *cpuTotal) add(s cpuSample) {
	e := startCPU()
	t.self += e.self - s.self
	t.server += e.server - s.server
}

// report reports the client's (this process's) and the server's CPU milliseconds per MB of n
// bytes, as name-cpu-ms/MB and name-server-cpu-ms/MB: on a machine whose cores the two share,
// what the way costs the cores in all, whichever of them waits.
func (t cpuTotal) report(b *testing.B, name string, n int64) {
	mb := float64(n) / 1e6
	b.ReportMetric(float64(t.self.Microseconds())/1e3/mb, name+"-cpu-ms/MB")
	b.ReportMetric(float64(t.server.Microseconds())/1e3/mb, name+"-server-cpu-ms/MB")
}
