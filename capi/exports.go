// Package capi is the C ABI of libspillway.so (include/spillway.h), for native engines in the
// process (cmd/libspillway links it beside the JNI binding, package jni). Like the JNI entry points,
// it converts C values to Go values and errors to status codes and messages, and nothing else:
// the logic lives in package plan, on the process-wide registry both bindings share. Every entry
// point validates its pointers and recovers panics: nothing a caller passes may crash the process.
package capi

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include "spillway_cgo.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/spillway/spillway/plan"
)

// registry is the process's: the JVM's plans are in it too.
var registry = plan.ProcessRegistry()

//export spillway_abi_version
func spillway_abi_version() C.int32_t { return C.SPILLWAY_ABI_VERSION }

//export spillway_configure_format
func spillway_configure_format(codec *C.char, zstdLevel, encrypt, keyBits C.int32_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	if codec == nil {
		return fail(err, argumentError("codec is NULL; give none, lz4 or zstd"))
	}
	n := C.strnlen(codec, plan.MaxCodecNameLen+1)
	if n > plan.MaxCodecNameLen {
		return fail(err, plan.CodecNameTooLongError(int64(C.strlen(codec)), "bytes"))
	}
	return result(err, registry.ConfigureFormat(C.GoStringN(codec, C.int(n)), int(zstdLevel), encrypt != 0, int(keyBits)))
}

//export spillway_plan_create
func spillway_plan_create(localDirs **C.char, nDirs C.int32_t, maxTempDirectorySize, maxExecutorTempDirectorySize C.int64_t, planOut *C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	if planOut == nil {
		return fail(err, argumentError("plan_out is NULL; pass where to write the plan handle"))
	}
	paths, e := goDirs(localDirs, nDirs, "local_dirs")
	if e != nil {
		return fail(err, e)
	}
	dirs, e := plan.ParseLocalDirs(paths)
	if e != nil {
		return fail(err, e)
	}
	h, e := registry.CreatePlan(dirs, int64(maxTempDirectorySize), int64(maxExecutorTempDirectorySize))
	return handleOut(planOut, h, e, err)
}

//export spillway_local_dirs_register
func spillway_local_dirs_register(localDirs **C.char, nDirs C.int32_t, dirsOut *C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	if dirsOut == nil {
		return fail(err, argumentError("dirs_out is NULL; pass where to write the registration's handle"))
	}
	paths, e := goDirs(localDirs, nDirs, "local_dirs")
	if e != nil {
		return fail(err, e)
	}
	h, e := registry.RegisterLocalDirs(paths)
	return handleOut(dirsOut, h, e, err)
}

//export spillway_local_dirs_release
func spillway_local_dirs_release(dirs C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	return result(err, registry.ReleaseLocalDirs(uint64(dirs)))
}

//export spillway_plan_create_in
func spillway_plan_create_in(dirs, maxTempDirectorySize, maxExecutorTempDirectorySize C.int64_t, planOut *C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	if planOut == nil {
		return fail(err, argumentError("plan_out is NULL; pass where to write the plan handle"))
	}
	h, e := registry.CreatePlanIn(uint64(dirs), int64(maxTempDirectorySize), int64(maxExecutorTempDirectorySize))
	return handleOut(planOut, h, e, err)
}

// handleOut writes h to *out if e is nil, else reports e.
func handleOut(out *C.int64_t, h uint64, e error, err *C.spillway_error) C.int32_t {
	if e != nil {
		return fail(err, e)
	}
	*out = C.int64_t(h)
	return C.SPILLWAY_OK
}

//export spillway_plan_release
func spillway_plan_release(planHandle C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	return result(err, registry.ReleasePlan(uint64(planHandle)))
}

//export spillway_plan_used_disk_space
func spillway_plan_used_disk_space(planHandle C.int64_t, bytesOut *C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	if bytesOut == nil {
		return fail(err, argumentError("bytes_out is NULL; pass where to write the bytes used"))
	}
	used, e := registry.UsedDiskSpace(uint64(planHandle))
	if e != nil {
		return fail(err, e)
	}
	*bytesOut = C.int64_t(used)
	return C.SPILLWAY_OK
}

//export spillway_spill_file_create
func spillway_spill_file_create(planHandle C.int64_t, fileOut *C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	if fileOut == nil {
		return fail(err, argumentError("file_out is NULL; pass where to write the file handle"))
	}
	fh, e := registry.CreateSpillFile(uint64(planHandle))
	return handleOut(fileOut, fh, e, err)
}

//export spillway_spill_file_write
func spillway_spill_file_write(file C.int64_t, buf *C.uint8_t, length C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	p, e := region(buf, length, "buf", "len")
	if e != nil {
		return fail(err, e)
	}
	return result(err, registry.Write(uint64(file), p))
}

//export spillway_spill_file_finish
func spillway_spill_file_finish(file C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	return result(err, registry.FinishWrite(uint64(file)))
}

//export spillway_spill_file_size
func spillway_spill_file_size(file C.int64_t, logicalOut, storedOut *C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	logical, stored, e := registry.FileSizes(uint64(file))
	if e != nil {
		return fail(err, e)
	}
	if logicalOut != nil {
		*logicalOut = C.int64_t(logical)
	}
	if storedOut != nil {
		*storedOut = C.int64_t(stored)
	}
	return C.SPILLWAY_OK
}

//export spillway_spill_file_path
func spillway_spill_file_path(file C.int64_t, buf *C.char, capacity C.int64_t, lenOut *C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	if lenOut == nil {
		return fail(err, argumentError("len_out is NULL; pass where to write the path's length"))
	}
	dst, e := region((*C.uint8_t)(unsafe.Pointer(buf)), capacity, "buf", "cap")
	if e != nil {
		return fail(err, e)
	}
	path, e := registry.Path(uint64(file))
	if e != nil {
		return fail(err, e)
	}
	*lenOut = C.int64_t(len(path))
	if len(dst) < len(path)+1 {
		return fail(err, argumentError(fmt.Sprintf("buf has %d bytes; the path needs %d with its NUL (its length is in len_out)", len(dst), len(path)+1)))
	}
	dst[copy(dst, path)] = 0
	return C.SPILLWAY_OK
}

//export spillway_spill_file_release
func spillway_spill_file_release(file C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	return result(err, registry.ReleaseSpillFile(uint64(file)))
}

//export spillway_reader_open
func spillway_reader_open(file C.int64_t, readerOut *C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	if readerOut == nil {
		return fail(err, argumentError("reader_out is NULL; pass where to write the reader handle"))
	}
	rh, e := registry.OpenReader(uint64(file))
	return handleOut(readerOut, rh, e, err)
}

//export spillway_reader_read
func spillway_reader_read(reader C.int64_t, buf *C.uint8_t, capacity C.int64_t, nOut *C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	if nOut == nil {
		return fail(err, argumentError("n_out is NULL; pass where to write the bytes read"))
	}
	dst, e := region(buf, capacity, "buf", "cap")
	if e != nil {
		return fail(err, e)
	}
	n, e := registry.Read(uint64(reader), dst)
	if e != nil {
		return fail(err, e)
	}
	*nOut = C.int64_t(n)
	return C.SPILLWAY_OK
}

//export spillway_reader_close
func spillway_reader_close(reader C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	return result(err, registry.CloseReader(uint64(reader)))
}
