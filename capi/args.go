package capi

/*
#include "spillway_cgo.h"
*/
import "C"

import (
	"fmt"
	"unicode/utf8"
	"unsafe"

	"github.com/spillway/spillway/plan"
)

// region is the caller's memory [buf, buf+length) as a slice, checked: length not negative, buf
// not NULL unless length is 0. bufName and lenName are the parameters' names for messages.
func region(buf *C.uint8_t, length C.int64_t, bufName, lenName string) ([]byte, error) {
	switch {
	case length < 0:
		return nil, argumentError(fmt.Sprintf("%s is %d; give 0 or more bytes", lenName, length))
	case length == 0:
		return nil, nil
	case buf == nil:
		return nil, argumentError(fmt.Sprintf("%s is NULL with %s %d; pass %d bytes of memory", bufName, lenName, length, length))
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(buf)), length), nil
}

// goDirs copies a C array of n dir paths, name being the parameter's name for messages. Each
// path must be valid UTF-8, so that every path a C caller names is one the JVM and the messages
// can name exactly; the bounds are the JNI binding's (plan.MaxDirPathLen, plan.MaxDirListLen).
// Paths are otherwise checked by plan.ParseLocalDirs.
func goDirs(arr **C.char, n C.int32_t, name string) ([]string, error) {
	switch {
	case arr == nil:
		return nil, argumentError(name + " is NULL; pass absolute directory paths")
	case n < 0:
		return nil, argumentError(fmt.Sprintf("n_dirs is %d; give the number of paths in %s", n, name))
	case int64(n) > plan.MaxDirListLen:
		return nil, plan.DirListTooLongError(name, int64(n), plan.MaxDirListLen, "bytes")
	}
	ptrs := unsafe.Slice(arr, n)
	out := make([]string, n)
	total := int64(0)
	for i, p := range ptrs {
		if p == nil {
			return nil, plan.NullDirError(name, i)
		}
		length := cStringLen(p)
		if length > plan.MaxDirPathLen {
			return nil, plan.DirTooLongError(name, i, length, "bytes")
		}
		if total += length + 1; total > plan.MaxDirListLen {
			return nil, plan.DirListTooLongError(name, int64(n), i, "bytes")
		}
		s := C.GoStringN(p, C.int(length))
		if !utf8.ValidString(s) {
			return nil, plan.DirError(name, i, fmt.Sprintf("is not valid UTF-8 (at byte %d); pass the path as UTF-8", invalidUTF8At(s)))
		}
		out[i] = s
	}
	return out, nil
}

// invalidUTF8At is the index of the first byte of s that starts no valid UTF-8 sequence.
func invalidUTF8At(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return i
			}
		}
	}
	return len(s)
}

// cStringLen is strlen, counted in Go: a cgo call per path would cost more than the rest of the
// conversion.
func cStringLen(p *C.char) int64 {
	n := int64(0)
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return n
}
