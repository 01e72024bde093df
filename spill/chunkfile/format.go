// Package chunkfile is the spill layer's file format: bytes written to a spill file are cut into
// chunks, each compressed (none, lz4 or zstd), then sealed with AES-GCM under a key held only in
// memory, or checked by CRC-32C when not sealed. A Writer frames bytes onto any append target (a
// spill.File); a Reader decodes them back from any io.ReaderAt, and fails with an error naming the
// chunk — never with wrong bytes — when a file was changed, cut, reordered, spliced or sealed
// under another key. docs/design/spill-file-format.md is the format's specification.
package chunkfile

import (
	"encoding/binary"
	"fmt"
)

// Magic opens every chunk file.
const Magic = "SPILLWAY"

// Version is the format version this package writes and reads.
const Version = 1

// DefaultChunkSize is the plaintext size of every chunk but the last: large enough that the
// per-chunk costs (one append and its accounting, the 25 bytes of framing, one AEAD setup) vanish
// and that zstd has a useful window; small enough that a Reader reading ahead holds about 1 MiB.
const DefaultChunkSize = 256 << 10

// MinChunkSize and MaxChunkSize bound the chunk size a file may declare (a power of two), and so
// what a Reader allocates for any input.
const (
	MinChunkSize = 1 << minChunkShift
	MaxChunkSize = 1 << maxChunkShift
)

const (
	minChunkShift = 10
	maxChunkShift = 22

	headerSize      = 32
	chunkHeaderSize = 9
	crcSize         = 4
	tagSize         = 16

	sealNone   = 0 // each chunk ends with a CRC-32C
	sealAESGCM = 1 // each chunk ends with an AES-GCM tag

	flagLast       = 1 << 0
	flagCompressed = 1 << 1
	knownFlags     = flagLast | flagCompressed
)

// header is the fixed 32-byte file header:
//
//	0  magic "SPILLWAY"   8 version   9 codec   10 seal   11 key bytes   12 log2 chunk size
//	13 shuffle: the record size, 3 bytes (0: none)   16 file id (16 random bytes)
type header struct {
	codec      codecID
	seal       byte
	keyBytes   byte
	chunkShift byte
	shuffle    int // the record size of the shuffle filter (shuffle.go), 0 for none
	fileID     [16]byte
}

func (h *header) chunkSize() int { return 1 << h.chunkShift }

// checkSize is the length of the integrity check that ends every chunk's stored bytes.
func (h *header) checkSize() int {
	if h.seal == sealAESGCM {
		return tagSize
	}
	return crcSize
}

func (h *header) marshal(b []byte) {
	copy(b, Magic)
	b[8] = Version
	b[9] = byte(h.codec)
	b[10] = h.seal
	b[11] = h.keyBytes
	b[12] = h.chunkShift
	b[13], b[14], b[15] = byte(h.shuffle>>16), byte(h.shuffle>>8), byte(h.shuffle)
	copy(b[16:32], h.fileID[:])
}

func parseHeader(b []byte) (header, error) {
	var h header
	if string(b[:8]) != Magic {
		return h, headerError("it does not start with %q: not a spill chunk file", Magic)
	}
	if b[8] != Version {
		return h, headerError("format version %d; this build reads version %d only", b[8], Version)
	}
	h.codec, h.seal, h.keyBytes, h.chunkShift = codecID(b[9]), b[10], b[11], b[12]
	h.shuffle = int(b[13])<<16 | int(b[14])<<8 | int(b[15])
	copy(h.fileID[:], b[16:32])
	switch {
	case h.codec > codecZstd:
		return h, headerError("unknown codec id %d", h.codec)
	case h.seal > sealAESGCM:
		return h, headerError("unknown sealing id %d", h.seal)
	case h.seal == sealNone && h.keyBytes != 0:
		return h, headerError("unsealed, yet it names a %d-bit key", int(h.keyBytes)*8)
	case h.seal == sealAESGCM && h.keyBytes != 16 && h.keyBytes != 24 && h.keyBytes != 32:
		return h, headerError("sealed with a %d-bit key; AES takes 128, 192 or 256", int(h.keyBytes)*8)
	case h.chunkShift < minChunkShift || h.chunkShift > maxChunkShift:
		return h, headerError("chunk size 2^%d; version %d allows 2^%d to 2^%d", h.chunkShift, Version, minChunkShift, maxChunkShift)
	case h.shuffle == 1 || h.shuffle > h.chunkSize():
		return h, headerError("shuffled in records of %d bytes; a writer shuffles records of 2 bytes to the chunk size (%d), or none (0)", h.shuffle, h.chunkSize())
	}
	return h, nil
}

