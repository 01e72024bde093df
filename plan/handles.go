package plan

import (
	crand "crypto/rand"
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// handleTable maps 64-bit handles to values without a lock shared by all of them: handles are
// spread over shards, each with its own lock, so concurrent plans rarely meet.
//
// A handle is a bijective scramble of a counter keyed by a random per-process value. Bijective
// means a handle is never issued twice (not before 2^64 issues), so a stale handle can never
// reach a newer value; scrambled means handles are sparse, so a forged or corrupted one misses.
type handleTable[T any] struct {
	seq    atomic.Uint64
	key    uint64
	shards [handleShards]handleShard[T]
}

const handleShards = 64

type handleShard[T any] struct {
	mu sync.Mutex
	m  map[uint64]T
	_  [48]byte // a mutex and a map pointer, padded to a cache line so shards never share one
}

func newHandleTable[T any]() *handleTable[T] {
	var seed [8]byte
	_, _ = crand.Read(seed[:]) // never fails on Linux
	t := &handleTable[T]{key: binary.LittleEndian.Uint64(seed[:])}
	for i := range t.shards {
		t.shards[i].m = make(map[uint64]T)
	}
	return t
}

// scramble is splitmix64's finaliser, a bijection on 64-bit values.
func scramble(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (t *handleTable[T]) shard(h uint64) *handleShard[T] {
	return &t.shards[h%handleShards]
}

// add stores v under a new handle, never 0 (the JVM's idea of "no handle").
func (t *handleTable[T]) add(v T) uint64 {
	h := scramble(t.seq.Add(1) ^ t.key)
	if h == 0 {
		h = scramble(t.seq.Add(1) ^ t.key)
	}
	s := t.shard(h)
	s.mu.Lock()
	s.m[h] = v
	s.mu.Unlock()
	return h
}

func (t *handleTable[T]) get(h uint64) (T, bool) {
	s := t.shard(h)
	s.mu.Lock()
	v, ok := s.m[h]
	s.mu.Unlock()
	return v, ok
}

// take removes h and returns its value; of two callers racing for one handle only one gets it.
func (t *handleTable[T]) take(h uint64) (T, bool) {
	s := t.shard(h)
	s.mu.Lock()
	v, ok := s.m[h]
	if ok {
		delete(s.m, h)
	}
	s.mu.Unlock()
	return v, ok
}

func (t *handleTable[T]) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}
