package jni

/*
#include <stdlib.h>
#include "native.h"
*/
import "C"

import (
	"fmt"
	"io"
	"sync"
	"unsafe"
)

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
