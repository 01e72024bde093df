package capi

/*
#include "spillway_cgo.h"
*/
import "C"

import (
	"fmt"
	"runtime/debug"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/spillway/spillway/plan"
)

// status is the code of err, from its plan.ErrorKind.
func status(err error) C.int32_t {
	switch plan.Classify(err) {
	case plan.KindInvalidArgument:
		return C.SPILLWAY_ERR_INVALID_ARGUMENT
	case plan.KindInvalidHandle:
		return C.SPILLWAY_ERR_INVALID_HANDLE
	case plan.KindLimitExceeded:
		return C.SPILLWAY_ERR_LIMIT_EXCEEDED
	default:
		return C.SPILLWAY_ERR_IO
	}
}

// fail reports err to the caller: its code, and its message in *out unless out is NULL.
func fail(out *C.spillway_error, err error) C.int32_t {
	setMessage(out, err.Error())
	return status(err)
}

// result is OK for a nil err, else fail's.
func result(out *C.spillway_error, err error) C.int32_t {
	if err != nil {
		return fail(out, err)
	}
	return C.SPILLWAY_OK
}

func argumentError(reason string) error { return &plan.ArgumentError{Reason: reason} }

// setMessage copies msg into out as NUL-terminated UTF-8, cut at a character boundary to fit.
func setMessage(out *C.spillway_error, msg string) {
	if out == nil {
		return
	}
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	dst := unsafe.Slice((*byte)(unsafe.Pointer(&out.message[0])), len(out.message))
	n := min(len(msg), len(dst)-1)
	for n > 0 && n < len(msg) && !utf8.RuneStart(msg[n]) {
		n--
	}
	copy(dst, msg[:n])
	dst[n] = 0
}

// recoverPanic turns a panic into SPILLWAY_ERR_INTERNAL: a bug must fail one call, not abort the
// process that loaded the library. Deferred first thing in every entry point.
func recoverPanic(code *C.int32_t, out *C.spillway_error) {
	if r := recover(); r != nil {
		setMessage(out, fmt.Sprintf("spillway: internal error, please report it: %v\n%s", r, debug.Stack()))
		*code = C.SPILLWAY_ERR_INTERNAL
	}
}
