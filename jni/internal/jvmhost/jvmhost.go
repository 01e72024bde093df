// Package jvmhost is test support for package jni (libspillway): it hosts a real JVM inside a Go
// test binary through jnigi and gives the test the raw JNIEnv pointers the library's entry points
// take. In a test binary the library is linked in, not loaded with System.load, so the JVM never
// calls its JNI_OnLoad: OnLoad calls it, as System.load would. Nothing of this package is part of
// libspillway.so.
package jvmhost

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <jni.h>

// Weak, so that this package links without the library (it then reports the symbol missing);
// in the library's test binary it is the library's own JNI_OnLoad.
#pragma weak JNI_OnLoad

typedef jint (*get_created_vms)(JavaVM **, jsize, jsize *);

// The JVM jnigi created: libjvm.so is dlopen'd with RTLD_GLOBAL, so its symbols are found here.
static JavaVM *created_vm(void) {
	get_created_vms get = (get_created_vms)dlsym(RTLD_DEFAULT, "JNI_GetCreatedJavaVMs");
	if (get == NULL) {
		return NULL;
	}
	JavaVM *vm = NULL;
	jsize n = 0;
	if (get(&vm, 1, &n) != JNI_OK || n < 1) {
		return NULL;
	}
	return vm;
}

// The JVM installs its handlers for these after the Go runtime's, without SA_ONSTACK: a fault in
// Go code (a nil dereference the library's recoverPanic turns into a RuntimeException) then
// arrives on a goroutine's small stack and the Go runtime aborts ("non-Go code set up signal
// handler without SA_ONSTACK flag"). With SA_ONSTACK the handler runs on the signal stack, and the
// JVM hands a fault outside Java code on to the Go handler it replaced (signal chaining). In
// production the order is the other way round: the JVM is first, and Go's handlers forward.
static int jvmhost_handlers_on_stack(void) {
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGPIPE, SIGXFSZ, SIGUSR2};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		struct sigaction sa;
		if (sigaction(sigs[i], NULL, &sa) != 0) {
			return sigs[i];
		}
		if ((sa.sa_flags & SA_SIGINFO) == 0 && (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)) {
			continue;
		}
		if ((sa.sa_flags & SA_ONSTACK) == 0) {
			sa.sa_flags |= SA_ONSTACK;
			if (sigaction(sigs[i], &sa, NULL) != 0) {
				return sigs[i];
			}
		}
	}
	return 0;
}

static int jvmhost_has_on_load(void) { return JNI_OnLoad != NULL; }

static jint jvmhost_on_load(void) {
	JavaVM *vm = created_vm();
	return vm == NULL ? JNI_ERR : JNI_OnLoad(vm, NULL);
}

static void *jvmhost_attach(void) {
	JavaVM *vm = created_vm();
	JNIEnv *env = NULL;
	if (vm == NULL || (*vm)->AttachCurrentThread(vm, (void **)&env, NULL) != JNI_OK) {
		return NULL;
	}
	return env;
}

static jint jvmhost_detach(void) {
	JavaVM *vm = created_vm();
	return vm == NULL ? JNI_ERR : (*vm)->DetachCurrentThread(vm);
}

// The entry points spillway/jnitest/Loop binds, weak like JNI_OnLoad; the floor is only in the
// test build of the library (-tags spillway_testhooks).
#pragma weak Java_spillway_bench_NativeFloor_emptyCall
#pragma weak Java_spillway_NativeSpill_createPlan
#pragma weak Java_spillway_NativeSpill_createPlanIn
#pragma weak Java_spillway_NativeSpill_releasePlan
#pragma weak Java_spillway_NativeSpill_createPlanWithExecutorLimit
extern void Java_spillway_bench_NativeFloor_emptyCall(JNIEnv *, jclass);
extern jlong Java_spillway_NativeSpill_createPlan(JNIEnv *, jclass, jobjectArray, jlong);
extern jlong Java_spillway_NativeSpill_createPlanIn(JNIEnv *, jclass, jlong, jlong, jlong);
extern void Java_spillway_NativeSpill_releasePlan(JNIEnv *, jclass, jlong);
extern jlong Java_spillway_NativeSpill_createPlanWithExecutorLimit(JNIEnv *, jclass, jobjectArray, jlong, jlong);

// createPlan(String[]) is a C entry point of the library (jni/native.c): Go test code calls it here.
static jlong jvmhost_create_plan(void *env, uintptr_t arr, jlong limit, jlong executor_limit, int with_executor_limit) {
	if (with_executor_limit) {
		return Java_spillway_NativeSpill_createPlanWithExecutorLimit(env, NULL, (jobjectArray)arr, limit, executor_limit);
	}
	return Java_spillway_NativeSpill_createPlan(env, NULL, (jobjectArray)arr, limit);
}

