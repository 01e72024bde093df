package jni

/*
#include "native.h"
*/
import "C"

//export Java_spillway_NativeSpill_createSort
func Java_spillway_NativeSpill_createSort(env *C.JNIEnv, _ C.jclass, planHandle, memoryBudget C.jlong) C.jlong {
	defer recoverPanic(env)
	sh, err := registry.CreateSort(uint64(planHandle), int64(memoryBudget))
	if err != nil {
		throw(env, err)
		return 0
	}
	return C.jlong(sh)
}

//export Java_spillway_NativeSpill_sortAdd
func Java_spillway_NativeSpill_sortAdd(env *C.JNIEnv, _ C.jclass, sortHandle C.jlong, batch C.jobject, offset, length C.jint) {
	defer recoverPanic(env)
	data, release, err := batchBytes(env, batch, offset, length)
	if err != nil {
		throw(env, err)
		return
	}
	defer release()
	if err := registry.SortAdd(uint64(sortHandle), data); err != nil {
		throw(env, err)
	}
}

//export Java_spillway_NativeSpill_sortSpill
func Java_spillway_NativeSpill_sortSpill(env *C.JNIEnv, _ C.jclass, sortHandle C.jlong, refill C.jboolean) C.jlong {
	defer recoverPanic(env)
	freed, err := registry.SortSpill(uint64(sortHandle), refill != C.JNI_FALSE)
	if err != nil {
		throw(env, err)
		return 0
	}
	return C.jlong(freed)
}

//export Java_spillway_NativeSpill_sortMemoryUsed
func Java_spillway_NativeSpill_sortMemoryUsed(env *C.JNIEnv, _ C.jclass, sortHandle C.jlong) C.jlong {
	defer recoverPanic(env)
	used, err := registry.SortMemoryUsed(uint64(sortHandle))
	if err != nil {
		throw(env, err)
		return 0
	}
	return C.jlong(used)
}

//export Java_spillway_NativeSpill_sortAddGrowthBound
func Java_spillway_NativeSpill_sortAddGrowthBound(env *C.JNIEnv, _ C.jclass, sortHandle C.jlong, length, records C.jint) C.jlong {
	defer recoverPanic(env)
	bound, err := registry.SortAddGrowthBound(uint64(sortHandle), int(length), int(records))
	if err != nil {
		throw(env, err)
		return 0
	}
	return C.jlong(bound)
}

// sortNext returns the bytes filled, 0 at the end, or minus the size of a buffer that would hold
// the next record, so the caller grows its buffer instead of catching an exception.
//
//export Java_spillway_NativeSpill_sortNext
func Java_spillway_NativeSpill_sortNext(env *C.JNIEnv, _ C.jclass, sortHandle C.jlong, out C.jobject, offset, length C.jint) C.jint {
	defer recoverPanic(env)
	dst, err := directBufferBytes(env, out, offset, length, "out")
	if err != nil {
		throw(env, err)
		return 0
	}
	n, need, err := registry.SortNext(uint64(sortHandle), dst)
	switch {
	case err != nil:
		throw(env, err)
		return 0
	case need > 0:
		return C.jint(-need)
	}
	return C.jint(n)
}

//export Java_spillway_NativeSpill_releaseSort
func Java_spillway_NativeSpill_releaseSort(env *C.JNIEnv, _ C.jclass, sortHandle C.jlong) {
	defer recoverPanic(env)
	if err := registry.ReleaseSort(uint64(sortHandle)); err != nil {
		throw(env, err)
	}
}