// chunkHeader precedes each chunk's stored bytes: flags, plaintext length, stored length (the
// payload and its integrity check), the lengths big-endian.
type chunkHeader struct {
	flags     byte
	rawLen    uint32
	storedLen uint32
}

func (c chunkHeader) marshal(b []byte) {
	b[0] = c.flags
	binary.BigEndian.PutUint32(b[1:5], c.rawLen)
	binary.BigEndian.PutUint32(b[5:9], c.storedLen)
}

func parseChunkHeader(b []byte) chunkHeader {
	return chunkHeader{flags: b[0], rawLen: binary.BigEndian.Uint32(b[1:5]), storedLen: binary.BigEndian.Uint32(b[5:9])}
}

// validate checks a chunk header against the rules of the format before anything is allocated or
// read for it, so a corrupt length can never make a Reader allocate more than a chunk.
func (c chunkHeader) validate(h *header, index int64) string {
	last := c.flags&flagLast != 0
	compressed := c.flags&flagCompressed != 0
	check := uint32(h.checkSize())
	size := uint32(h.chunkSize())
	switch {
	case c.flags&^knownFlags != 0:
		return fmt.Sprintf("unknown flags %#x", c.flags)
	case c.rawLen > size:
		return fmt.Sprintf("it claims %d bytes of data; chunks of this file hold at most %d", c.rawLen, size)
	case !last && c.rawLen != size:
		return fmt.Sprintf("it holds %d bytes but is not the last chunk; only the last chunk may hold fewer than %d", c.rawLen, size)
	case c.rawLen == 0 && index != 0:
		return "an empty chunk after the first; only an empty file has an empty chunk"
	case c.storedLen < check:
		return fmt.Sprintf("stored length %d is shorter than its %d-byte integrity check", c.storedLen, check)
	case compressed && h.codec == codecNone:
		return "it is marked compressed in a file without a codec"
	case compressed && c.storedLen-check >= c.rawLen:
		return fmt.Sprintf("it is marked compressed but stores %d bytes for %d", c.storedLen-check, c.rawLen)
	case !compressed && c.storedLen-check != c.rawLen:
		return fmt.Sprintf("it is stored uncompressed in %d bytes for %d", c.storedLen-check, c.rawLen)
	}
	return ""
}

// associatedData is what binds a chunk to its place: the whole file header (magic, version,
// codec, sealing, chunk size and the random file id), the chunk's index, and its own header
// (last flag, compressed flag, both lengths). It is the AES-GCM associated data of a sealed chunk
// and the prefix of the CRC-32C of an unsealed one.
func associatedData(b []byte, fileHeader []byte, index uint64, ch []byte) []byte {
	b = append(b[:0], fileHeader...)
	b = binary.BigEndian.AppendUint64(b, index)
	return append(b, ch...)
}

// FormatError reports input that is not a valid chunk file: corrupt, cut, reordered, spliced,
// sealed under another key. Chunk is the chunk's index, or -1 for the file header; Offset is where
// the chunk (or header) starts in the file. The caller adds the file's path.
type FormatError struct {
	Chunk  int64
	Offset int64
	Reason string
}

func (e *FormatError) Error() string {
	if e.Chunk < 0 {
		return "spill chunk file header: " + e.Reason
	}
	return fmt.Sprintf("spill chunk file: chunk %d (at byte %d): %s", e.Chunk, e.Offset, e.Reason)
}

func headerError(format string, args ...any) *FormatError {
	return &FormatError{Chunk: -1, Offset: 0, Reason: fmt.Sprintf(format, args...)}
}
