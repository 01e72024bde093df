package jni

/*
#include "native.h"
*/
import "C"

import (
	"fmt"
	"unicode/utf16"
	"unsafe"

	"github.com/spillway/spillway/plan"
)

//export Java_spillway_NativeSpill_configureFormat
func Java_spillway_NativeSpill_configureFormat(env *C.JNIEnv, _ C.jclass, codec C.jstring, zstdLevel C.jint, encrypt C.jboolean, keyBits C.jint) {
	defer recoverPanic(env)
	if codec == 0 {
		throw(env, argumentError("codec is null; give none, lz4 or zstd"))
		return
	}
	var chars [plan.MaxCodecNameLen]uint16
	var n C.jsize
	if C.spillway_read_string(env, codec, plan.MaxCodecNameLen, (*C.jchar)(unsafe.Pointer(&chars[0])), &n) != 0 {
		throw(env, errJavaPending)
		return
	}
	if n > plan.MaxCodecNameLen {
		throw(env, plan.CodecNameTooLongError(int64(n), "chars"))
		return
	}
	name := string(utf16.Decode(chars[:n]))
	if err := registry.ConfigureFormat(name, int(zstdLevel), encrypt != 0, int(keyBits)); err != nil {
		throw(env, err)
	}
}

//export Java_spillway_NativeSpill_configureMemoryCache
func Java_spillway_NativeSpill_configureMemoryCache(env *C.JNIEnv, _ C.jclass, idleMillis C.jlong) {
	defer recoverPanic(env)
	if err := registry.ConfigureMemoryCache(int64(idleMillis)); err != nil {
		throw(env, err)
	}
}

//export Java_spillway_NativeSpill_createSpillFile
func Java_spillway_NativeSpill_createSpillFile(env *C.JNIEnv, _ C.jclass, planHandle C.jlong) C.jlong {
	defer recoverPanic(env)
	fh, err := registry.CreateSpillFile(uint64(planHandle))
	return handleOrThrow(env, fh, err)
}

//export Java_spillway_NativeSpill_releaseSpillFile
func Java_spillway_NativeSpill_releaseSpillFile(env *C.JNIEnv, _ C.jclass, file C.jlong) {
	defer recoverPanic(env)
	if err := registry.ReleaseSpillFile(uint64(file)); err != nil {
		throw(env, err)
	}
}

//export Java_spillway_NativeSpill_finishWrite
func Java_spillway_NativeSpill_finishWrite(env *C.JNIEnv, _ C.jclass, file C.jlong) {
	defer recoverPanic(env)
	if err := registry.FinishWrite(uint64(file)); err != nil {
		throw(env, err)
	}
}

// fileSizesLen is how many longs fileSizes fills: plain bytes written, bytes on disk.
const fileSizesLen = 2

//export Java_spillway_NativeSpill_fileSizes
func Java_spillway_NativeSpill_fileSizes(env *C.JNIEnv, _ C.jclass, file C.jlong, out C.jlongArray) {
	defer recoverPanic(env)
	if out == 0 || C.spillway_array_length(env, C.jarray(out)) < fileSizesLen {
		throw(env, argumentError(fmt.Sprintf("out must be a long[] of at least %d elements", fileSizesLen)))
		return
	}
	logical, stored, err := registry.FileSizes(uint64(file))
	if err != nil {
		throw(env, err)
		return
	}
	vals := [fileSizesLen]C.jlong{C.jlong(logical), C.jlong(stored)}
	C.spillway_set_longs(env, out, &vals[0], fileSizesLen)
}

//export Java_spillway_NativeSpill_openReader
func Java_spillway_NativeSpill_openReader(env *C.JNIEnv, _ C.jclass, file C.jlong) C.jlong {
	defer recoverPanic(env)
	rh, err := registry.OpenReader(uint64(file))
	return handleOrThrow(env, rh, err)
}

//export Java_spillway_NativeSpill_read
func Java_spillway_NativeSpill_read(env *C.JNIEnv, _ C.jclass, reader C.jlong, buf C.jobject, offset, length C.jint) C.jint {
	defer recoverPanic(env)
	n, err := readBuffer(env, uint64(reader), buf, offset, length)
	if err != nil {
		throw(env, err)
		return 0
	}
	return C.jint(n)
}

// readBuffer reads the reader's next bytes into buf[offset, offset+length): into a direct
// buffer's own memory, or through a pooled Go buffer of at most 1 MiB into a heap buffer's array.
func readBuffer(env *C.JNIEnv, reader uint64, buf C.jobject, offset, length C.jint) (int, error) {
	addr, err := bufferRegion(env, buf, offset, length, "buf")
	if err != nil {
		return 0, err
	}
	switch C.spillway_buffer_read_only(env, buf) {
	case 1:
		return 0, argumentError("buf is read-only; pass a writable ByteBuffer")
	case -1:
		return 0, errJavaPending
	}
	if addr != nil {
		return registry.Read(reader, unsafe.Slice((*byte)(unsafe.Add(addr, offset)), length))
	}
	p := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(p)
	n, err := registry.Read(reader, (*p)[:min(int(length), pooledCopySize)])
	if err != nil || n <= 0 {
		return n, err
	}
	if C.spillway_copy_to_heap_buffer(env, buf, offset, C.jint(n), unsafe.Pointer(unsafe.SliceData(*p))) != 0 {
		return 0, errJavaPending
	}
	return n, nil
}

//export Java_spillway_NativeSpill_closeReader
func Java_spillway_NativeSpill_closeReader(env *C.JNIEnv, _ C.jclass, reader C.jlong) {
	defer recoverPanic(env)
	if err := registry.CloseReader(uint64(reader)); err != nil {
		throw(env, err)
	}
}
