package plan

import "fmt"

// What a binding (the JNI entry points, the C ABI) converts from its caller is bounded and refused
// with the same words, whichever binding it came through.

// Bounds on a list of local dir paths passed through a binding (a Java String[] or a C array of
// strings), so that converting one allocates in proportion to real paths and never to what a
// caller can fake cheaply (one long string repeated a million times). Lengths are in the binding's
// units: UTF-16 chars for Java, bytes for C. A path longer than the OS's PATH_MAX (4096 bytes) is
// still accepted and fails at the first spill naming it; these bounds are far past any usable path.
const (
	MaxDirPathLen = 32 << 10 // units in one path
	MaxDirListLen = 16 << 20 // units in all paths of one list, plus one per element
)

// DirError is a bad element i of the dir list named name; reason says what is wrong.
func DirError(name string, i int, reason string) error {
	return &ArgumentError{Reason: fmt.Sprintf("%s[%d] %s", name, i, reason)}
}

// NullDirError is a null element i of the dir list named name.
func NullDirError(name string, i int) error {
	return DirError(name, i, "is null; pass an absolute directory path")
}

// DirTooLongError is element i of length units (e.g. "chars") past MaxDirPathLen.
func DirTooLongError(name string, i int, length int64, units string) error {
	return DirError(name, i, fmt.Sprintf("is %d %s long; a path may have at most %d (the OS takes 4096 bytes)", length, units, MaxDirPathLen))
}

// DirListTooLongError is a list of count elements whose lengths pass MaxDirListLen at element i.
func DirListTooLongError(name string, count int64, i int, units string) error {
	return &ArgumentError{Reason: fmt.Sprintf("%s has %d elements of more than %d %s in all (counting one per element), reached at %s[%d]; pass fewer or shorter paths", name, count, MaxDirListLen, units, name, i)}
}

// MaxCodecNameLen bounds the codec name a binding reads for ConfigureFormat: the longest valid one is
// Spark's class name for zstd, 40 chars.
const MaxCodecNameLen = 128

// CodecNameTooLongError is a codec name of length units, past MaxCodecNameLen.
func CodecNameTooLongError(length int64, units string) error {
	return &ArgumentError{Reason: fmt.Sprintf("codec name of %d %s; give none, lz4 or zstd", length, units)}
}
