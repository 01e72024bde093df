package chunkfile

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/spillway/spillway/spill/chunkfile/internal/lz4c"
)

type codecID byte

const (
	codecNone codecID = 0
	codecLZ4  codecID = 1
	codecZstd codecID = 2
)

func (c codecID) String() string {
	switch c {
	case codecNone:
		return "none"
	case codecLZ4:
		return "lz4"
	case codecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", byte(c))
}

// Codec is how a Writer compresses each chunk. The zero Codec is None. A Reader needs no Codec:
// the file's header names it.
type Codec struct {
	id    codecID
	level int // zstd only
}

var (
	// None stores chunks as they are (still checked or sealed).
	None = Codec{id: codecNone}
	// LZ4 is LZ4 block compression: fast both ways, Spark's default for spills.
	LZ4 = Codec{id: codecLZ4}
)

// DefaultZstdLevel is Spark's default (spark.io.compression.zstd.level).
const DefaultZstdLevel = 1

// Zstd is zstd at level (1 to 22, as spark.io.compression.zstd.level; levels map to the four
// speeds of the Go encoder: 1-2 fastest, 3-5 default, 6-9 better, 10-22 best).
func Zstd(level int) (Codec, error) {
	if level < 1 || level > 22 {
		return Codec{}, fmt.Errorf("spill chunk file: zstd level %d; give 1 to 22 (spark.io.compression.zstd.level)", level)
	}
	return Codec{id: codecZstd, level: level}, nil
}

// ValidCodecs lists the names ParseCodec takes.
const ValidCodecs = "none, lz4, zstd"

// ParseCodec reads a codec name as Spark users write it (spark.spillway.compression.codec, like
// spark.io.compression.codec): case-insensitive, "none", "lz4" or "zstd" (at DefaultZstdLevel;
// see Zstd for another level), or Spark's class names for lz4 and zstd.
func ParseCodec(name string) (Codec, error) {
	switch n := strings.ToLower(strings.TrimSpace(name)); n {
	case "none":
		return None, nil
	case "lz4", "org.apache.spark.io.lz4compressioncodec":
		return LZ4, nil
	case "zstd", "org.apache.spark.io.zstdcompressioncodec":
		return Zstd(DefaultZstdLevel)
	case "snappy", "lzf", "org.apache.spark.io.snappycompressioncodec", "org.apache.spark.io.lzfcompressioncodec":
		return Codec{}, fmt.Errorf("spill chunk file: compression codec %q is not supported for native spills; use one of %s", name, ValidCodecs)
	default:
		return Codec{}, fmt.Errorf("spill chunk file: unknown compression codec %q; use one of %s", name, ValidCodecs)
	}
}

// String is the codec's name, with the level for zstd.
func (c Codec) String() string {
	if c.id == codecZstd {
		return fmt.Sprintf("zstd(level %d)", c.level)
	}
	return c.id.String()
}

// compressor compresses one chunk into dst (whose capacity is at least chunk size + 1) and
// returns the compressed bytes, or nil when they would not be fewer than the input's. It is used
// by one Writer at a time.
type compressor interface {
	compress(src, dst []byte) []byte
}

func (c Codec) newCompressor() compressor {
	switch c.id {
	case codecLZ4:
		return &lz4Compressor{}
	case codecZstd:
		return zstdCompressor{enc: zstdEncoder(zstd.EncoderLevelFromZstd(c.level))}
	}
	return nil
}

// The reference C encoder: twice as fast as the Go one (the readers decode with pierrec/lz4).
type lz4Compressor struct{ c lz4c.Compressor }

func (l *lz4Compressor) compress(src, dst []byte) []byte {
	if len(src) < 2 {
		return nil
	}
	// Into a destination shorter than the input, the compressor gives up (0) as soon as the
	// output would not be smaller: no bound-sized buffer and no wasted work on random bytes.
	n := l.c.CompressBlock(src, dst[:len(src)-1])
	if n == 0 || n >= len(src) {
		return nil
	}
	return dst[:n]
}

type zstdCompressor struct{ enc *zstd.Encoder }

func (z zstdCompressor) compress(src, dst []byte) []byte {
	if len(src) == 0 {
		return nil
	}
	out := z.enc.EncodeAll(src, dst[:0])
	if len(out) >= len(src) {
		return nil
	}
	return out
}

// zstd encoders and the decoder are shared (EncodeAll and DecodeAll are safe for concurrent use):
// making one costs far more than a chunk.
var (
	zstdEncodersMu sync.Mutex
	zstdEncoders   = map[zstd.EncoderLevel]*zstd.Encoder{}

	zstdDecoderOnce sync.Once
	zstdDecoderVal  *zstd.Decoder
	zstdDecoderErr  error
)

func zstdEncoder(level zstd.EncoderLevel) *zstd.Encoder {
	zstdEncodersMu.Lock()
	defer zstdEncodersMu.Unlock()
	if enc, ok := zstdEncoders[level]; ok {
		return enc
	}
	// The options are constants that NewWriter accepts; an error here is a bug.
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(level),
		zstd.WithEncoderCRC(false), // every chunk has its own CRC-32C or GCM tag
		zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithWindowSize(MaxChunkSize),
		zstd.WithLowerEncoderMem(true))
	if err != nil {
		panic(fmt.Sprintf("chunkfile: zstd encoder: %v", err))
	}
	zstdEncoders[level] = enc
	return enc
}

func zstdDecoder() (*zstd.Decoder, error) {
	zstdDecoderOnce.Do(func() {
		zstdDecoderVal, zstdDecoderErr = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecoderMaxMemory(MaxChunkSize),
			zstd.WithDecoderMaxWindow(MaxChunkSize),
			zstd.WithDecodeAllCapLimit(true)) // never more than the chunk's declared length
	})
	return zstdDecoderVal, zstdDecoderErr
}

// decompress decodes src into dst, which must come out exactly len(dst) bytes long; the reason is
// returned when it does not.
func decompress(id codecID, src, dst []byte) string {
	switch id {
	case codecLZ4:
		n, err := lz4.UncompressBlock(src, dst)
		if err != nil {
			return "lz4 data is corrupt: " + err.Error()
		}
		if n != len(dst) {
			return fmt.Sprintf("lz4 data decodes to %d bytes, not the %d declared", n, len(dst))
		}
	case codecZstd:
		dec, err := zstdDecoder()
		if err != nil {
			return "no zstd decoder: " + err.Error()
		}
		out, err := dec.DecodeAll(src, dst[:0])
		if err != nil {
			return "zstd data is corrupt: " + err.Error()
		}
		if len(out) != len(dst) {
			return fmt.Sprintf("zstd data decodes to %d bytes, not the %d declared", len(out), len(dst))
		}
		if len(out) > 0 && &out[0] != &dst[0] {
			copy(dst, out)
		}
	default:
		return fmt.Sprintf("codec %s cannot decompress", id)
	}
	return ""
}
