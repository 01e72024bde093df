package main

/*
#include <stdlib.h>
#include "native.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unicode/utf16"
	"unsafe"

	"github.com/timob/jnigi"

	"github.com/spillway/spillway/plan"
)

// errJavaPending means a JNI call left a Java exception pending; it is thrown as it is.
var errJavaPending = errors.New("spillway: a Java exception is pending")

func argumentError(reason string) error { return &plan.ArgumentError{Reason: reason} }

// throw raises err in the JVM as the contract's exception for its kind. The caller must return
// at once: JNI allows nothing but cleanup while an exception is pending.
func throw(env *C.JNIEnv, err error) {
	if errors.Is(err, errJavaPending) {
		return
	}
	var kind C.int
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

// The parsed local dirs of createPlan calls, keyed by the identity of the String objects in the
// array. An executor passes the same dirs to every plan; comparing object identities in C costs
// about 20 ns a dir where converting the strings costs microseconds. One cgo call looks at every
// cached set, so the cache can hold many without slowing a hit. Its entries live as long as the
// JVM (another thread may be reading one at any time, so their global refs are never freed);
// past maxCachedDirSets distinct sets, a miss converts and parses anew.
const maxCachedDirSets = 64

type dirCache struct {
	sets *C.spillway_string_set // C array of len(dirs) sets, never freed: readers may hold it
	dirs []plan.LocalDirs
}

var (
	dirSets   atomic.Pointer[dirCache] // copy on write: a hit takes no lock
	dirsAddMu sync.Mutex               // serialises the rare misses that add a set
)

func parsedLocalDirs(env *C.JNIEnv, arr C.jobjectArray) (plan.LocalDirs, error) {
	if c := dirSets.Load(); c != nil {
		switch i := C.spillway_find_strings(env, arr, c.sets, C.int(len(c.dirs))); {
		case i >= 0:
			return c.dirs[i], nil
		case i == -2:
			return plan.LocalDirs{}, errJavaPending
		}
	}
	strs, err := javaStrings(env, arr)
	if err != nil {
		return plan.LocalDirs{}, err
	}
	parsed, err := plan.ParseLocalDirs(strs)
	if err != nil {
		return plan.LocalDirs{}, err
	}
	rememberDirs(env, arr, C.jsize(len(strs)), parsed)
	return parsed, nil
}

func rememberDirs(env *C.JNIEnv, arr C.jobjectArray, n C.jsize, parsed plan.LocalDirs) {
	dirsAddMu.Lock()
	defer dirsAddMu.Unlock()
	old := dirSets.Load()
	count := 0
	if old != nil {
		count = len(old.dirs)
	}
	if count >= maxCachedDirSets {
		return
	}
	refs := (*C.jobject)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.jobject(0)))))
	if refs == nil {
		return
	}
	if C.spillway_pin_strings(env, arr, refs, n) != 0 {
		C.free(unsafe.Pointer(refs))
		return
	}
	setSize := C.size_t(unsafe.Sizeof(C.spillway_string_set{}))
	sets := (*C.spillway_string_set)(C.calloc(C.size_t(count+1), setSize))
	if sets == nil {
		return // the pinned refs stay unused: at most once, and C memory is short anyway
	}
	next := &dirCache{sets: sets, dirs: make([]plan.LocalDirs, count+1)}
	all := unsafe.Slice(sets, count+1)
	if old != nil {
		copy(all, unsafe.Slice(old.sets, count))
		copy(next.dirs, old.dirs)
	}
	all[count] = C.spillway_string_set{refs: refs, n: n}
	next.dirs[count] = parsed
	dirSets.Store(next)
}

// javaStrings converts a String[] through jnigi. It is the cold path, taken once per distinct
// set of dirs, so jnigi's reflection costs nothing that matters.
func javaStrings(env *C.JNIEnv, arr C.jobjectArray) ([]string, error) {
	jenv := jnigi.WrapEnv(unsafe.Pointer(env))
	defer jenv.DeleteGlobalRefCache()
	jenv.ExceptionHandler = jnigi.ThrowableToStringExceptionHandler
	n := int(C.spillway_array_length(env, C.jarray(arr)))
	if err := jenv.EnsureLocalCapacity(int32(n + 8)); err != nil {
		return nil, errJavaPending
	}
	elems := jenv.FromObjectArray(jnigi.WrapJObject(uintptr(arr), "java/lang/String", true))
	defer func() {
		for _, e := range elems {
			if !e.IsNil() {
				jenv.DeleteLocalRef(e)
			}
		}
	}()
	out := make([]string, len(elems))
	for i, e := range elems {
		if e.IsNil() {
			return nil, argumentError(fmt.Sprintf("localDirs[%d] is null; pass an absolute directory path", i))
		}
		var b []byte
		if err := e.CallMethod(jenv, "getBytes", &b, jenv.GetUTF8String()); err != nil {
			return nil, fmt.Errorf("spillway: reading localDirs[%d]: %w", i, err)
		}
		out[i] = string(b)
	}
	return out, nil
}

// initJnigi makes jnigi's process-wide "UTF-8" string while the library loads: jnigi creates it
// lazily without synchronisation, which two threads on their first plan could race on.
func initJnigi(env unsafe.Pointer) int {
	jenv := jnigi.WrapEnv(env)
	defer jenv.DeleteGlobalRefCache()
	jenv.GetUTF8String()
	return 0
}

// Heap buffers are copied into Go memory before the write; these are reused for the usual sizes.
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

// bufferBytes returns length bytes of buf from the absolute index offset, without changing its
// position: the buffer's own memory when it is direct, else a copy. Call release when done.
func bufferBytes(env *C.JNIEnv, buf C.jobject, offset, length C.jint) (data []byte, release func(), err error) {
	addr, err := bufferRegion(env, buf, offset, length, "buf")
	if err != nil {
		return nil, nil, err
	}
	if addr != nil {
		return unsafe.Slice((*byte)(unsafe.Add(addr, offset)), length), noRelease, nil
	}
	if length == 0 {
		return []byte{}, noRelease, nil
	}
	release = noRelease
	if length <= pooledCopySize {
		p := copyBuffers.Get().(*[]byte)
		data = (*p)[:length]
		release = func() { copyBuffers.Put(p) }
	} else {
		data = make([]byte, length)
	}
	if C.spillway_copy_heap_buffer(env, buf, offset, length, unsafe.Pointer(unsafe.SliceData(data))) != 0 {
		release()
		return nil, nil, errJavaPending
	}
	return data, release, nil
}
