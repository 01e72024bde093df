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
	if arr == 0 {
		return nil, argumentError(name + " is null; pass absolute directory paths")
	}
	var read C.spillway_strings
	status := C.spillway_read_strings(env, arr, plan.MaxDirPathLen, plan.MaxDirListLen, &read)
	defer C.spillway_free_strings(&read)
	switch status {
	case C.SPILLWAY_STRINGS_OK:
	case C.SPILLWAY_STRINGS_NULL_ELEMENT:
		return nil, plan.NullDirError(name, int(read.index))
	case C.SPILLWAY_STRINGS_PATH_TOO_LONG:
		return nil, plan.DirTooLongError(name, int(read.index), int64(read.length), "chars")
	case C.SPILLWAY_STRINGS_TOO_MUCH:
		return nil, plan.DirListTooLongError(name, int64(read.length), int(read.index), "chars")
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
			return nil, plan.DirError(name, i, err.Error())
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
