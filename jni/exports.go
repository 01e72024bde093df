// Package jni is the JNI binding of libspillway.so (cmd/libspillway links it beside the C ABI's):
// the entry points behind spillway.NativeSpill. It converts JNI values to Go values and errors to
// Java exceptions, and nothing else: the logic lives in package plan. Every entry point recovers
// panics, because a Go panic that escapes into the JVM aborts the executor.
package jni

/*
#include "native.h"
*/
import "C"

import (
	"github.com/spillway/spillway/plan"
)

// registry holds every plan of this process: the C ABI's (package capi) use it too. A variable, so
// that a test can make an entry point panic.
var registry = plan.ProcessRegistry()

// NativeSpill.createPlan(String[], long) and createPlanWithExecutorLimit, the card's calls for
// callers that have only the array, are C entry points (native.c): each reads the array into its
// own frame and hands what it read to spillway_jni_create_plan; the registry recognises a list it
// has validated before by its content (Registry.CreatePlanForDirs), so only a new list is decoded
// and validated. An executor registers its dirs once instead (registerLocalDirs) and creates each
// plan with createPlanIn, which reads no array.
//
//export spillway_jni_create_plan
func spillway_jni_create_plan(env *C.JNIEnv, status C.int, read *C.spillway_strings, limit, executorLimit C.jlong) C.jlong {
	defer recoverPanic(env)
	r := stringsRead{c: *read, name: "localDirs"}
	if err := r.err(status); err != nil {
		throw(env, err)
		return 0
	}
	h, err := registry.CreatePlanForDirs(r.key(), r.decode, int64(limit), int64(executorLimit))
	return handleOrThrow(env, h, err)
}

//export Java_spillway_NativeSpill_registerLocalDirs
func Java_spillway_NativeSpill_registerLocalDirs(env *C.JNIEnv, _ C.jclass, localDirs C.jobjectArray) C.jlong {
	defer recoverPanic(env)
	paths, err := javaStrings(env, localDirs, "localDirs")
	if err != nil {
		throw(env, err)
		return 0
	}
	h, err := registry.RegisterLocalDirs(paths)
	return handleOrThrow(env, h, err)
}

//export Java_spillway_NativeSpill_releaseLocalDirs
func Java_spillway_NativeSpill_releaseLocalDirs(env *C.JNIEnv, _ C.jclass, dirs C.jlong) {
	defer recoverPanic(env)
	if err := registry.ReleaseLocalDirs(uint64(dirs)); err != nil {
		throw(env, err)
	}
}

//export Java_spillway_NativeSpill_createPlanIn
func Java_spillway_NativeSpill_createPlanIn(env *C.JNIEnv, _ C.jclass, dirs, maxTempDirectorySize, maxExecutorTempDirectorySize C.jlong) C.jlong {
	defer recoverPanic(env)
	h, err := registry.CreatePlanIn(uint64(dirs), int64(maxTempDirectorySize), int64(maxExecutorTempDirectorySize))
	return handleOrThrow(env, h, err)
}

func handleOrThrow(env *C.JNIEnv, h uint64, err error) C.jlong {
	if err != nil {
		throw(env, err)
		return 0
	}
	return C.jlong(h)
}

//export Java_spillway_NativeSpill_releasePlan
func Java_spillway_NativeSpill_releasePlan(env *C.JNIEnv, _ C.jclass, planHandle C.jlong) {
	defer recoverPanic(env)
	if err := registry.ReleasePlan(uint64(planHandle)); err != nil {
		throw(env, err)
	}
}

//export Java_spillway_NativeSpill_usedDiskSpace
func Java_spillway_NativeSpill_usedDiskSpace(env *C.JNIEnv, _ C.jclass, planHandle C.jlong) C.jlong {
	defer recoverPanic(env)
	used, err := registry.UsedDiskSpace(uint64(planHandle))
	if err != nil {
		throw(env, err)
		return 0
	}
	return C.jlong(used)
}

//export Java_spillway_NativeSpill_createTmpFile
func Java_spillway_NativeSpill_createTmpFile(env *C.JNIEnv, _ C.jclass, planHandle C.jlong) C.jlong {
	defer recoverPanic(env)
	fh, err := registry.CreateTmpFile(uint64(planHandle))
	if err != nil {
		throw(env, err)
		return 0
	}
	return C.jlong(fh)
}

//export Java_spillway_NativeSpill_path
func Java_spillway_NativeSpill_path(env *C.JNIEnv, _ C.jclass, file C.jlong) C.jstring {
	defer recoverPanic(env)
	path, err := registry.Path(uint64(file))
	if err != nil {
		throw(env, err)
		return 0
	}
	return javaString(env, path)
}

//export Java_spillway_NativeSpill_write
func Java_spillway_NativeSpill_write(env *C.JNIEnv, _ C.jclass, file C.jlong, buf C.jobject, offset, length C.jint) C.jint {
	defer recoverPanic(env)
	if err := writeBuffer(env, uint64(file), buf, offset, length); err != nil {
		throw(env, err)
		return 0
	}
	return length
}

//export Java_spillway_NativeSpill_releaseTmpFile
func Java_spillway_NativeSpill_releaseTmpFile(env *C.JNIEnv, _ C.jclass, file C.jlong) {
	defer recoverPanic(env)
	if err := registry.ReleaseTmpFile(uint64(file)); err != nil {
		throw(env, err)
	}
}

//export Java_spillway_NativeSpill_sweepOrphans
func Java_spillway_NativeSpill_sweepOrphans(env *C.JNIEnv, _ C.jclass, dirs C.jobjectArray) C.jint {
	defer recoverPanic(env)
	paths, err := javaStrings(env, dirs, "dirs")
	if err != nil {
		throw(env, err)
		return 0
	}
	removed, err := plan.SweepOrphans(paths)
	if err != nil {
		throw(env, err)
		return 0
	}
	return C.jint(removed)
}
