package jni

/*
#include "native.h"
*/
import "C"

import (
	"fmt"

	"github.com/spillway/spillway/plan"
)

// The layouts of the stats arrays are plan's (plan.StatsLayout, plan.SortStatsLayout): the JVM
// reads them through statsNames, statsKinds and sortStatsNames, and writes none down itself.

// sortStatsMinLen is the shortest array sortStats takes: callers written when it had five values
// pass five.
const sortStatsMinLen = 5

//export Java_spillway_NativeSpill_statsNames
func Java_spillway_NativeSpill_statsNames(env *C.JNIEnv, _ C.jclass) C.jobjectArray {
	defer recoverPanic(env)
	return javaStringArray(env, len(plan.StatsLayout), func(i int) string { return plan.StatsLayout[i].Name })
}

//export Java_spillway_NativeSpill_statsKinds
func Java_spillway_NativeSpill_statsKinds(env *C.JNIEnv, _ C.jclass) C.jobjectArray {
	defer recoverPanic(env)
	return javaStringArray(env, len(plan.StatsLayout), func(i int) string { return string(plan.StatsLayout[i].Kind) })
}

//export Java_spillway_NativeSpill_sortStatsNames
func Java_spillway_NativeSpill_sortStatsNames(env *C.JNIEnv, _ C.jclass) C.jobjectArray {
	defer recoverPanic(env)
	return javaStringArray(env, len(plan.SortStatsLayout), func(i int) string { return plan.SortStatsLayout[i].Name })
}

//export Java_spillway_NativeSpill_stats
func Java_spillway_NativeSpill_stats(env *C.JNIEnv, _ C.jclass, out C.jlongArray) {
	defer recoverPanic(env)
	n := len(plan.StatsLayout)
	if out == 0 || int(C.spillway_array_length(env, C.jarray(out))) < n {
		throw(env, argumentError(fmt.Sprintf("out must be a long[] of at least %d elements", n)))
		return
	}
	st := registry.Stats()
	vals := make([]C.jlong, n)
	for i, s := range plan.StatsLayout {
		vals[i] = C.jlong(s.Value(&st))
	}
	C.spillway_set_longs(env, out, &vals[0], C.jsize(n))
}

//export Java_spillway_NativeSpill_sortStats
func Java_spillway_NativeSpill_sortStats(env *C.JNIEnv, _ C.jclass, sortHandle C.jlong, out C.jlongArray) {
	defer recoverPanic(env)
	if out == 0 || C.spillway_array_length(env, C.jarray(out)) < sortStatsMinLen {
		throw(env, argumentError(fmt.Sprintf("out must be a long[] of at least %d elements", sortStatsMinLen)))
		return
	}
	st, err := registry.SortStats(uint64(sortHandle))
	if err != nil {
		throw(env, err)
		return
	}
	setSortStats(env, out, &st)
}

// setSortStats writes st into out, a long[] of at least sortStatsMinLen elements, in the order of
// plan.SortStatsLayout, as many values as out holds.
func setSortStats(env *C.JNIEnv, out C.jlongArray, st *plan.SortStats) {
	n := min(int(C.spillway_array_length(env, C.jarray(out))), len(plan.SortStatsLayout))
	vals := make([]C.jlong, n)
	for i := range vals {
		vals[i] = C.jlong(plan.SortStatsLayout[i].Value(st))
	}
	C.spillway_set_longs(env, out, &vals[0], C.jsize(n))
}

// javaStringArray returns a new String[n] whose element i is name(i), or 0 with an exception
// pending.
func javaStringArray(env *C.JNIEnv, n int, name func(int) string) C.jobjectArray {
	arr := C.spillway_new_string_array(env, C.jsize(n))
	if arr == 0 {
		throw(env, errJavaPending)
		return 0
	}
	for i := range n {
		s := javaString(env, name(i))
		if s == 0 || C.spillway_set_string(env, arr, C.jsize(i), s) != 0 {
			throw(env, errJavaPending)
			return 0
		}
	}
	return arr
}
