package chunkfile

import (
	"crypto/cipher"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// ReaderOptions tune a Reader.
type ReaderOptions struct {
	// Synchronous turns read-ahead off: each chunk is read and decoded when Read reaches it, on the
	// caller's goroutine. By default one goroutine reads and decodes the next chunk while the
	// caller consumes the current one (two chunk buffers: about 4 chunk sizes of memory instead of
	// 2).
	Synchronous bool
	// Buffers, if set, gives the Reader its chunk buffers (taken as they are first needed, given
	// back by Close), so a caller can keep them off the Go heap. Nil: Go slices.
	Buffers Buffers
}

// Buffers allocates memory for a Reader. Alloc returns a buffer of n bytes or an error, and
// Free takes back, once, a buffer Alloc returned.
type Buffers interface {
	Alloc(n int) ([]byte, error)
	Free(b []byte)
}

// Reader decodes a chunk file from an io.ReaderAt of known size. It delivers a chunk's bytes only
// once the whole chunk is verified (GCM tag or CRC-32C), so input that is not what a Writer wrote
// under this Reader's key gives a *FormatError naming the chunk, never wrong bytes. It allocates
// only buffers of the file's chunk size (at most MaxChunkSize), whatever the input says. Close
// must be called (it stops the read-ahead). A Reader is not safe for concurrent use.
type Reader struct {
	src     io.ReaderAt
	size    int64
	hdr     header
	hdrRaw  [headerSize]byte
	aead    cipher.AEAD
	sync    bool
	buffers Buffers // nil: Go slices

	dec   decoder // the position of the next chunk to decode; owned by the read-ahead while it runs
	slots [2]*slot
	held  atomic.Int64 // bytes of the slots' buffers: Memory, read from any goroutine while the read-ahead grows them

	cur     []byte // the verified bytes of the current chunk not yet read
	curSlot *slot
	skip    int   // bytes of the next chunk to drop (after a Seek into its middle)
	pos     int64 // logical position of the next byte Read returns
	eof     bool
	err     error
	offsets []int64 // file offset of chunk i, as far as a Seek has scanned

	ahead *readAhead
}

// NewReader opens a chunk file of size bytes on src. key must be the Key the file was written
// with, or nil for a file written without one; a sealed file without a key, or an unsealed file
// when a key is given, is refused (an unsealed file in place of a sealed one would be trusted
// data no one sealed).
func NewReader(src io.ReaderAt, size int64, key *Key, opts ReaderOptions) (*Reader, error) {
	r := &Reader{src: src, size: size, sync: opts.Synchronous, buffers: opts.Buffers}
	if size < headerSize {
		return nil, headerError("the file has %d bytes, fewer than the %d-byte header: it was cut or is not a chunk file", size, headerSize)
	}
	if err := readAt(src, r.hdrRaw[:], 0); err != nil {
		return nil, fmt.Errorf("spill chunk file: reading the header: %w", err)
	}
	h, err := parseHeader(r.hdrRaw[:])
	if err != nil {
		return nil, err
	}
	r.hdr = h
	switch {
	case h.seal == sealAESGCM && key == nil:
		return nil, headerError("the file is sealed with a %d-bit key and no key was given", int(h.keyBytes)*8)
	case h.seal == sealNone && key != nil:
		return nil, headerError("the file is not sealed but a key was given: an unsealed file stands where a sealed one was expected")
	case key != nil && len(key.secret) != int(h.keyBytes):
		return nil, headerError("the file is sealed with a %d-bit key, not with the %d-bit key given", int(h.keyBytes)*8, key.Bits())
	case key != nil:
		if r.aead, err = key.fileAEAD(h.fileID[:]); err != nil {
			return nil, err
		}
	}
	r.dec = decoder{r: r, off: headerSize}
	r.offsets = []int64{headerSize}
	return r, nil
}

// ChunkSize is the plaintext size of the file's chunks (all but the last).
func (r *Reader) ChunkSize() int { return r.hdr.chunkSize() }

// Codec names the file's codec ("none", "lz4" or "zstd").
func (r *Reader) Codec() string { return r.hdr.codec.String() }

// Sealed tells whether the file's chunks are sealed with AES-GCM.
func (r *Reader) Sealed() bool { return r.hdr.seal == sealAESGCM }

// Memory is the bytes of chunk buffers the Reader holds now: at most ReaderMemory of its chunk
// size when it reads synchronously, twice that with read-ahead.
func (r *Reader) Memory() int { return int(r.held.Load()) }

// ReaderMemory bounds what Memory returns for a synchronous Reader of a file of chunkSize: one
// chunk's stored bytes with the next chunk's header, and one chunk decompressed. A shuffled file
// takes one chunk more (its planes).
func ReaderMemory(chunkSize int) int { return 2*chunkSize + tagSize + chunkHeaderSize }

// Read reads the file's bytes in order; it returns io.EOF after the last chunk, and the chunk's
// *FormatError (or I/O error) once it reaches a chunk that does not verify. A Read at a chunk's
// start into a p with room for a whole stored chunk (DirectReadSize) reads, verifies and decodes
// that chunk in p itself, on the caller's goroutine, without copying it through a buffer of the
// Reader's; p past the bytes returned is used as scratch space.
func (r *Reader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.eof {
			return 0, io.EOF
		}
		if len(p) == 0 {
			return 0, nil
		}
		if r.ahead == nil && r.skip == 0 && r.hdr.shuffle == 0 && len(p) >= r.DirectReadSize() {
			n := r.readDirect(p)
			if r.err != nil {
				return 0, r.err
			}
			if n > 0 {
				return n, nil
			}
			continue // the empty chunk of an empty file, which is last: io.EOF
		}
		r.next()
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	r.pos += int64(n)
	return n, nil
}

// Peek returns the verified bytes of the current chunk not yet read, decoding the next chunk
// first when none are left, without copying them: a view of the Reader's buffer, valid until the
// next Peek, Read, Seek or Close (Discard leaves it in place). It returns io.EOF after the last chunk, and the chunk's
// *FormatError (or I/O error) once it reaches a chunk that does not verify, as Read does. A
// reader of small records takes them from it in place, and Reads only the few that straddle
// two chunks.
func (r *Reader) Peek() ([]byte, error) {
	for len(r.cur) == 0 {
		if r.err != nil {
			return nil, r.err
		}
		if r.eof {
			return nil, io.EOF
		}
		r.next()
	}
	return r.cur, nil
}

// Discard passes the first n bytes that Peek returned, as a Read of them would. It panics if n
// is more than those.
func (r *Reader) Discard(n int) {
	if n < 0 || n > len(r.cur) {
		panic(fmt.Sprintf("spill chunk file: Discard(%d) with %d bytes peeked", n, len(r.cur)))
	}
	r.cur = r.cur[n:]
	r.pos += int64(n)
}

// DirectReadSize is the smallest p for which Read decodes a chunk in p itself: a whole chunk's
// stored bytes with the longest integrity check, and the next chunk's header read with them. A
// shuffled file is always read through the Reader's buffers.
func (r *Reader) DirectReadSize() int { return r.hdr.chunkSize() + tagSize + chunkHeaderSize }

// readDirect decodes the next chunk into p (at least DirectReadSize bytes) and returns its length,
// or sets eof or err. The read-ahead is not running, so the decoder is the caller's.
func (r *Reader) readDirect(p []byte) int {
	d := r.dec.decode(r.slot(0), p)
	if d.err != nil {
		r.err = d.err
		return 0
	}
	r.eof = d.last
	r.pos += int64(len(d.plain))
	return len(d.plain)
}

// next makes the next chunk current, or sets eof or err.
func (r *Reader) next() {
	if r.curSlot != nil && r.ahead != nil {
		r.ahead.free <- r.curSlot
	}
	r.curSlot = nil
	var d decoded
	if r.sync {
		d = r.dec.decode(r.slot(0), nil)
	} else {
		if r.ahead == nil {
			r.ahead = startReadAhead(&r.dec, r.slot(0), r.slot(1))
		}
		d = <-r.ahead.out
	}
	if d.err != nil {
		r.err = d.err
		r.stopReadAhead()
		return
	}
	r.curSlot, r.cur = d.s, d.plain
	if r.skip > 0 {
		k := min(r.skip, len(r.cur))
		r.cur, r.skip = r.cur[k:], r.skip-k
	}
	if d.last {
		r.eof = true
		r.stopReadAhead()
	}
}

func (r *Reader) slot(i int) *slot {
	if r.slots[i] == nil {
		r.slots[i] = &slot{} // buffers grow to what the chunks need, never past the chunk size
	}
	return r.slots[i]
}

// Seek sets the logical position of the next Read (io.Seeker). Every chunk but the last holds
// ChunkSize bytes, so the target chunk is known at once; its file offset is found by reading the
// chunk headers before it (9 bytes each, once per Reader), and the chunk is read whole and verified
// before any of its bytes are returned. io.SeekEnd reads the headers up to the last chunk.
func (r *Reader) Seek(offset int64, whence int) (int64, error) {
	if r.err != nil {
		return 0, r.err
	}
	var target int64
	switch whence {
	case io.SeekStart:
		target = offset
	case io.SeekCurrent:
		target = r.pos + offset
	case io.SeekEnd:
		end, err := r.logicalSize()
		if err != nil {
			return 0, err
		}
		target = end + offset
	default:
		return 0, fmt.Errorf("spill chunk file: seek whence %d", whence)
	}
	if target < 0 {
		return 0, fmt.Errorf("spill chunk file: seek to %d, before the start", target)
	}
	r.stopReadAhead()
	size := int64(r.hdr.chunkSize())
	index, within := target/size, int(target%size)
	off, last, err := r.chunkOffset(index)
	if err != nil {
		return 0, err
	}
	r.cur, r.curSlot, r.pos = nil, nil, target
	r.eof = index > last
	r.skip = within
	r.dec.index, r.dec.off, r.dec.haveNext = index, off, false
	return target, nil
}

// logicalSize reads the chunk headers up to the last chunk: the file's size in plaintext bytes.
func (r *Reader) logicalSize() (int64, error) {
	for i := int64(len(r.offsets) - 1); ; i++ {
		ch, err := r.scanChunk(i)
		if err != nil {
			return 0, err
		}
		if ch.flags&flagLast != 0 {
			return i*int64(r.hdr.chunkSize()) + int64(ch.rawLen), nil
		}
	}
}

// chunkOffset finds where chunk index starts. When the file ends before it, it returns the
// offset of the last chunk and that chunk's index (so the caller knows index is past the end).
func (r *Reader) chunkOffset(index int64) (int64, int64, error) {
	for i := int64(len(r.offsets) - 1); i < index; i++ {
		ch, err := r.scanChunk(i)
		if err != nil {
			return 0, 0, err
		}
		if ch.flags&flagLast != 0 {
			return r.offsets[i], i, nil
		}
	}
	return r.offsets[index], index, nil
}

// scanChunk reads and validates the header of chunk i, whose offset is known, and records the
// offset of chunk i+1 unless i is the last.
func (r *Reader) scanChunk(i int64) (chunkHeader, error) {
	off := r.offsets[i]
	var b [chunkHeaderSize]byte
	if err := r.dec.readHeader(b[:], i, off); err != nil {
		return chunkHeader{}, err
	}
	ch := parseChunkHeader(b[:])
	if reason := ch.validate(&r.hdr, i); reason != "" {
		return ch, &FormatError{Chunk: i, Offset: off, Reason: reason}
	}
	end := off + chunkHeaderSize + int64(ch.storedLen)
	if end > r.size {
		return ch, &FormatError{Chunk: i, Offset: off, Reason: fmt.Sprintf("the file ends %d bytes into its %d stored bytes: it was cut", r.size-off-chunkHeaderSize, ch.storedLen)}
	}
	if ch.flags&flagLast == 0 && int64(len(r.offsets)) == i+1 {
		r.offsets = append(r.offsets, end)
	}
	return ch, nil
}

// Close stops the read-ahead and drops the buffers. It does not close the source.
func (r *Reader) Close() error {
	r.stopReadAhead()
	if r.err == nil {
		r.err = errors.New("spill chunk file: read after Close")
	}
	if r.buffers != nil {
		for _, s := range r.slots {
			if s == nil {
				continue
			}
			for _, b := range [][]byte{s.stored, s.plain, s.shuffled} {
				if b != nil {
					r.buffers.Free(b)
				}
			}
		}
	}
	r.cur, r.curSlot, r.slots = nil, nil, [2]*slot{}
	r.held.Store(0)
	return nil
}

// grow returns b, or a buffer replacing it, with room for n bytes; n was validated against the
// chunk size. b's contents are not kept.
func (r *Reader) grow(b []byte, n int) ([]byte, error) {
	if cap(b) >= n {
		return b, nil
	}
	var grown []byte
	if r.buffers == nil {
		grown = make([]byte, n)
	} else {
		var err error
		if grown, err = r.buffers.Alloc(n); err != nil {
			return b, err
		}
		if b != nil {
			r.buffers.Free(b)
		}
	}
	r.held.Add(int64(cap(grown) - cap(b)))
	return grown, nil
}
