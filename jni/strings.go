package jni

/*
#include "native.h"
*/
import "C"

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/spillway/spillway/plan"
)

func javaString(env *C.JNIEnv, s string) C.jstring {
	text := utf16.Encode([]rune(s))
	if len(text) == 0 {
		return C.spillway_new_string(env, nil, 0)
	}
	return C.spillway_new_string(env, (*C.jchar)(unsafe.SliceData(text)), C.jsize(len(text)))
}

// javaStrings converts a String[] of paths, name being the parameter's name for messages. Each
// element is read once (its chars copied in one JNI call, its local reference deleted at once,
// so any count works without reserving local references); what is validated afterwards is
// exactly what was read, whatever another thread does to the array meanwhile. Each path is
// decoded strictly: one that no file name can hold exactly is refused, never replaced.
func javaStrings(env *C.JNIEnv, arr C.jobjectArray, name string) ([]string, error) {
	read, err := readStrings(env, arr, name)
	defer read.free()
	if err != nil {
		return nil, err
	}
	return read.decode()
}

// stringsRead is one read of a String[]: the chars of its elements in C memory, until free.
type stringsRead struct {
	c    C.spillway_strings
	name string
}

// The bounds native.h gives the read of createPlan's array are plan's.
const (
	_ uint = plan.MaxDirPathLen - C.SPILLWAY_MAX_DIR_PATH_LEN
	_ uint = C.SPILLWAY_MAX_DIR_PATH_LEN - plan.MaxDirPathLen
	_ uint = plan.MaxDirListLen - C.SPILLWAY_MAX_DIR_LIST_LEN
	_ uint = C.SPILLWAY_MAX_DIR_LIST_LEN - plan.MaxDirListLen
)

// readStrings reads every element of arr once (see javaStrings) into C memory; call free on the
// result even when it fails.
func readStrings(env *C.JNIEnv, arr C.jobjectArray, name string) (*stringsRead, error) {
	r := &stringsRead{name: name}
	status := C.spillway_read_strings(env, arr, plan.MaxDirPathLen, plan.MaxDirListLen, &r.c, nil, 0)
	return r, r.err(status)
}

// err is the error of a read that returned status, nil for SPILLWAY_STRINGS_OK.
func (r *stringsRead) err(status C.int) error {
	switch status {
	case C.SPILLWAY_STRINGS_OK:
		return nil
	case C.SPILLWAY_STRINGS_NULL_ARRAY:
		return argumentError(r.name + " is null; pass absolute directory paths")
	case C.SPILLWAY_STRINGS_NULL_ELEMENT:
		return plan.NullDirError(r.name, int(r.c.index))
	case C.SPILLWAY_STRINGS_PATH_TOO_LONG:
		return plan.DirTooLongError(r.name, int(r.c.index), int64(r.c.length), "chars")
	case C.SPILLWAY_STRINGS_TOO_MUCH:
		return plan.DirListTooLongError(r.name, int64(r.c.length), int(r.c.index), "chars")
	case C.SPILLWAY_STRINGS_NO_MEMORY:
		return errNoMemory{what: fmt.Sprintf("copying %s (%d elements)", r.name, r.c.length)}
	default:
		return errJavaPending
	}
}

func (r *stringsRead) free() { C.spillway_free_strings(&r.c) }

// ends and chars are what was read: element i is chars[ends[i-1] (0 for i = 0), ends[i]).
func (r *stringsRead) ends() []C.jsize {
	if r.c.count == 0 {
		return nil
	}
	return unsafe.Slice((*C.jsize)(r.c.ends), int(r.c.count))
}

func (r *stringsRead) chars() []uint16 {
	ends := r.ends()
	if len(ends) == 0 || ends[len(ends)-1] == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(r.c.chars)), int(ends[len(ends)-1]))
}

// decode turns what was read into Go strings, strictly (decodePath).
func (r *stringsRead) decode() ([]string, error) {
	ends, chars := r.ends(), r.chars()
	out := make([]string, len(ends))
	start := 0
	for i, end := range ends {
		s, err := decodePath(chars[start:int(end)])
		if err != nil {
			return nil, plan.DirError(r.name, i, err.Error())
		}
		out[i] = s
		start = int(end)
	}
	return out, nil
}

// key is an exact encoding of what was read, for plan.Registry.CreatePlanForDirs: the element
// count, each element's end and every char (spillway_strings), so equal keys are equal reads and
// decode to equal lists, or fail alike. It is the content of the strings, never their identity.
// It lives in C memory until free (or until the C caller's frame returns).
func (r *stringsRead) key() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(r.c.block)), int(r.c.key_len))
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
