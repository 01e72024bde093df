package jni

/*
#include "native.h"
*/
import "C"

import (
	"fmt"

	"github.com/spillway/spillway/plan"
)

// remoteSettingsLen is the length of configureRemote's settings: uri, endpoint, region, access
// key, secret key, in that order ("" for unset).
const remoteSettingsLen = 5

//export Java_spillway_NativeSpill_configureRemote
func Java_spillway_NativeSpill_configureRemote(env *C.JNIEnv, _ C.jclass, settings C.jobjectArray, pathStyle, ssl C.jboolean, maxSize C.jlong) {
	defer recoverPanic(env)
	// The values are never put in a message: a secret key is among them.
	s, err := javaStrings(env, settings, "settings")
	if err != nil {
		throw(env, err)
		return
	}
	if len(s) != remoteSettingsLen {
		throw(env, argumentError(fmt.Sprintf("settings has %d elements; pass %d: uri, endpoint, region, access key, secret key", len(s), remoteSettingsLen)))
		return
	}
	err = registry.ConfigureRemote(plan.RemoteSettings{
		URI: s[0], Endpoint: s[1], Region: s[2], AccessKey: s[3], SecretKey: s[4],
		PathStyle: pathStyle != 0, SSL: ssl != 0, MaxSize: int64(maxSize),
	})
	if err != nil {
		throw(env, err)
	}
}
