package plan

import (
	crand "crypto/rand"
	"encoding/binary"
	mrand "math/rand/v2"
	"sync"
)

// handleTable maps 64-bit handles to values without anything shared by all of them: a handle
// belongs to one of many shards, each with its own lock and its own counter, and a new handle
// goes to a shard picked at random, so concurrent plans rarely meet on a cache line.
//
// A handle is a keyed bijective scramble of (shard counter, shard). Bijective means a handle is
// never issued twice (not before 2^58 issues from one shard), so a stale handle can never reach
// a newer value; scrambled means handles are sparse, so a forged or corrupted one misses. The
// shard is recovered from a handle by unscrambling it.
type handleTable[T any] struct {
	key    uint64
	shards [handleShards]handleShard[T]
}

const (
	shardBits    = 6
	handleShards = 1 << shardBits
)

type handleShard[T any] struct {
	mu  sync.Mutex
	seq uint64 // handles issued from this shard
	m   map[uint64]T
	_   [40]byte // a mutex, a counter and a map pointer, padded to a cache line
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

// scramble is splitmix64's finaliser, a bijection on 64-bit values; unscramble is its inverse.
func scramble(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func unscramble(z uint64) uint64 {
	z ^= z>>31 ^ z>>62
	z *= 0x319642b2d24d8ec3 // the inverse of 0x94d049bb133111eb modulo 2^64
	z ^= z>>27 ^ z>>54
	z *= 0x96de1b173f119089 // the inverse of 0xbf58476d1ce4e5b9 modulo 2^64
	return z ^ z>>30 ^ z>>60
}

func (t *handleTable[T]) shard(h uint64) *handleShard[T] {
	return &t.shards[(unscramble(h)^t.key)&(handleShards-1)]
}

// add stores v under a new handle, never 0 (the JVM's idea of "no handle").
func (t *handleTable[T]) add(v T) uint64 {
	i := mrand.Uint64() & (handleShards - 1) // per-thread generator: no shared state
	s := &t.shards[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		s.seq++
		if h := scramble((s.seq<<shardBits | i) ^ t.key); h != 0 {
			s.m[h] = v
			return h
		}
	}
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

// issued is how many handles the table has handed out (at most a few more, never fewer: a
// counter value that scrambles to 0 is skipped), read from the shards' own counters, so that
// counting costs add nothing.
func (t *handleTable[T]) issued() int64 {
	var n uint64
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += s.seq
		s.mu.Unlock()
	}
	return int64(n)
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
