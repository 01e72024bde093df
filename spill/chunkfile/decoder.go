package chunkfile

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// slot is the buffers one chunk is read and decoded in: a Reader has two, one the caller reads
// while read-ahead fills the other.
type slot struct {
	stored   []byte // the chunk's stored bytes, then the next chunk's header when read with them
	plain    []byte // decompressed bytes
	shuffled []byte // a shuffled file's decompressed bytes, in planes, before plain gets them back
	aad      []byte
	nonce    [12]byte
}

// decoded is what decoding one chunk gave: its plain bytes in slot s (or the caller's buffer),
// whether it is the last, or why it failed.
type decoded struct {
	s     *slot
	plain []byte
	last  bool
	err   error
}

// decoder reads and verifies chunks in order.
type decoder struct {
	r        *Reader
	index    int64
	off      int64
	next     [chunkHeaderSize]byte // the header of chunk index, when read with the chunk before it
	haveNext bool
}

func (d *decoder) fail(reason string, args ...any) decoded {
	return decoded{err: &FormatError{Chunk: d.index, Offset: d.off, Reason: fmt.Sprintf(reason, args...)}}
}

func (d *decoder) readHeader(b []byte, index, off int64) error {
	size := d.r.size
	switch {
	case off == size:
		return &FormatError{Chunk: index, Offset: off, Reason: "the file ends before this chunk, and the chunk before it is not marked last: it was cut"}
	case off+chunkHeaderSize > size:
		return &FormatError{Chunk: index, Offset: off, Reason: fmt.Sprintf("the file ends %d bytes into the %d-byte chunk header: it was cut", size-off, chunkHeaderSize)}
	}
	if err := readAt(d.r.src, b, off); err != nil {
		return fmt.Errorf("spill chunk file: reading chunk %d (at byte %d): %w", index, off, err)
	}
	return nil
}

// decode reads, verifies and decodes the next chunk. Its plain bytes land in dst when dst is not
// nil (it has room for the chunk's stored bytes and the next header: Reader.DirectReadSize), else
// in s's buffers.
func (d *decoder) decode(s *slot, dst []byte) decoded {
	r := d.r
	var hb [chunkHeaderSize]byte
	if d.haveNext {
		hb = d.next
	} else if err := d.readHeader(hb[:], d.index, d.off); err != nil {
		return decoded{err: err}
	}
	ch := parseChunkHeader(hb[:])
	if reason := ch.validate(&r.hdr, d.index); reason != "" {
		return d.fail("%s", reason)
	}
	last := ch.flags&flagLast != 0
	bodyOff := d.off + chunkHeaderSize
	end := bodyOff + int64(ch.storedLen)
	switch {
	case end > r.size:
		return d.fail("the file ends %d bytes into its %d stored bytes: it was cut", r.size-bodyOff, ch.storedLen)
	case last && end < r.size:
		return d.fail("the file goes on %d bytes past its last chunk", r.size-end)
	}
	// The next chunk's header comes in the same read, when the file has it.
	n := int(ch.storedLen)
	withNext := !last && end+chunkHeaderSize <= r.size
	if withNext {
		n += chunkHeaderSize
	}
	compressed := ch.flags&flagCompressed != 0
	var buf []byte
	if dst != nil && !compressed {
		buf = dst[:n] // verified and unsealed in place: the payload is the plain bytes
	} else {
		stored, err := r.grow(s.stored, n)
		if err != nil {
			return decoded{err: fmt.Errorf("spill chunk file: a buffer for chunk %d: %w", d.index, err)}
		}
		s.stored = stored
		buf = s.stored[:n]
	}
	if err := readAt(r.src, buf, bodyOff); err != nil {
		return decoded{err: fmt.Errorf("spill chunk file: reading chunk %d (at byte %d): %w", d.index, d.off, err)}
	}
	body := buf[:ch.storedLen]
	s.aad = associatedData(s.aad, r.hdrRaw[:], uint64(d.index), hb[:])
	var payload []byte
	if r.aead != nil {
		var err error
		payload, err = r.aead.Open(body[:0], nonce(&s.nonce, uint64(d.index)), body, s.aad)
		if err != nil {
			return d.fail("AES-GCM authentication failed: the chunk was changed, moved or taken from another file, or the file was sealed under another key")
		}
	} else {
		payload = body[:len(body)-crcSize]
		want := binary.BigEndian.Uint32(body[len(payload):])
		if got := crc32.Update(crc32.Update(0, castagnoli, s.aad), castagnoli, payload); got != want {
			return d.fail("CRC-32C mismatch (stored %08x, computed %08x): the chunk was changed, or moved from another place or file", want, got)
		}
	}
	plain := payload
	if r.hdr.shuffle != 0 { // never read into dst (Read)
		planes := payload
		if compressed {
			grown, err := r.grow(s.shuffled, int(ch.rawLen))
			if err != nil {
				return decoded{err: fmt.Errorf("spill chunk file: a buffer for chunk %d: %w", d.index, err)}
			}
			s.shuffled = grown
			planes = s.shuffled[:ch.rawLen]
			if reason := decompress(r.hdr.codec, payload, planes); reason != "" {
				return d.fail("%s", reason)
			}
		}
		grown, err := r.grow(s.plain, int(ch.rawLen))
		if err != nil {
			return decoded{err: fmt.Errorf("spill chunk file: a buffer for chunk %d: %w", d.index, err)}
		}
		s.plain = grown
		plain = s.plain[:ch.rawLen]
		unshuffle(plain, planes, r.hdr.shuffle)
	} else if compressed {
		if dst != nil {
			plain = dst[:ch.rawLen]
		} else {
			grown, err := r.grow(s.plain, int(ch.rawLen))
			if err != nil {
				return decoded{err: fmt.Errorf("spill chunk file: a buffer for chunk %d: %w", d.index, err)}
			}
			s.plain = grown
			plain = s.plain[:ch.rawLen]
		}
		if reason := decompress(r.hdr.codec, payload, plain); reason != "" {
			return d.fail("%s", reason)
		}
	}
	if withNext {
		copy(d.next[:], buf[ch.storedLen:])
	}
	d.haveNext = withNext
	d.index++
	d.off = end
	return decoded{s: s, plain: plain, last: last}
}

// readAt fills b from off: an io.ReaderAt may report io.EOF with a full read at the end.
func readAt(src io.ReaderAt, b []byte, off int64) error {
	n, err := src.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF // the source is shorter than the size it was given with
	}
	return err
}
