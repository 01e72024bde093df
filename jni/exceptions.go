package jni

/*
#include "native.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/debug"
	"unicode/utf16"
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
