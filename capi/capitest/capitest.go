// Package capitest calls the C ABI (include/spillway.h) through C, as a native engine in the JVM's
// process does, for tests of other packages: jni's tests use one plan through both bindings with it.
// Go test files cannot use cgo; this package holds the calls, and links package capi, whose
// exports it calls. Nothing imports it but tests: it is no part of libspillway.so.
package capitest

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#include <stdlib.h>
#include "spillway.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	_ "github.com/spillway/spillway/capi" // the C ABI's exports, linked in
)

// Error is a failed call: its status and message.
type Error struct {
	Status  int32
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("status %d: %s", e.Status, e.Message) }

// The status codes of the header.
const (
	ErrIO              = C.SPILLWAY_ERR_IO
	ErrInvalidArgument = C.SPILLWAY_ERR_INVALID_ARGUMENT
	ErrInvalidHandle   = C.SPILLWAY_ERR_INVALID_HANDLE
	ErrLimitExceeded   = C.SPILLWAY_ERR_LIMIT_EXCEEDED
)

func check(status C.int32_t, err *C.spillway_error) error {
	if status == C.SPILLWAY_OK {
		return nil
	}
	return &Error{Status: int32(status), Message: C.GoString(&err.message[0])}
}

// CreatePlan is spillway_plan_create.
func CreatePlan(dirs []string, limit, executorLimit int64) (int64, error) {
	ptrs := C.malloc(C.size_t(len(dirs)) * C.size_t(unsafe.Sizeof((*C.char)(nil))))
	defer C.free(ptrs)
	elems := unsafe.Slice((**C.char)(ptrs), len(dirs))
	for i, d := range dirs {
		elems[i] = C.CString(d)
		defer C.free(unsafe.Pointer(elems[i]))
	}
	var h C.int64_t
	var err C.spillway_error
	e := check(C.spillway_plan_create((**C.char)(ptrs), C.int32_t(len(dirs)), C.int64_t(limit), C.int64_t(executorLimit), &h, &err), &err)
	return int64(h), e
}

// ReleasePlan is spillway_plan_release.
func ReleasePlan(plan int64) error {
	var err C.spillway_error
	return check(C.spillway_plan_release(C.int64_t(plan), &err), &err)
}

// UsedDiskSpace is spillway_plan_used_disk_space.
func UsedDiskSpace(plan int64) (int64, error) {
	var n C.int64_t
	var err C.spillway_error
	e := check(C.spillway_plan_used_disk_space(C.int64_t(plan), &n, &err), &err)
	return int64(n), e
}

// CreateFile is spillway_spill_file_create.
func CreateFile(plan int64) (int64, error) {
	var h C.int64_t
	var err C.spillway_error
	e := check(C.spillway_spill_file_create(C.int64_t(plan), &h, &err), &err)
	return int64(h), e
}

// Write is spillway_spill_file_write of p, copied to C memory first.
func Write(file int64, p []byte) error {
	buf := C.CBytes(p)
	defer C.free(buf)
	var err C.spillway_error
	return check(C.spillway_spill_file_write(C.int64_t(file), (*C.uint8_t)(buf), C.int64_t(len(p)), &err), &err)
}

// Finish is spillway_spill_file_finish.
func Finish(file int64) error {
	var err C.spillway_error
	return check(C.spillway_spill_file_finish(C.int64_t(file), &err), &err)
}

// Size is spillway_spill_file_size.
func Size(file int64) (logical, stored int64, e error) {
	var l, s C.int64_t
	var err C.spillway_error
	e = check(C.spillway_spill_file_size(C.int64_t(file), &l, &s, &err), &err)
	return int64(l), int64(s), e
}

// ReadAll reads the file through one reader, closed at the end.
func ReadAll(file int64) ([]byte, error) {
	var rh, n C.int64_t
	var err C.spillway_error
	if e := check(C.spillway_reader_open(C.int64_t(file), &rh, &err), &err); e != nil {
		return nil, e
	}
	defer C.spillway_reader_close(rh, nil)
	const size = 64 << 10
	buf := C.malloc(size)
	defer C.free(buf)
	var out []byte
	for {
		if e := check(C.spillway_reader_read(rh, (*C.uint8_t)(buf), size, &n, &err), &err); e != nil {
			return out, e
		}
		if n < 0 {
			return out, nil
		}
		out = append(out, C.GoBytes(buf, C.int(n))...)
	}
}

// The counter kinds of the header.
const (
	StatCount = C.SPILLWAY_STAT_COUNT
	StatLevel = C.SPILLWAY_STAT_LEVEL
)

// Stat is one counter as the C ABI gives it.
type Stat struct {
	Name  string
	Kind  int32
	Value int64
}

// Stats is every counter, in the library's order: spillway_stats_count, spillway_stats_describe
// for each, then one spillway_stats_read.
func Stats() ([]Stat, error) {
	var n C.int32_t
	var err C.spillway_error
	if e := check(C.spillway_stats_count(&n, &err), &err); e != nil {
		return nil, e
	}
	stats := make([]Stat, n)
	for i := range stats {
		var name *C.char
		var kind C.int32_t
		if e := check(C.spillway_stats_describe(C.int32_t(i), &name, &kind, &err), &err); e != nil {
			return nil, e
		}
		stats[i].Name, stats[i].Kind = C.GoString(name), int32(kind)
	}
	values := make([]C.int64_t, max(n, 1))
	if e := check(C.spillway_stats_read(&values[0], n, &err), &err); e != nil {
		return nil, e
	}
	for i := range stats {
		stats[i].Value = int64(values[i])
	}
	return stats, nil
}

// StatValue is spillway_stats_value.
func StatValue(name string) (int64, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var v C.int64_t
	var err C.spillway_error
	e := check(C.spillway_stats_value(cname, &v, &err), &err)
	return int64(v), e
}
