// Command libspillway is libspillway.so (build it with -buildmode=c-shared and the version script
// the Makefile makes from include/spillway.h): the library that links the two bindings onto
// package plan side by side, the JNI entry points behind spillway.NativeSpill (package jni) and
// the C ABI of include/spillway.h (package capi). Both use the process's one registry; neither
// imports the other.
package main

import (
	_ "github.com/spillway/spillway/capi" // the C ABI's exports
	_ "github.com/spillway/spillway/jni"  // the JNI entry points and JNI_OnLoad
)

func main() {}
