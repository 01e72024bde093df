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
#include <stdlib.h>
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

// The entry points bound to spillway.NativeSpill and spillway/jnitest/Loop, weak like JNI_OnLoad;
// the floor is only in the test build of the library (-tags spillway_testhooks).
#pragma weak Java_spillway_bench_NativeFloor_emptyCall
#pragma weak Java_spillway_NativeSpill_createPlan
#pragma weak Java_spillway_NativeSpill_createPlanWithExecutorLimit
#pragma weak Java_spillway_NativeSpill_createPlanIn
#pragma weak Java_spillway_NativeSpill_registerLocalDirs
#pragma weak Java_spillway_NativeSpill_releaseLocalDirs
#pragma weak Java_spillway_NativeSpill_releasePlan
#pragma weak Java_spillway_NativeSpill_statsNames
#pragma weak Java_spillway_NativeSpill_sortStatsNames
extern void Java_spillway_bench_NativeFloor_emptyCall(JNIEnv *, jclass);
extern jlong Java_spillway_NativeSpill_createPlan(JNIEnv *, jclass, jobjectArray, jlong);
extern jlong Java_spillway_NativeSpill_createPlanWithExecutorLimit(JNIEnv *, jclass, jobjectArray, jlong, jlong);
extern jlong Java_spillway_NativeSpill_createPlanIn(JNIEnv *, jclass, jlong, jlong, jlong);
extern jlong Java_spillway_NativeSpill_registerLocalDirs(JNIEnv *, jclass, jobjectArray);
extern void Java_spillway_NativeSpill_releaseLocalDirs(JNIEnv *, jclass, jlong);
extern void Java_spillway_NativeSpill_releasePlan(JNIEnv *, jclass, jlong);
extern jobjectArray Java_spillway_NativeSpill_statsNames(JNIEnv *, jclass);
extern jobjectArray Java_spillway_NativeSpill_sortStatsNames(JNIEnv *, jclass);

// createPlan(String[]) is a C entry point of the library (jni/native.c): Go test code calls it here.
static jlong jvmhost_create_plan(void *env, uintptr_t arr, jlong limit, jlong executor_limit, int with_executor_limit) {
	if (with_executor_limit) {
		return Java_spillway_NativeSpill_createPlanWithExecutorLimit(env, NULL, (jobjectArray)arr, limit, executor_limit);
	}
	return Java_spillway_NativeSpill_createPlan(env, NULL, (jobjectArray)arr, limit);
}

