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

// TakeException returns the exception pending on env, cleared, as a local reference (nil if none
// is pending): JNI allows no other call while one is pending.
func TakeException(env unsafe.Pointer) *jnigi.ObjectRef {
	ex := C.jvmhost_take_exception(env)
	if ex == 0 {
		return nil
	}
	return jnigi.WrapJObject(uintptr(ex), "java/lang/Throwable", false)
}
