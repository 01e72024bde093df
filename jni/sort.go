package jni

/*
#include "native.h"
*/
import "C"

import "fmt"

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

// sortAdd returns the bytes of the batch taken: all of it, or the whole records before the first
// that would take the sort's memory past limit; state, if not null, gets the sort's stats after
// the add (memoryNeeded: what to grant for the rest of the batch).
//
//export Java_spillway_NativeSpill_sortAdd
func Java_spillway_NativeSpill_sortAdd(env *C.JNIEnv, _ C.jclass, sortHandle C.jlong, batch C.jobject, offset, length C.jint,
	limit C.jlong, state C.jlongArray) C.jint {
	defer recoverPanic(env)
	if state != 0 && C.spillway_array_length(env, C.jarray(state)) < sortStatsMinLen {
		throw(env, argumentError(fmt.Sprintf("state must be null or a long[] of at least %d elements", sortStatsMinLen)))
		return 0
	}
	data, release, err := batchBytes(env, batch, offset, length)
	if err != nil {
		throw(env, err)
		return 0
	}
	defer release()
	taken, st, err := registry.SortAdd(uint64(sortHandle), data, int64(limit))
	if err != nil {
		throw(env, err)
		return 0
	}
	if state != 0 {
		setSortStats(env, state, &st)
	}
	return C.jint(taken)
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
