package main

/*
#include <stdlib.h>
#include "native.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/spillway/spillway/plan"
)

// errJavaPending means a JNI call failed. It normally left a Java exception pending, which is
// thrown as it is; if it left none, throw raises one, so that no failure ever returns silently.
var errJavaPending = errors.New("spillway: a JNI call failed without raising a Java exception; please report it")

// errNoMemory is a copy the C heap had no room for: thrown as an OutOfMemoryError, as the JVM
// does for its own native allocations, instead of letting Go abort the process.
type errNoMemory struct{ what string }

func (e errNoMemory) Error() string {
	return "spillway: out of memory outside the Java heap: " + e.what
}

func argumentError(reason string) error { return &plan.ArgumentError{Reason: reason} }

// throw raises err in the JVM as the contract's exception for its kind, unless an exception is
// pending already (a failed JNI call's own). The caller must return at once: JNI allows nothing
// but cleanup while an exception is pending.
func throw(env *C.JNIEnv, err error) {
	var kind C.int
	switch oom := (errNoMemory{}); {
	case errors.Is(err, errJavaPending):
		kind = C.SPILLWAY_INTERNAL_ERROR
	case errors.As(err, &oom):
		kind = C.SPILLWAY_OUT_OF_MEMORY
	default:
		switch plan.Classify(err) {
		case plan.KindInvalidArgument:
			kind = C.SPILLWAY_ILLEGAL_ARGUMENT
		case plan.KindInvalidHandle:
			kind = C.SPILLWAY_ILLEGAL_STATE
		case plan.KindLimitExceeded:
			kind = C.SPILLWAY_LIMIT_EXCEEDED
		default:
			kind = C.SPILLWAY_IO_EXCEPTION
		}
	}
	raise(env, kind, err.Error())
}

func raise(env *C.JNIEnv, kind C.int, msg string) {
	// NewString takes UTF-16, so any path a user has is reported as it is.
	text := utf16.Encode([]rune(msg))
	if len(text) == 0 {
		text = []uint16{'?'}
	}
	C.spillway_throw(env, kind, (*C.jchar)(unsafe.SliceData(text)), C.jsize(len(text)))
}

// recoverPanic turns a panic into a RuntimeException: a bug must fail one call, not abort the
// executor. Deferred first thing in every entry point.
func recoverPanic(env *C.JNIEnv) {
	if r := recover(); r != nil {
		raise(env, C.SPILLWAY_INTERNAL_ERROR, fmt.Sprintf("spillway: internal error, please report it: %v\n%s", r, debug.Stack()))
	}
}

func javaString(env *C.JNIEnv, s string) C.jstring {
	text := utf16.Encode([]rune(s))
	if len(text) == 0 {
		return C.spillway_new_string(env, nil, 0)
	}
	return C.spillway_new_string(env, (*C.jchar)(unsafe.SliceData(text)), C.jsize(len(text)))
}

// Bounds on a String[] of paths, so that converting one allocates in proportion to real paths
// and never to what a caller can fake cheaply (one long string repeated a million times). A path
// longer than the OS's PATH_MAX (4096 bytes) is still accepted and fails at the first spill
// naming it; these bounds are far past any usable path.
const (
	maxPathChars  = 32 << 10 // UTF-16 chars in one path
	maxTotalChars = 16 << 20 // UTF-16 chars in all paths of one array, plus one per element
)

// javaStrings converts a String[] of paths, name being the parameter's name for messages. Each
// element is read once (its chars copied in one JNI call, its local reference deleted at once,
// so any count works without reserving local references); what is validated afterwards is
// exactly what was read, whatever another thread does to the array meanwhile. Each path is
// decoded strictly: one that no file name can hold exactly is refused, never replaced.
func javaStrings(env *C.JNIEnv, arr C.jobjectArray, name string) ([]string, error) {
	if arr == 0 {
		return nil, argumentError(name + " is null; pass absolute directory paths")
	}
	var read C.spillway_strings
	status := C.spillway_read_strings(env, arr, maxPathChars, maxTotalChars, &read)
	defer C.spillway_free_strings(&read)
	switch status {
	case C.SPILLWAY_STRINGS_OK:
	case C.SPILLWAY_STRINGS_NULL_ELEMENT:
		return nil, argumentError(fmt.Sprintf("%s[%d] is null; pass an absolute directory path", name, read.index))
	case C.SPILLWAY_STRINGS_PATH_TOO_LONG:
		return nil, argumentError(fmt.Sprintf("%s[%d] is %d chars long; a path may have at most %d (the OS takes 4096 bytes)", name, read.index, read.length, maxPathChars))
	case C.SPILLWAY_STRINGS_TOO_MUCH:
		return nil, argumentError(fmt.Sprintf("%s has %d elements of more than %d chars in all (counting one per element), reached at %s[%d]; pass fewer or shorter paths", name, read.length, maxTotalChars, name, read.index))
	case C.SPILLWAY_STRINGS_NO_MEMORY:
		return nil, errNoMemory{what: fmt.Sprintf("copying %s (%d elements)", name, read.length)}
	default:
		return nil, errJavaPending
	}
	count := int(read.count)
	if count == 0 {
		return []string{}, nil
	}
	ends := unsafe.Slice((*C.jsize)(read.ends), count)
	chars := unsafe.Slice((*uint16)(unsafe.Pointer(read.chars)), int(ends[count-1]))
	out := make([]string, count)
	start := 0
	for i, end := range ends {
		s, err := decodePath(chars[start:int(end)])
		if err != nil {
			return nil, argumentError(fmt.Sprintf("%s[%d] %v", name, i, err))
		}
		out[i] = s
		start = int(end)
	}
	return out, nil
}

// decodePath turns the UTF-16 of a Java string into the UTF-8 bytes of a path, exactly: every
// valid string has one encoding and decodes back to itself. An unpaired surrogate has none (a
// lenient decoder would put U+FFFD or '?' in its place and name another file), and a NUL cannot
// be in a path: both are errors saying where they are.
func decodePath(units []uint16) (string, error) {
	ascii := true
	for _, u := range units {
		if u == 0 || u >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii { // the usual path: one byte per char
		b := make([]byte, len(units))
		for i, u := range units {
			b[i] = byte(u)
		}
		return unsafe.String(unsafe.SliceData(b), len(b)), nil // b is never written again
	}
	b := make([]byte, 0, len(units)*3)
	for i := 0; i < len(units); i++ {
		u := rune(units[i])
		switch {
		case u == 0:
			return "", fmt.Errorf("has a NUL char at index %d; a path cannot contain NUL", i)
		case utf16.IsSurrogate(u):
			if u < 0xDC00 && i+1 < len(units) {
				if r := utf16.DecodeRune(u, rune(units[i+1])); r != utf8.RuneError {
					b = utf8.AppendRune(b, r)
					i++
					continue
				}
			}
			return "", fmt.Errorf("has an unpaired UTF-16 surrogate \\u%04X at index %d, which no file name can hold exactly; pass the path as valid Unicode", u, i)
		default:
			b = utf8.AppendRune(b, u)
		}
	}
	return unsafe.String(unsafe.SliceData(b), len(b)), nil
}

// Heap buffers of up to this size are copied whole into a pooled Go buffer; larger ones go
// through a bounded copy, so no write or batch allocates in proportion to its size on the Go heap
// (where an allocation the address space cannot hold aborts the process).
const pooledCopySize = 1 << 20

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, pooledCopySize); return &b }}

func noRelease() {}

// bufferRegion checks that [offset, offset+length) lies within buf's limit and returns the
// address of buf's memory if it is direct, else nil.
func bufferRegion(env *C.JNIEnv, buf C.jobject, offset, length C.jint, name string) (unsafe.Pointer, error) {
	if buf == 0 {
		return nil, argumentError(name + " is null")
	}
	if offset < 0 || length < 0 {
		return nil, argumentError(fmt.Sprintf("offset %d and length %d must not be negative", offset, length))
	}
	var limit C.jint
	var addr unsafe.Pointer
	if C.spillway_buffer(env, buf, &limit, &addr) != 0 {
		return nil, errJavaPending
	}
	if int64(offset)+int64(length) > int64(limit) {
		return nil, argumentError(fmt.Sprintf("offset %d + length %d is past the limit %d of %s", offset, length, limit, name))
	}
	return addr, nil
}

// directBufferBytes returns the memory of a writable direct buffer's region, to write into.
func directBufferBytes(env *C.JNIEnv, buf C.jobject, offset, length C.jint, name string) ([]byte, error) {
	addr, err := bufferRegion(env, buf, offset, length, name)
	if err != nil {
		return nil, err
	}
	if addr == nil {
		return nil, argumentError(name + " must be a direct ByteBuffer (ByteBuffer.allocateDirect)")
	}
	// A read-only view still has an address: writing through it would break Java's promise.
	switch C.spillway_buffer_read_only(env, buf) {
	case 1:
		return nil, argumentError(name + " is read-only; pass a writable direct ByteBuffer")
	case -1:
		return nil, errJavaPending
	}
	return unsafe.Slice((*byte)(unsafe.Add(addr, offset)), length), nil
}

// pooledHeapCopy copies length (at most pooledCopySize) bytes of a heap buffer into a pooled Go
// buffer. Call release when done.
func pooledHeapCopy(env *C.JNIEnv, buf C.jobject, offset, length C.jint) (data []byte, release func(), err error) {
	if length == 0 {
		return []byte{}, noRelease, nil
	}
	p := copyBuffers.Get().(*[]byte)
	data = (*p)[:length]
	if C.spillway_copy_heap_buffer(env, buf, offset, length, unsafe.Pointer(unsafe.SliceData(data))) != 0 {
		copyBuffers.Put(p)
		return nil, nil, errJavaPending
	}
	return data, func() { copyBuffers.Put(p) }, nil
}

// heapReader reads a heap buffer's region [offset, offset+left) from the start, one chunk per
// Read, through JNI: the bytes are copied once, into the reader's caller's bounded buffer.
type heapReader struct {
	env    *C.JNIEnv
	buf    C.jobject
	offset C.jint
	left   C.jint
}

func (r *heapReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	n := C.jint(min(len(p), int(r.left)))
	if C.spillway_copy_heap_buffer(r.env, r.buf, r.offset, n, unsafe.Pointer(unsafe.SliceData(p))) != 0 {
		return 0, errJavaPending
	}
	r.offset += n
	r.left -= n
	return int(n), nil
}

// writeBuffer appends buf[offset, offset+length) to a spill file, whole or not at all: a direct
// buffer's own memory, a small heap buffer through a pooled copy, a large one through
// WriteFrom's bounded copy.
func writeBuffer(env *C.JNIEnv, file uint64, buf C.jobject, offset, length C.jint) error {
	addr, err := bufferRegion(env, buf, offset, length, "buf")
	switch {
	case err != nil:
		return err
	case addr != nil:
		return registry.Write(file, unsafe.Slice((*byte)(unsafe.Add(addr, offset)), length))
	case length > pooledCopySize:
		return registry.WriteFrom(file, &heapReader{env: env, buf: buf, offset: offset, left: length}, int64(length))
	}
	data, release, err := pooledHeapCopy(env, buf, offset, length)
	if err != nil {
		return err
	}
	defer release()
	return registry.Write(file, data)
}

// batchBytes returns buf[offset, offset+length) whole, without changing its position: a direct
// buffer's own memory, else a copy (pooled, or in C memory for a large one, so that a batch the
// process has no room for is an OutOfMemoryError, not an abort). Call release when done.
func batchBytes(env *C.JNIEnv, buf C.jobject, offset, length C.jint) (data []byte, release func(), err error) {
	addr, err := bufferRegion(env, buf, offset, length, "batch")
	switch {
	case err != nil:
		return nil, nil, err
	case addr != nil:
		return unsafe.Slice((*byte)(unsafe.Add(addr, offset)), length), noRelease, nil
	case length <= pooledCopySize:
		return pooledHeapCopy(env, buf, offset, length)
	}
	mem := C.spillway_malloc(C.size_t(length))
	if mem == nil {
		return nil, nil, errNoMemory{what: fmt.Sprintf("copying a heap batch of %d bytes; pass a direct ByteBuffer or smaller batches", length)}
	}
	if C.spillway_copy_heap_buffer(env, buf, offset, length, mem) != 0 {
		C.free(mem)
		return nil, nil, errJavaPending
	}
	return unsafe.Slice((*byte)(mem), length), func() { C.free(mem) }, nil
}
