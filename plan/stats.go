package plan

import (
	"fmt"
	"runtime/metrics"
	"strings"

	"github.com/spillway/spillway/plan/offheap"
)

// Stats is a snapshot of what the registry's plans hold and have done.
type Stats struct {
	LivePlans     int64 // plans created and not yet released
	PlansSpilled  int64 // plans that created at least one spill file
	DirsCreated   int64 // plan dirs created
	FilesCreated  int64 // spill files created
	BytesWritten  int64 // bytes written to spill files: on disk, framing included
	LimitFailures int64 // writes refused by a plan's or the executor's limit
	FSErrors      int64 // filesystem calls that failed
	BytesInUse    int64 // bytes in the live spill files of all plans
	GoHeapBytes   int64 // bytes of live and not yet swept objects on the Go heap, outside the Java heap
	// LogicalBytesWritten is the plain bytes written to framed files (sort runs included),
	// whose on-disk bytes are in BytesWritten.
	LogicalBytesWritten int64
	PlansCreated        int64 // plans created since the process started
	// NativeBytes is the memory native operators hold outside the Go heap (package offheap): the
	// sorts' records, indexes and read buffers, given back to the OS as each sort frees them.
	NativeBytes int64
	// NativeCachedBytes is the memory native operators freed and the library keeps mapped a
	// moment for the next ones (offheap.Cached): free for the kernel to take back.
	NativeCachedBytes  int64
	RemoteFilesCreated int64 // spill files created in the remote tier (among FilesCreated)
	RemoteBytesWritten int64 // bytes written to remote spill files (among BytesWritten)
	RemoteBytesRead    int64 // bytes read back from remote spill files
	RemoteRetries      int64 // the object store's answers that its client retried
}

// StatKind says how a value of Stats behaves: a Count only grows while the process lives (a
// metrics system reports its rate; the Spark plugin registers it as a Dropwizard counter), a
// Level goes up and down (reported as it is; a gauge).
type StatKind string

const (
	Count StatKind = "count"
	Level StatKind = "level"
)

// Stat is one value of Stats as it crosses to a binding: its name (the plugin's metric name, the C
// ABI's counter name), its kind, and where it is in Stats.
type Stat struct {
	Name string
	Kind StatKind
	// Doc says what the value means, for its users: the metrics page (docs/user-guide/metrics.md)
	// is generated from it.
	Doc   string
	Value func(*Stats) int64
}

