package chunkfile

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
)

// Appender is where a Writer puts a file: each Write appends p whole or not at all (spill.File
// does, truncating back whatever a failed write left). A Writer calls Write once per chunk, so a
// failed write leaves the file as it was after the last whole chunk.
type Appender interface {
	Write(p []byte) (int, error)
}

// Options say how a Writer frames a file.
type Options struct {
	// Codec compresses each chunk; the zero value is None.
	Codec Codec
	// Key seals each chunk with AES-GCM; nil leaves chunks in the clear, each checked by CRC-32C.
	Key *Key
	// ChunkSize is the plaintext size of each chunk but the last: a power of two from MinChunkSize
	// to MaxChunkSize, or 0 for DefaultChunkSize.
	ChunkSize int
	// Shuffle, for bytes that are records of one size, is that size (2 to the chunk size): each
	// chunk is stored byte plane by byte plane (the shuffle filter, see shuffle.go), which
	// compresses like values side by side. 0 stores the bytes in their order. A Reader needs no
	// option: the file's header says it.
	Shuffle int
}

// ErrClosed is returned by a Writer's Write after Close or Discard, and by Close after Discard.
var ErrClosed = errors.New("spill chunk file: writer closed or discarded")

// zstdSlack is room past a chunk for zstd's framing of bytes it stores raw.
const zstdSlack = 256

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Writer frames the bytes written to it into chunks on an Appender. Bytes are buffered until a
// chunk is full, and a full chunk is held until more bytes come or Close marks it last, so every
// file ends with a chunk flagged last. Close must be called: it writes the last chunk. A Writer is
// not safe for concurrent use. After any failed append every later call returns that error.
type Writer struct {
	dst    Appender
	hdr    header
	hdrRaw [headerSize]byte
	check  int

	enc    *encoder
	buf    []byte // plaintext not yet framed, at most one chunk: enc's raw body
	chunks uint64 // chunks appended: the index of the next chunk to append

	logical, stored int64
	err             error
	closed          bool
}

// encoder frames one chunk at a time. A frame is one append: room for the file header (sent with
// the first chunk only), the chunk header, then the stored bytes. Bytes are buffered in place in
// raw, and compressed straight into comp, so a chunk is copied once on its way to the file, or
// not at all.
type encoder struct {
	raw      []byte
	comp     []byte
	shuffled []byte     // a chunk in planes, when the file is shuffled
	codec    compressor // nil for None
	aead     cipher.AEAD
	aad      []byte
	nonce    [12]byte
}

// bodyStart is where a chunk's stored bytes start in a frame.
const bodyStart = headerSize + chunkHeaderSize

// NewWriter starts a file on dst. Nothing is written before the first chunk: the file header goes
// out with it, in the same append.
func NewWriter(dst Appender, opts Options) (*Writer, error) {
	size := opts.ChunkSize
	if size == 0 {
		size = DefaultChunkSize
	}
	if size < MinChunkSize || size > MaxChunkSize || size&(size-1) != 0 {
		return nil, fmt.Errorf("spill chunk file: chunk size %d; give a power of two from %d to %d, or 0 for %d", size, MinChunkSize, MaxChunkSize, DefaultChunkSize)
	}
	if opts.Codec.id > codecZstd || (opts.Codec.id == codecZstd && opts.Codec.level == 0) {
		return nil, fmt.Errorf("spill chunk file: codec %v was not made by ParseCodec, Zstd, None or LZ4", opts.Codec)
	}
	if opts.Shuffle < 0 || opts.Shuffle == 1 || opts.Shuffle > size {
		return nil, fmt.Errorf("spill chunk file: shuffle in records of %d bytes; give a record size from 2 to the chunk size (%d), or 0 for none", opts.Shuffle, size)
	}
	w := &Writer{dst: dst}
	w.hdr = header{codec: opts.Codec.id, chunkShift: byte(bits.TrailingZeros(uint(size))), shuffle: opts.Shuffle}
	if _, err := rand.Read(w.hdr.fileID[:]); err != nil {
		return nil, fmt.Errorf("spill chunk file: making a file id: %w", err)
	}
	if opts.Key != nil {
		w.hdr.seal, w.hdr.keyBytes = sealAESGCM, byte(len(opts.Key.secret))
	}
	w.hdr.marshal(w.hdrRaw[:])
	w.check = w.hdr.checkSize()
	e := &encoder{raw: make([]byte, bodyStart+size+w.check), codec: opts.Codec.newCompressor()}
	if e.codec != nil {
		// The slack lets zstd's output for bytes it cannot shrink land in place before it is dropped.
		e.comp = make([]byte, bodyStart+size+w.check+zstdSlack)
	}
	if opts.Shuffle != 0 {
		e.shuffled = make([]byte, size)
	}
	if opts.Key != nil {
		aead, err := opts.Key.fileAEAD(w.hdr.fileID[:])
		if err != nil {
			return nil, err
		}
		e.aead = aead
	}
	w.enc = e
	w.buf = e.raw[bodyStart : bodyStart : bodyStart+size]
	return w, nil
}

// Write buffers p and appends every chunk it completes; it returns len(p) unless an append failed.
// A chunk is encoded straight from p when it can be, without a copy.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, ErrClosed
	}
	size := cap(w.buf)
	n := len(p)
	for len(p) > 0 {
		if len(w.buf) == size { // full, and more is coming: it is not the last chunk
			if err := w.writeChunkEmptying(); err != nil {
				return n - len(p), err
			}
		}
		if len(w.buf) == 0 && len(p) > size {
			if err := w.writeChunk(p[:size], false); err != nil {
				return n - len(p), err
			}
			p = p[size:]
			continue
		}
		k := copy(w.buf[len(w.buf):size], p)
		w.buf = w.buf[:len(w.buf)+k]
		p = p[k:]
	}
	return n, nil
}

