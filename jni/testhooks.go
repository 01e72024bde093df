//go:build spillway_testhooks

package jni

/*
#include "native.h"
*/
import "C"

// Java_spillway_bench_NativeFloor_emptyCall does nothing: it is the floor the JMH benchmarks
// (scala-shim/bench, NativeFloor) set the library's calls against, one JNI call into a library
// of the same sources. Only the test build has it (make lib-testhooks, -tags spillway_testhooks):
// the product library exports no native that only benchmarks or tests call.
//
//export Java_spillway_bench_NativeFloor_emptyCall
func Java_spillway_bench_NativeFloor_emptyCall(*C.JNIEnv, C.jclass) {}
