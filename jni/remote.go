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
// key, secret key, application id, in that order ("" for unset).
const remoteSettingsLen = 6

//export Java_spillway_NativeSpill_configureRemote
func Java_spillway_NativeSpill_configureRemote(env *C.JNIEnv, _ C.jclass, settings C.jobjectArray, pathStyle, ssl C.jboolean, maxSize C.jlong) {
	defer recoverPanic(env)
	rs, err := remoteSettings(env, settings, pathStyle, ssl)
	if err != nil {
		throw(env, err)
		return
	}
	rs.MaxSize = int64(maxSize)
	if err := registry.ConfigureRemote(rs); err != nil {
		throw(env, err)
	}
}

// remoteSettings reads the settings array of configureRemote and of the sweep's calls.
func remoteSettings(env *C.JNIEnv, settings C.jobjectArray, pathStyle, ssl C.jboolean) (plan.RemoteSettings, error) {
	// The values are never put in a message: a secret key is among them.
	s, err := javaStrings(env, settings, "settings")
	if err != nil {
		return plan.RemoteSettings{}, err
	}
	if len(s) != remoteSettingsLen {
		return plan.RemoteSettings{}, argumentError(fmt.Sprintf("settings has %d elements; pass %d: uri, endpoint, region, access key, secret key, application id", len(s), remoteSettingsLen))
	}
	return plan.RemoteSettings{
		URI: s[0], Endpoint: s[1], Region: s[2], AccessKey: s[3], SecretKey: s[4], Application: s[5],
		PathStyle: pathStyle != 0, SSL: ssl != 0,
	}, nil
}