// Close appends the last chunk (empty only if nothing was written). Closing twice returns the
// first Close's result.
func (w *Writer) Close() error {
	if w.closed || w.err != nil {
		return w.err
	}
	w.closed = true
	if err := w.writeChunk(w.buf, true); err != nil {
		return err
	}
	w.buf = nil
	return nil
}

// Discard is for a caller that gives up on the file without Close (to release it): it drops the
// bytes buffered and closes the Writer, whose later calls (Close included: the file is not
// finished) return ErrClosed, or the error of a failed append.
func (w *Writer) Discard() {
	w.closed = true
	w.buf = nil
	if w.err == nil {
		w.err = ErrClosed
	}
}

// LogicalSize is the number of bytes written to the Writer so far and appended in whole chunks.
func (w *Writer) LogicalSize() int64 { return w.logical }

// StoredSize is the number of bytes appended to the file: header, framing, compressed and sealed
// chunks — what the file takes on disk.
func (w *Writer) StoredSize() int64 { return w.stored }

// Memory is the bytes of buffers the Writer holds: a frame of about a chunk, one more when the
// file is compressed, and a chunk more when it is shuffled. The zstd encoder's state is shared by all Writers and not counted, nor is lz4's
// (16 KiB an encoder).
func (w *Writer) Memory() int {
	if w.enc == nil {
		return 0
	}
	return cap(w.enc.raw) + cap(w.enc.comp) + cap(w.enc.shuffled)
}

// WriterMemory bounds what Memory returns for any Writer made with opts (whose key, if any, is not
// looked at), so a caller can plan for it before making one.
func WriterMemory(opts Options) int {
	chunkSize := opts.ChunkSize
	if chunkSize == 0 {
		chunkSize = DefaultChunkSize
	}
	frame := bodyStart + chunkSize + tagSize
	n := frame
	if opts.Codec.id != codecNone {
		n += frame + zstdSlack
	}
	if opts.Shuffle != 0 {
		n += chunkSize
	}
	return n
}

// Buffered is the number of bytes written to the Writer and not yet appended.
func (w *Writer) Buffered() int { return len(w.buf) }

// writeChunkEmptying appends the full chunk in w.buf, which is not the last, and empties w.buf.
func (w *Writer) writeChunkEmptying() error {
	if err := w.writeChunk(w.buf, false); err != nil {
		return err
	}
	w.buf = w.buf[:0]
	return nil
}

// writeChunk appends raw, which is in enc's raw body or elsewhere, as the next chunk.
func (w *Writer) writeChunk(raw []byte, last bool) error {
	return w.appendChunk(w.encode(w.enc, raw, last, w.chunks), len(raw))
}

// appendChunk appends frame, the next chunk, of raw plaintext bytes, and counts it.
func (w *Writer) appendChunk(frame []byte, raw int) error {
	if _, err := w.dst.Write(frame); err != nil {
		w.err = fmt.Errorf("spill chunk file: appending chunk %d: %w", w.chunks, err)
		return w.err
	}
	w.chunks++
	w.logical += int64(raw)
	w.stored += int64(len(frame))
	return nil
}

// encode frames raw — in e's raw body, or elsewhere — as chunk index with e's buffers, and returns
// the frame to append.
func (w *Writer) encode(e *encoder, raw []byte, last bool, index uint64) []byte {
	inPlace := len(raw) > 0 && &raw[0] == &e.raw[bodyStart]
	ch := chunkHeader{rawLen: uint32(len(raw))}
	if last {
		ch.flags |= flagLast
	}
	frame, payload := e.raw, raw
	if e.shuffled != nil {
		shuffle(e.shuffled, raw, w.hdr.shuffle)
		payload, inPlace = e.shuffled[:len(raw)], false
	}
	if e.codec != nil {
		if c := e.codec.compress(payload, e.comp[bodyStart:bodyStart+w.chunkSize()]); c != nil {
			ch.flags |= flagCompressed
			if &c[0] != &e.comp[bodyStart] { // zstd grew its own buffer
				copy(e.comp[bodyStart:], c)
			}
			frame, payload = e.comp, e.comp[bodyStart:bodyStart+len(c)]
		}
	}
	ch.storedLen = uint32(len(payload) + w.check)
	ch.marshal(frame[headerSize:bodyStart])
	e.aad = associatedData(e.aad, w.hdrRaw[:], index, frame[headerSize:bodyStart])
	end := bodyStart + len(payload) + w.check
	if e.aead != nil {
		// Seal writes the body from payload: in place when payload is already there.
		e.aead.Seal(frame[bodyStart:bodyStart], nonce(&e.nonce, index), payload, e.aad)
	} else {
		if ch.flags&flagCompressed == 0 && !inPlace {
			copy(frame[bodyStart:], payload)
		}
		crc := crc32.Update(crc32.Update(0, castagnoli, e.aad), castagnoli, payload)
		binary.BigEndian.PutUint32(frame[end-crcSize:end], crc)
	}
	start := headerSize
	if index == 0 {
		copy(frame, w.hdrRaw[:])
		start = 0
	}
	return frame[start:end]
}

// chunkSize is the plaintext size of a full chunk.
func (w *Writer) chunkSize() int { return 1 << w.hdr.chunkShift }