static JNIEnv *start_env(void) {
	JavaVM *vm = created_vm();
	JNIEnv *env = NULL;
	if (vm == NULL || (*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK) {
		return NULL;
	}
	return env;
}

// Class.forName(name, init, the system class loader), as a global reference (the class stays
// loaded); NULL, the exception cleared, if it cannot be loaded. JNI's FindClass would initialise
// the class: NativeSpill's natives must be bound before its static initialiser calls them.
static jclass load_class(JNIEnv *env, const char *name, jboolean init) {
	jclass result = NULL;
	jclass class_class = (*env)->FindClass(env, "java/lang/Class");
	jclass loader_class = (*env)->FindClass(env, "java/lang/ClassLoader");
	jstring jname = (*env)->NewStringUTF(env, name);
	if (class_class != NULL && loader_class != NULL && jname != NULL) {
		jmethodID for_name = (*env)->GetStaticMethodID(env, class_class, "forName",
		                                               "(Ljava/lang/String;ZLjava/lang/ClassLoader;)Ljava/lang/Class;");
		jmethodID system = (*env)->GetStaticMethodID(env, loader_class, "getSystemClassLoader", "()Ljava/lang/ClassLoader;");
		jobject loader = system == NULL ? NULL : (*env)->CallStaticObjectMethod(env, loader_class, system);
		if (for_name != NULL && loader != NULL) {
			jobject local = (*env)->CallStaticObjectMethod(env, class_class, for_name, jname, init, loader);
			if (local != NULL) {
				result = (jclass)(*env)->NewGlobalRef(env, local);
				(*env)->DeleteLocalRef(env, local);
			}
		}
		if (loader != NULL) {
			(*env)->DeleteLocalRef(env, loader);
		}
	}
	(*env)->ExceptionClear(env);
	if (jname != NULL) {
		(*env)->DeleteLocalRef(env, jname);
	}
	if (class_class != NULL) {
		(*env)->DeleteLocalRef(env, class_class);
	}
	if (loader_class != NULL) {
		(*env)->DeleteLocalRef(env, loader_class);
	}
	return result;
}

// Binds the natives of spillway.NativeSpill that Java code of the tests reaches (its static
// initialiser's included) and spillway/jnitest/Loop's floor. Returns 0, 1 if the floor is missing
// (the others are bound), -1 if a symbol or class is missing or binding failed (the exception
// cleared).
static int jvmhost_bind_natives(void) {
	JNIEnv *env = start_env();
	if (env == NULL) {
		return -1;
	}
	if (Java_spillway_NativeSpill_createPlan == NULL || Java_spillway_NativeSpill_createPlanWithExecutorLimit == NULL ||
	    Java_spillway_NativeSpill_createPlanIn == NULL ||
	    Java_spillway_NativeSpill_registerLocalDirs == NULL || Java_spillway_NativeSpill_releaseLocalDirs == NULL ||
	    Java_spillway_NativeSpill_releasePlan == NULL ||
	    Java_spillway_NativeSpill_statsNames == NULL || Java_spillway_NativeSpill_sortStatsNames == NULL) {
		return -1;
	}
	jclass spill = load_class(env, "spillway.NativeSpill", JNI_FALSE);
	jclass loop = load_class(env, "spillway.jnitest.Loop", JNI_FALSE);
	if (spill == NULL || loop == NULL) {
		return -1;
	}
	JNINativeMethod spill_methods[] = {
		{"createPlan", "([Ljava/lang/String;J)J", (void *)Java_spillway_NativeSpill_createPlan},
		{"createPlanWithExecutorLimit", "([Ljava/lang/String;JJ)J", (void *)Java_spillway_NativeSpill_createPlanWithExecutorLimit},
		{"createPlanIn", "(JJJ)J", (void *)Java_spillway_NativeSpill_createPlanIn},
		{"registerLocalDirs", "([Ljava/lang/String;)J", (void *)Java_spillway_NativeSpill_registerLocalDirs},
		{"releaseLocalDirs", "(J)V", (void *)Java_spillway_NativeSpill_releaseLocalDirs},
		{"releasePlan", "(J)V", (void *)Java_spillway_NativeSpill_releasePlan},
		{"statsNames", "()[Ljava/lang/String;", (void *)Java_spillway_NativeSpill_statsNames},
		{"sortStatsNames", "()[Ljava/lang/String;", (void *)Java_spillway_NativeSpill_sortStatsNames},
	};
	if ((*env)->RegisterNatives(env, spill, spill_methods, sizeof spill_methods / sizeof spill_methods[0]) != 0) {
		(*env)->ExceptionClear(env);
		return -1;
	}
	if (Java_spillway_bench_NativeFloor_emptyCall == NULL) {
		return 1;
	}
	JNINativeMethod loop_methods[] = {
		{"emptyCall", "()V", (void *)Java_spillway_bench_NativeFloor_emptyCall},
	};
	if ((*env)->RegisterNatives(env, loop, loop_methods, 1) != 0) {
		(*env)->ExceptionClear(env);
		return -1;
	}
	return 0;
}

// Loads and initialises the class of binary name name; 0, or -1 (the exception cleared).
static int jvmhost_init_class(const char *name) {
	JNIEnv *env = start_env();
	return env != NULL && load_class(env, name, JNI_TRUE) != NULL ? 0 : -1;
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

// BindNatives binds the natives of the shim's spillway.NativeSpill that the tests' Java code
// reaches, and spillway/jnitest/Loop's floor (jni/testdata), to the library linked into this
// binary, before either class initialises; call it on Start's thread, with both on the class
// path. hasFloor says whether Loop.emptyCall is bound (only in the test build of the library).
func BindNatives() (hasFloor bool, err error) {
	switch C.jvmhost_bind_natives() {
	case 0:
		return true, nil
	case 1:
		return false, nil
	}
	return false, errors.New("binding the natives of spillway.NativeSpill and spillway.jnitest.Loop failed (class or entry points missing)")
}

// InitClasses loads and initialises each class (binary names, e.g. spillway.NativeSpill), so that
// none is loaded later, once the class path may be gone; call it on Start's thread, after
// BindNatives.
func InitClasses(names ...string) error {
	for _, name := range names {
		cname := C.CString(name)
		rc := C.jvmhost_init_class(cname)
		C.free(unsafe.Pointer(cname))
		if rc != 0 {
			return fmt.Errorf("loading and initialising class %s failed", name)
		}
	}
	return nil
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
