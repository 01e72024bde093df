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
	if !sweepOut(env, out) {
		return
	}
	rs, err := remoteSettings(env, settings, pathStyle, ssl)
	if err != nil {
		throw(env, err)
		return
	}
	if olderThanMillis <= 0 {
		throw(env, argumentError(fmt.Sprintf("olderThanMillis is %d; give a positive age", int64(olderThanMillis))))
		return
	}
	res, err := plan.SweepRemote(rs, time.Duration(olderThanMillis)*time.Millisecond)
	setSweepResult(env, out, res, err)
}

//export Java_spillway_NativeSpill_removeRemoteApplication
func Java_spillway_NativeSpill_removeRemoteApplication(env *C.JNIEnv, _ C.jclass, settings C.jobjectArray, pathStyle, ssl C.jboolean, out C.jlongArray) {
	defer recoverPanic(env)
	if !sweepOut(env, out) {
		return
	}
	rs, err := remoteSettings(env, settings, pathStyle, ssl)
	if err != nil {
		throw(env, err)
		return
	}
	res, err := plan.RemoveRemoteApplication(rs)
	setSweepResult(env, out, res, err)
}

// sweepOut checks the out array of a sweep, or throws.
func sweepOut(env *C.JNIEnv, out C.jlongArray) bool {
	if out == 0 || C.spillway_array_length(env, C.jarray(out)) < sweepResultLen {
		throw(env, argumentError(fmt.Sprintf("out must be a long[] of at least %d elements", sweepResultLen)))
		return false
	}
	return true
}

// setSweepResult fills out with what was removed, even when err says some calls failed, then
// throws err if there is one.
func setSweepResult(env *C.JNIEnv, out C.jlongArray, res spill.SweepResult, err error) {
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
