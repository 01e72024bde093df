// Package extsort is an external sort of (key, value) byte records: it sorts in memory within a
// budget, writes sorted runs through a plan's spill.Manager when the budget is reached, and merges
// the runs back k-way. docs/design/external-sort.md describes it whole: the order it keeps, its
// run files, and what it counts in MemoryUsed and why.
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
// # Rooms
//
// Each file holds one part, and arrows run down this list only:
//
//   - extsort.go, run.go, merge.go: the Sorter: its budget and spills, its sorted runs written
//     and read back, and the k-way merge of the runs;
//   - cursor.go: reading the records in memory in key order;
//   - memtable.go: the records in memory, made of the parts below;
//   - index.go, radix.go, shortkeys.go: the sorted index of the records that came in no order;
//   - stretchmerge.go: the merge of stretches, the records that came in key order;
//   - window.go: the key bytes that vary, for the index's prefixes;
//   - order.go: the order tracker, how far the records came in key order;
//   - arena.go: the chunks that hold the records, off the Go heap;
//   - heap.go: the binary min-heap of the merge and of the stretch merge.
package extsort
