package jni

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The driver's calls reject bad arguments with an IllegalArgumentException before they build a
// store or make a call: a short out array, a settings array of the wrong length, a bad URI, a
// non-positive age.
func TestJVMRemoteSweepBadInput(t *testing.T) {
	j := attach(t)
	uri, empty := "s3a://bucket/prefix", ""
	good := func() _Ctype_jobjectArray { return j.strings(&uri, &empty, &empty, &empty, &empty, &empty) }
	Java_spillway_NativeSpill_sweepRemote(j.raw, 0, good(), 1, 0, 1000, j.longArray(sweepResultLen-1))
	assert.Contains(t, j.thrown("java.lang.IllegalArgumentException", "a short out"), "out must be a long[]")
	Java_spillway_NativeSpill_sweepRemote(j.raw, 0, good(), 1, 0, 0, j.longArray(sweepResultLen))
	assert.Contains(t, j.thrown("java.lang.IllegalArgumentException", "age 0"), "positive age")
	Java_spillway_NativeSpill_removeRemoteApplication(j.raw, 0, j.strings(&uri), 1, 0, j.longArray(sweepResultLen))
	assert.Contains(t, j.thrown("java.lang.IllegalArgumentException", "one setting"), "settings has 1 elements")
	bad := "gs://bucket/prefix"
	Java_spillway_NativeSpill_markRemoteApplication(j.raw, 0, j.strings(&bad, &empty, &empty, &empty, &empty, &empty), 1, 0)
	assert.Contains(t, j.thrown("java.lang.IllegalArgumentException", "a gs URI"), "spark.spillway.remote.uri")
	assert.Nil(t, registry.Remote(), "the process's tier is as it was")
}
