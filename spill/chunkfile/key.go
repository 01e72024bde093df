package chunkfile

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
)

// Key is an AES key made in memory from crypto/rand and never written anywhere: spill files are
// read back only by the process that wrote them, so no one else ever needs it.
//
// What it protects: a spill file read by another user of the host, a disk taken away, files left
// behind by a killed executor — without the key, which died with the process, their contents are
// unreadable, and any change to them (a flipped bit, a cut, chunks moved or taken from another
// file) is detected. What it does not protect: anything against a party that can read this
// process's memory (root, a debugger, a core dump), which sees both key and data; and the sizes
// of files and chunks, which are in the clear (how much was spilled, how well it compressed).
//
// A Key is safe for concurrent use. Each file gets its own AES-GCM key, derived from the Key and
// the file's random 128-bit id with HKDF-SHA256, so nonces (the chunk index) never repeat under
// any AES key.
type Key struct {
	secret []byte
}

// NewKey makes a random key of bits bits: 128, 192 or 256 (spark.io.encryption.keySizeBits).
func NewKey(bits int) (*Key, error) {
	if err := checkKeyBits(bits); err != nil {
		return nil, err
	}
	secret := make([]byte, bits/8)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("spill chunk file: making a %d-bit key: %w", bits, err)
	}
	return &Key{secret: secret}, nil
}

func checkKeyBits(bits int) error {
	if bits != 128 && bits != 192 && bits != 256 {
		return fmt.Errorf("spill chunk file: a %d-bit key; AES takes 128, 192 or 256 bits (spark.io.encryption.keySizeBits)", bits)
	}
	return nil
}

// Bits is the key's size in bits.
func (k *Key) Bits() int { return len(k.secret) * 8 }

// String never shows the key's bytes, so a Key logged by mistake leaks nothing.
func (k *Key) String() string { return fmt.Sprintf("chunkfile.Key(AES-%d, in memory)", k.Bits()) }

// GoString hides the bytes from %#v as String does from %v.
func (k *Key) GoString() string { return k.String() }

// hkdfInfo separates this use of the key from any other; it names the format version.
const hkdfInfo = "spillway chunk file v1 AES-GCM key"

// fileAEAD derives the AES-GCM of the file with the given id.
func (k *Key) fileAEAD(fileID []byte) (cipher.AEAD, error) {
	fileKey, err := hkdf.Key(sha256.New, k.secret, fileID, hkdfInfo, len(k.secret))
	if err != nil {
		return nil, fmt.Errorf("spill chunk file: deriving the file key: %w", err)
	}
	block, err := aes.NewCipher(fileKey)
	if err != nil {
		return nil, fmt.Errorf("spill chunk file: %w", err)
	}
	return cipher.NewGCM(block)
}

// nonce is a chunk's AES-GCM nonce: its index, unique within the file, whose key is its own.
func nonce(b *[12]byte, index uint64) []byte {
	*b = [12]byte{}
	for i := 0; i < 8; i++ {
		b[11-i] = byte(index >> (8 * i))
	}
	return b[:]
}
