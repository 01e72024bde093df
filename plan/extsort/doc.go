// Package extsort is an external sort of (key, value) byte records: it sorts in memory within a
// budget, writes sorted runs through a plan's spill.Manager when the budget is reached, and merges
// the runs back k-way.
//
// # Batch format
//
// Records cross JNI in batches, never one call per record. A batch is zero or more records back
// to back, each
//
//	u32 keyLen | u32 valueLen | keyLen bytes of key | valueLen bytes of value
//
// with both lengths little-endian, unsigned and at most math.MaxInt32 (so a JVM int holds them).
// There is no batch header and no padding: a batch ends where its last record ends. Batches
// returned by Next, and run files, use the same format.
//
// # Order
//
// Keys compare as unsigned bytes (bytes.Compare): a key that is a prefix of another sorts first.
// Records with equal keys come out in the order they were added, across all Adds, whether they
// were spilled or not. Values are carried along and never compared.
//
// Records that come in key order, or in a few stretches in key order (a sort over a sorted scan,
// a table stored by the key and read file by file), are not radix sorted: Add compares each key
// with the one before while they come so, and the records in memory are then read in key order
// by merging their stretches, by blocks of records found by a binary search, each copied out or
// written whole. Past the first 65,536 such records (indexedFirst) they have no index at all, and
// none is counted (see MemoryUsed below). A record out of line with its stretch (below it, the
// records after it resuming it: a null key among rows stored by the key, an event that came late;
// or above it, the record after it falling back: a spike) does not end the stretch: it is held
// apart, indexed, and merged with the stretches as they are read. Keys in no order stop the
// comparing within a few thousand records, and are sorted as below; records that come out of
// order after more than 65,536 in stretches are sorted so, and merged with those, which stay as
// they were.
//
// # Run files
//
// Runs are framed spill files (spill.Manager.CreateFramedFileWith): compressed and
// sealed as the manager's spill.Format says, every chunk checked, so a run changed on disk makes
// Next fail with an error naming the file and the chunk, never return wrong records. Their chunks
// are small — the budget / 512, a power of two from 1 KiB to 64 KiB — since a run open in a merge
// holds one stored and one decoded chunk, read synchronously (no read-ahead). A run spilled from
// memory whose records all have one size (a SQL sort of fixed-width columns) is shuffled: stored
// byte plane by byte plane, which lz4 shrinks about three times more; its reader holds the planes
// of a chunk too. Stats.SpilledBytes is what the runs take on disk; Stats.SpilledLogicalBytes the
// records' bytes written to them.
//
// When a disk fills up under a run being written (spill.RootFull: that disk has then left the
// manager's rotation), the run is written again from the start in a new file on another disk:
// from memory for a spill, from its inputs — kept until the new run is whole — for an
// intermediate pass.
//
// # Memory
//
// The records, the index and the merge's read buffers live off the Go heap, in mappings of
// package offheap (from 64 KiB on; smaller budgets' chunks are Go slices) that are freed as
// soon as the sort is done with them: when a run is written, when the in-memory records are all
// returned, and at Close, whatever state the sort is in. So what the sort frees goes back to the
// OS at once (those of 2 MiB or more through offheap's cache, for the next sort to take, within
// a minute), and the Go heap holds bookkeeping only (the runs, the merge heap, a run writer's
// chunk buffers while it writes). One exception: when Add spills because the budget is reached, or the caller
// spills with SpillToRefill (Spark spilling the sort to grant the sort's own next batch), the
// run's arena chunks are kept, emptied, and the next records fill them (as many as leave the
// next run room under the budget, and counted in MemoryUsed); they are freed by Spill, by a
// SpillToRefill with no records in memory, when the merge starts, and at Close. Mapping them
// again would have the kernel clear every page. The first two of these spills write only the
// older half of the records (the oldest chunks), whose chunks the next records fill: a sort whose
// input is under one and a half budgets then writes half a budget instead of one, and no input
// makes the sort write more than whole spills would (see Sorter.spill).
//
// MemoryUsed counts what the sorter really holds: the capacity of its record arena (records are
// copied in, encoded as above, into chunks of up to 4 MiB; a larger record gets its own chunk),
// plus a 16-byte index entry per record (the in-memory sort needs no more: an in-place radix
// sort on the entries' prefixes, or, for short keys, a radix sort of one word a record that
// takes the index's two halves in turn) but for records held in stretches in key order past the
// first 65,536 (see Order), which need none (a record held apart from its stretch counts one, so
// a record that falls back under up to 8 of a stretch's last records, spikes, brings their
// entries too: AddGrowthBound foresees them), plus, once merging, what each open run's reader holds
// (its chunk buffers and a record buffer) and, during an intermediate merge pass, the chunk
// buffers of the run it writes. While records are held it also counts S, the WriterMemory of the
// run a spill of them would write (shuffled, at most): the writer exists only while a spill runs,
// but counted with the records it is in the grant Spark gave for them, so a spill Spark asks for
// takes no memory Spark has not granted. A spill gives S back with the records.
//
// A run's cost is what its reader may hold: ReaderMemory = 2 chunks + 25 bytes (chunk buffers,
// chunkfile.ReaderMemory), one chunk more for a run of records of one size (shuffled, see
// Sorter.shuffleSize), plus the run's largest record (the record buffer grows to it), each
// buffer of 64 KiB or more rounded up to a page as offheap maps it (offheap.Size: so with 64 KiB
// chunks a reader's cost is 132 KiB, not 128 KiB + 25 bytes). A
// writer's cost, WriterMemory, is one chunk and its framing, two when the file is compressed
// (chunkfile.WriterMemory).
//
// While records are added, Add spills before a record would take MemoryUsed over the budget
// less a reserve for the final merge's readers (the runs' costs, up to 1/64 of the budget), so
// that the records still in memory at the end can usually stay there for the merge.
//
// A merge opens only as many runs as their costs fit in the budget, and never more than 64 MiB
// of them (maxMergeReaders) however large the budget: a budget that follows a large grant would
// otherwise open thousands of runs, and their descriptors, at once. When the runs do not fit
// beside the records still in memory, those records are spilled as one more run first; when the
// runs are still too many, intermediate passes merge contiguous groups of the oldest runs, each
// group into a new run that takes its place in age order (so equal keys keep their order), with
// the new run's WriterMemory counted in, until the final merge fits. A merge never opens fewer
// than two runs.
//
// So MemoryUsed never passes the largest of:
//
//   - the budget, plus S in a budget under 8 S (there the writer's reservation comes on top of
//     the budget rather than out of it: see Sorter.addLimit);
//   - R + 16 + S, where R is the largest record added (encoded, header included): a record
//     larger than the whole budget is held alone;
//   - 2 × (ReaderMemory + chunk + R) + WriterMemory: the smallest merge there is, two runs
//     (shuffled, at most) into a third, needed only when the budget is smaller than that.
//
// With 1 KiB chunks (budgets under 1 MiB) ReaderMemory is 2,073 bytes, WriterMemory at most 2,418
// and S 3,442, so MemoryUsed ≤ budget + 2 × (4 KiB + R) + 4 KiB at any size of input. With 64 KiB
// chunks (budgets from 32 MiB) S is 3 chunks and their framing, under 1% of the budget. Not
// counted are the encoders' state (lz4's 16 KiB each, zstd's shared by the process), Go's own
// overhead, and the merge heap's pointers (a few words a run). On disk, an intermediate pass
// holds its group's data twice until its new run is whole, so the spill limit must allow for one
// group beyond the data.
//
// The merge passes run inside the first Next call, under the sorter's lock: a Spill or
// MemoryUsed from another thread waits for them. The records in memory are spilled before the
// passes, so such a Spill has nothing to free anyway.
package extsort