// Loads spillway/jnitest/Loop and binds its natives (a global reference keeps the class loaded).
// Returns 0, 1 if the floor is missing (the others are bound), -1 if a symbol or the class is
// missing or binding failed (the exception cleared).
static int jvmhost_register_loop(void) {
	JavaVM *vm = created_vm();
	JNIEnv *env = NULL;
	if (vm == NULL || (*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK) {
		return -1;
	}
	if (Java_spillway_NativeSpill_createPlan == NULL || Java_spillway_NativeSpill_createPlanIn == NULL ||
	    Java_spillway_NativeSpill_releasePlan == NULL) {
		return -1;
	}
	jclass local = (*env)->FindClass(env, "spillway/jnitest/Loop");
	if (local == NULL) {
		(*env)->ExceptionClear(env);
		return -1;
	}
	jclass cls = (jclass)(*env)->NewGlobalRef(env, local);
	(*env)->DeleteLocalRef(env, local);
	JNINativeMethod methods[] = {
		{"createPlan", "([Ljava/lang/String;J)J", (void *)Java_spillway_NativeSpill_createPlan},
		{"createPlanIn", "(JJJ)J", (void *)Java_spillway_NativeSpill_createPlanIn},
		{"releasePlan", "(J)V", (void *)Java_spillway_NativeSpill_releasePlan},
		{"emptyCall", "()V", (void *)Java_spillway_bench_NativeFloor_emptyCall},
	};
	int n = Java_spillway_bench_NativeFloor_emptyCall == NULL ? 3 : 4;
	if ((*env)->RegisterNatives(env, cls, methods, n) != 0) {
		(*env)->ExceptionClear(env);
		return -1;
	}
	return n == 4 ? 0 : 1;
}

// Returns the pending exception (a new local reference) and clears it, or 0 if none is pending.
static jthrowable jvmhost_take_exception(void *penv) {
	JNIEnv *env = penv;
	jthrowable ex = (*env)->ExceptionOccurred(env);
	if (ex != NULL) {
		(*env)->ExceptionClear(env);
	}
	return ex;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/timob/jnigi"
)

// Start loads libjvm.so from javaHome and creates the process's one JVM with options, on the
// calling goroutine's thread, which stays locked to it (jnigi's requirement).
func Start(javaHome string, options ...string) error {
	lib := javaHome + "/lib/server/libjvm.so"
	if err := jnigi.LoadJVMLib(lib); err != nil {
		return fmt.Errorf("loading %s (set JAVA_HOME to a JDK 17): %w", lib, err)
	}
	runtime.LockOSThread()
	if _, _, err := jnigi.CreateJVM(jnigi.NewJVMInitArgs(false, false, jnigi.JNI_VERSION_1_8, options)); err != nil {
		return fmt.Errorf("creating a JVM with %q: %w", options, err)
	}
	if sig := C.jvmhost_handlers_on_stack(); sig != 0 {
		return fmt.Errorf("setting SA_ONSTACK on the JVM's handler of signal %d failed", int(sig))
	}
	return nil
}

// OnLoad runs the JNI_OnLoad linked into this binary against the JVM of Start, as System.load
// would, and returns the JNI version it asked for.
func OnLoad() (int, error) {
	if C.jvmhost_has_on_load() == 0 {
		return 0, errors.New("no JNI_OnLoad is linked into this binary")
	}
	v := int(C.jvmhost_on_load())
	if v < 0 {
		return 0, fmt.Errorf("JNI_OnLoad failed with %d", v)
	}
	return v, nil
}

// Attach locks the calling goroutine to its thread, attaches the thread to the JVM and returns
// its JNIEnv, raw and wrapped by jnigi. Call Detach on the same goroutine when done.
func Attach() (unsafe.Pointer, *jnigi.Env, error) {
	runtime.LockOSThread()
	env := C.jvmhost_attach()
	if env == nil {
		runtime.UnlockOSThread()
		return nil, nil, errors.New("attaching the thread to the JVM failed (was Start called?)")
	}
	return env, jnigi.WrapEnv(env), nil
}

// Detach undoes Attach.
func Detach() error {
	defer runtime.UnlockOSThread()
	if C.jvmhost_detach() != C.JNI_OK {
		return errors.New("detaching the thread from the JVM failed")
	}
	return nil
}

// RegisterLoop loads the class spillway/jnitest/Loop (jni/testdata) from the class path and binds
// its natives to the library linked into this binary; call it on Start's thread, before the class
// path goes. hasFloor says whether its emptyCall is bound (only in the test build of the library).
func RegisterLoop() (hasFloor bool, err error) {
	switch C.jvmhost_register_loop() {
	case 0:
		return true, nil
	case 1:
		return false, nil
	}
	return false, errors.New("binding spillway/jnitest/Loop's natives failed (class or entry points missing)")
}

// CreatePlan calls the library's NativeSpill.createPlan(String[], long) entry point, which is C
// (jni/native.c), with env and the array arr; CreatePlanWithExecutorLimit calls
// createPlanWithExecutorLimit. Test files cannot call C themselves.
func CreatePlan(env unsafe.Pointer, arr uintptr, limit int64) int64 {
	return int64(C.jvmhost_create_plan(env, C.uintptr_t(arr), C.jlong(limit), 0, 0))
}

func CreatePlanWithExecutorLimit(env unsafe.Pointer, arr uintptr, limit, executorLimit int64) int64 {
	return int64(C.jvmhost_create_plan(env, C.uintptr_t(arr), C.jlong(limit), C.jlong(executorLimit), 1))
}

// TakeException returns the exception pending on env, cleared, as a local reference (nil if none
// is pending): JNI allows no other call while one is pending.
func TakeException(env unsafe.Pointer) *jnigi.ObjectRef {
	ex := C.jvmhost_take_exception(env)
	if ex == 0 {
		return nil
	}
	return jnigi.WrapJObject(uintptr(ex), "java/lang/Throwable", false)
}
