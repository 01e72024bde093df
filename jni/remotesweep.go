package jni

/*
#include "native.h"
*/
import "C"

import (
	"fmt"
	"time"

	"github.com/spillway/spillway/plan"
	"github.com/spillway/spillway/spill"
)

// The driver's calls on the remote tier (plan.SweepRemote and the others). They take the
// settings as configureRemote does, maxSize aside, and never change the process's tier.

// sweepResultLen is how many longs sweepRemote and removeRemoteApplication fill: prefixes
// removed, objects deleted, uploads aborted, and 1 if the store could not list its uploads.
const sweepResultLen = 4

//export Java_spillway_NativeSpill_markRemoteApplication
func Java_spillway_NativeSpill_markRemoteApplication(env *C.JNIEnv, _ C.jclass, settings C.jobjectArray, pathStyle, ssl C.jboolean) {
	defer recoverPanic(env)
	rs, err := remoteSettings(env, settings, pathStyle, ssl)
	if err == nil {
		err = plan.MarkRemoteApplication(rs)
	}
	if err != nil {
		throw(env, err)
	}
}

//export Java_spillway_NativeSpill_sweepRemote
func Java_spillway_NativeSpill_sweepRemote(env *C.JNIEnv, _ C.jclass, settings C.jobjectArray, pathStyle, ssl C.jboolean, olderThanMillis C.jlong, out C.jlongArray) {
	defer recoverPanic(env)
	if olderThanMillis <= 0 {
		throw(env, argumentError(fmt.Sprintf("olderThanMillis is %d; give a positive age", int64(olderThanMillis))))
		return
	}
	sweep(env, settings, pathStyle, ssl, out, func(rs plan.RemoteSettings) (spill.SweepResult, error) {
		return plan.SweepRemote(rs, time.Duration(olderThanMillis)*time.Millisecond)
	})
}

//export Java_spillway_NativeSpill_removeRemoteApplication
func Java_spillway_NativeSpill_removeRemoteApplication(env *C.JNIEnv, _ C.jclass, settings C.jobjectArray, pathStyle, ssl C.jboolean, out C.jlongArray) {
	defer recoverPanic(env)
	sweep(env, settings, pathStyle, ssl, out, plan.RemoveRemoteApplication)
}

// sweep checks out and reads the settings, runs call with them, and fills out with what it
// removed (even when it failed in part), then throws its error if there is one.
func sweep(env *C.JNIEnv, settings C.jobjectArray, pathStyle, ssl C.jboolean, out C.jlongArray, call func(plan.RemoteSettings) (spill.SweepResult, error)) {
	if out == 0 || C.spillway_array_length(env, C.jarray(out)) < sweepResultLen {
		throw(env, argumentError(fmt.Sprintf("out must be a long[] of at least %d elements", sweepResultLen)))
		return
	}
	rs, err := remoteSettings(env, settings, pathStyle, ssl)
	if err != nil {
		throw(env, err)
		return
	}
	res, err := call(rs)
	notListed := C.jlong(0)
	if res.UploadsNotListed {
		notListed = 1
	}
	vals := [sweepResultLen]C.jlong{C.jlong(res.Prefixes), C.jlong(res.Objects), C.jlong(res.Uploads), notListed}
	C.spillway_set_longs(env, out, &vals[0], sweepResultLen)
	if err != nil {
		throw(env, err)
	}
}