// StatsLayout is the one list of the process's counters, with what each means, for every binding:
// the JNI binding's NativeSpill.statsNames, statsKinds and stats, and the C ABI's
// spillway_stats_count, spillway_stats_describe, spillway_stats_read and spillway_stats_value,
// expose its entries by index, name and kind, and the metrics page is generated from it. Callers
// find a counter by its name, never by a position of their own, so a counter added here needs no
// change anywhere else. A name keeps its meaning for good: renaming or removing one breaks callers
// (for the C ABI, a new SPILLWAY_ABI_VERSION).
var StatsLayout = []Stat{
	{"livePlans", Level,
		"Plans created and not yet released: one per running Spark task that asked for one.",
		func(s *Stats) int64 { return s.LivePlans }},
	{"plansSpilled", Count,
		"Plans that created at least one spill file.",
		func(s *Stats) int64 { return s.PlansSpilled }},
	{"dirsCreated", Count,
		"Plan dirs created: a plan creates one in each local dir it spills into.",
		func(s *Stats) int64 { return s.DirsCreated }},
	{"spillFiles", Count,
		"Spill files created.",
		func(s *Stats) int64 { return s.FilesCreated }},
	{"bytesSpilled", Count,
		"Bytes written to spill files, on disk (compressed and framed).",
		func(s *Stats) int64 { return s.BytesWritten }},
	{"limitFailures", Count,
		"Writes refused by a plan's or the executor's limit.",
		func(s *Stats) int64 { return s.LimitFailures }},
	{"filesystemErrors", Count,
		"Filesystem calls that failed (a missing, full or unwritable local dir).",
		func(s *Stats) int64 { return s.FSErrors }},
	{"bytesInUse", Level,
		"Bytes in live spill files now, all plans together: what the executor limit bounds.",
		func(s *Stats) int64 { return s.BytesInUse }},
	{"goHeapBytes", Level,
		"The library's Go heap, outside the Java heap (count it in spark.executor.memoryOverhead).",
		func(s *Stats) int64 { return s.GoHeapBytes }},
	{"logicalBytesSpilled", Count,
		"Plain bytes written to framed files and sort runs, before compression (against bytesSpilled, the compression ratio).",
		func(s *Stats) int64 { return s.LogicalBytesWritten }},
	{"plansCreated", Count,
		"Plans created: a Spark task that never asks for one creates none.",
		func(s *Stats) int64 { return s.PlansCreated }},
	{"nativeBytes", Level,
		"Memory the native sorts hold outside the Go and Java heaps (records, indexes, read buffers), granted by Spark's memory manager; 0 when no sort runs.",
		func(s *Stats) int64 { return s.NativeBytes }},
	{"nativeCachedBytes", Level,
		"Memory the native sorts freed and the library keeps mapped for the next ones, when spark.spillway.sort.memoryCacheIdle turns that cache on (off by default: 0). With nativeBytes never more than the sorts held at their peak, each buffer kept for that idle time at most, and free for the kernel to take back first under memory pressure.",
		func(s *Stats) int64 { return s.NativeCachedBytes }},
	{"remoteSpillFiles", Count,
		"Spill files created in the remote tier (spark.spillway.remote.uri) because no local dir could take them; among spillFiles.",
		func(s *Stats) int64 { return s.RemoteFilesCreated }},
	{"remoteBytesSpilled", Count,
		"Bytes written to remote spill files (compressed, sealed, framed); among bytesSpilled.",
		func(s *Stats) int64 { return s.RemoteBytesWritten }},
	{"remoteBytesRead", Count,
		"Bytes read back from remote spill files (ranged GETs of the merges and readers).",
		func(s *Stats) int64 { return s.RemoteBytesRead }},
	{"remoteRetries", Count,
		"Answers of the object store that its client retried with backoff: throttling (503 SlowDown, 429), server errors, dropped connections. A call gives up after a few retries or at its time bound.",
		func(s *Stats) int64 { return s.RemoteRetries }},
}

// StatIndex is where the counter named name is in StatsLayout, or an ArgumentError that lists
// the names there are.
func StatIndex(name string) (int, error) {
	for i, s := range StatsLayout {
		if s.Name == name {
			return i, nil
		}
	}
	names := make([]string, len(StatsLayout))
	for i, s := range StatsLayout {
		names[i] = s.Name
	}
	return 0, &ArgumentError{Reason: fmt.Sprintf("there is no counter named %q; the counters are %s", name, strings.Join(names, ", "))}
}

// Stats counts on demand: live and created plans are counted by walking the handle shards, so
// creating and releasing a plan never touches a counter shared by all plans.
func (r *Registry) Stats() Stats {
	st := &r.shared.Stats
	return Stats{
		LivePlans:     int64(r.plans.len()),
		PlansSpilled:  st.PlansSpilled.Load(),
		DirsCreated:   st.DirsCreated.Load(),
		FilesCreated:  st.FilesCreated.Load(),
		BytesWritten:  st.BytesWritten.Load(),
		LimitFailures: st.LimitFailures.Load(),
		FSErrors:      st.FSErrors.Load(),
		BytesInUse:    r.shared.Used(),
		GoHeapBytes:   goHeapBytes(),

		LogicalBytesWritten: st.LogicalBytesWritten.Load(),
		PlansCreated:        r.plans.issued(),
		NativeBytes:         offheap.Mapped(),
		NativeCachedBytes:   offheap.Cached(),
		RemoteFilesCreated:  st.RemoteFilesCreated.Load(),
		RemoteBytesWritten:  st.RemoteBytesWritten.Load(),
		RemoteBytesRead:     st.RemoteBytesRead.Load(),
		RemoteRetries:       st.RemoteRetries.Load(),
	}
}

// goHeapBytes reads the Go heap's size without stopping the world (runtime.ReadMemStats would).
func goHeapBytes() int64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	return int64(sample[0].Value.Uint64())
}
