package jni

// These tests call the library's JNI entry points directly from Go, with the JNIEnv of a real
// JVM hosted in this test binary through jnigi (one JVM per process, started in TestMain): Java
// objects are made with jnigi, each call's pending exception is checked by class name, and the
// spill dirs are checked on disk. The JVM suites of scala-shim cover the contract from Java; these
// check the Go side of the boundary where the Go tooling (the race detector included) sees it.
//
// A test file cannot import "C", so the entry points' parameter types are named by what cgo
// generates for them (_Ctype_JNIEnv, _Ctype_jlong, ...); JNI references are uintptrs on both
// sides (cgo's and jnigi's). jni/internal/jvmhost holds the few calls that need C.

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timob/jnigi"

	"github.com/spillway/spillway/jni/internal/jvmhost"
)

const (
	limitException = "spillway.SpillLimitExceededException"
	// noShimClassesEnv makes TestMain start the JVM without the shim's classes, for the child
	// process of TestJVMLimitWithoutShimClassesIsAnIOException.
	noShimClassesEnv = "SPILLWAY_JVMTEST_WITHOUT_SHIM_CLASSES"
	jniVersion1_8    = 0x00010008 // what JNI_OnLoad must return
)

func TestMain(m *testing.M) {
	os.Exit(runWithJVM(m))
}

func runWithJVM(m *testing.M) int {
	javaHome, err := findJavaHome()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	options := []string{
		"-Xrs",    // leaves SIGINT/SIGTERM/SIGQUIT/SIGHUP to the Go runtime
		"-Xmx64m", // small heap, small address-space reservation
		"-XX:+UseSerialGC",
		// No -Xcheck:jni: its periodic check reports every handler jvmhost.Start gives
		// SA_ONSTACK as modified, at length. The JVM suites run the contract under it
		// (XcheckJniSuite).
	}
	classes := "" // the class path, removed once JNI_OnLoad has loaded the class
	if os.Getenv(noShimClassesEnv) == "" {
		classes, err = os.MkdirTemp("", "spillway-jvmtest-classes-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(classes)
		// The contract's exception class and NativeSpill, compiled from the
		// shim's own sources (against testdata's NativeLoader: the library is linked in), with
		// the benchmarks' loops of Java-to-native calls (bench_test.go).
		shim := filepath.Join("..", "scala-shim", "src", "main", "java", "spillway")
		src := []string{
			filepath.Join(shim, "SpillLimitExceededException.java"),
			filepath.Join(shim, "NativeSpill.java"),
			filepath.Join("testdata", "spillway", "NativeLoader.java"),
			filepath.Join("testdata", "spillway", "jnitest", "Loop.java"),
		}
		javac := exec.Command(filepath.Join(javaHome, "bin", "javac"), append([]string{"-d", classes}, src...)...)
		if out, err := javac.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "compiling %s: %v\n%s", src, err, out)
			return 1
		}
		options = append(options, "-Djava.class.path="+classes)
	}
	if err := jvmhost.Start(javaHome, options...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if version, err := jvmhost.OnLoad(); err != nil || version != jniVersion1_8 {
		fmt.Fprintf(os.Stderr, "JNI_OnLoad: version %#x, %v (want JNI_VERSION_1_8)\n", version, err)
		return 1
	}
	// Every class javac wrote is loaded now (JNI_OnLoad's exception class, NativeSpill once its
	// natives are bound), none later: the dir goes before any test runs, so a test that crashes
	// the process leaves nothing behind.
	if classes != "" {
		if loopHasFloor, err = jvmhost.BindNatives(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		names, err := classNames(classes)
		if err == nil {
			err = jvmhost.InitClasses(names...)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := os.RemoveAll(classes); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// classNames are the binary names of the classes under the class path dir (nested ones included).
func classNames(dir string) ([]string, error) {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".class") {
			return err
		}
		rel, err := filepath.Rel(dir, strings.TrimSuffix(p, ".class"))
		names = append(names, strings.ReplaceAll(rel, string(filepath.Separator), "."))
		return err
	})
	return names, err
}

// findJavaHome is $JAVA_HOME, else the JDK of the javac on the PATH (as the Makefile finds it).
func findJavaHome() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		return home, nil
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		return "", fmt.Errorf("no JDK: set JAVA_HOME or put javac on the PATH (%v)", err)
	}
	if javac, err = filepath.EvalSymlinks(javac); err != nil {
		return "", err
	}
	return filepath.Dir(filepath.Dir(javac)), nil
}

// jvm is a test's view of the JVM: its thread's JNIEnv, raw for the entry points and wrapped by
// jnigi to make Java objects and read exceptions.
type jvm struct {
	t   testing.TB
	raw *_Ctype_JNIEnv
	ptr unsafe.Pointer // raw, untyped
	env *jnigi.Env
}

// attach attaches the test's goroutine (locked to its thread) to the JVM and opens a local frame
// for the test's references; both are undone when the test ends.
func attach(t testing.TB) *jvm {
	t.Helper()
	raw, env, err := jvmhost.Attach()
	require.NoError(t, err)
	require.NoError(t, env.PushLocalFrame(1024))
	t.Cleanup(func() {
		env.PopLocalFrame(nil)
		assert.NoError(t, jvmhost.Detach())
	})
	return &jvm{t: t, raw: (*_Ctype_JNIEnv)(raw), ptr: raw, env: env}
}

// str makes a java.lang.String of exactly these UTF-16 chars.
func (j *jvm) str(units []uint16) *jnigi.ObjectRef {
	j.t.Helper()
	s, err := j.env.NewObject("java/lang/String", units)
	require.NoError(j.t, err)
	return s
}

// strings makes a String[]; a nil element is a null.
func (j *jvm) strings(elems ...*string) _Ctype_jobjectArray {
	j.t.Helper()
	refs := make([]*jnigi.ObjectRef, len(elems))
	for i, e := range elems {
		if e == nil {
			refs[i] = jnigi.NewObjectRef("java/lang/String")
		} else {
			refs[i] = j.str(utf16.Encode([]rune(*e)))
		}
	}
	return j.stringArray(refs...)
}

func (j *jvm) stringArray(elems ...*jnigi.ObjectRef) _Ctype_jobjectArray {
	return _Ctype_jobjectArray(j.env.ToObjectArray(elems, "java/lang/String").JObject())
}

// longArray makes a long[n] of zeros; longs reads one back.
func (j *jvm) longArray(n int) _Ctype_jlongArray {
	j.t.Helper()
	arr, err := j.env.ToJavaArray(make([]int64, n))
	require.NoError(j.t, err)
	return _Ctype_jlongArray(arr)
}

func (j *jvm) longs(arr _Ctype_jlongArray) []int64 {
	j.t.Helper()
	out, err := j.env.ToGoArray(jnigi.WrapJObject(uintptr(arr), "long", true).JObject(), jnigi.Long)
	require.NoError(j.t, err)
	return out.([]int64)
}

// heapBuffer is ByteBuffer.wrap(data); directBuffer a direct buffer holding data (its position
// is left at the end, which the absolute-index contract of write ignores).
func (j *jvm) heapBuffer(data []byte) *jnigi.ObjectRef {
	j.t.Helper()
	buf := jnigi.NewObjectRef("java/nio/ByteBuffer")
	require.NoError(j.t, j.env.CallStaticMethod("java/nio/ByteBuffer", "wrap", buf, data))
	return buf
}

func (j *jvm) directBuffer(data []byte) *jnigi.ObjectRef {
	j.t.Helper()
	buf := jnigi.NewObjectRef("java/nio/ByteBuffer")
	require.NoError(j.t, j.env.CallStaticMethod("java/nio/ByteBuffer", "allocateDirect", buf, len(data)))
	require.NoError(j.t, buf.CallMethod(j.env, "put", jnigi.NewObjectRef("java/nio/ByteBuffer"), data))
	return buf
}

func (j *jvm) readOnly(buf *jnigi.ObjectRef) *jnigi.ObjectRef {
	j.t.Helper()
	ro := jnigi.NewObjectRef("java/nio/ByteBuffer")
	require.NoError(j.t, buf.CallMethod(j.env, "asReadOnlyBuffer", ro))
	return ro
}

func obj(ref *jnigi.ObjectRef) _Ctype_jobject { return _Ctype_jobject(ref.JObject()) }

// thrown asserts that the last call left an exception of class className (a binary name) with a
// message, clears it and returns the message.
func (j *jvm) thrown(className, call string) string {
	j.t.Helper()
	ex := jvmhost.TakeException(j.ptr)
	if !assert.NotNil(j.t, ex, "%s: no exception pending, want %s", call, className) {
		return ""
	}
	e, err := jnigi.NewThrowableErrorFromObject(j.env, ex)
	require.NoError(j.t, err)
	assert.Equal(j.t, className, e.ClassName, "%s: %s", call, e.Message)
	assert.NotEmpty(j.t, strings.TrimSpace(e.Message), "%s: %s has no message", call, e.ClassName)
	return e.Message
}

// ok asserts that the last call left no exception pending.
func (j *jvm) ok(call string) {
	j.t.Helper()
	if ex := jvmhost.TakeException(j.ptr); ex != nil {
		e, err := jnigi.NewThrowableErrorFromObject(j.env, ex)
		require.NoError(j.t, err)
		j.t.Fatalf("%s threw %s: %s", call, e.ClassName, e.Message)
	}
}

// Typed calls of the entry points, each checked to leave no exception.

// Java_spillway_NativeSpill_createPlan and ..WithExecutorLimit call the entry points of those
// names, which are C (native.c), through jvmhost: a test file cannot call C.
func Java_spillway_NativeSpill_createPlan(env *_Ctype_JNIEnv, _ _Ctype_jclass, arr _Ctype_jobjectArray, limit _Ctype_jlong) _Ctype_jlong {
	return _Ctype_jlong(jvmhost.CreatePlan(unsafe.Pointer(env), uintptr(arr), int64(limit)))
}

func Java_spillway_NativeSpill_createPlanWithExecutorLimit(env *_Ctype_JNIEnv, _ _Ctype_jclass, arr _Ctype_jobjectArray, limit, executorLimit _Ctype_jlong) _Ctype_jlong {
	return _Ctype_jlong(jvmhost.CreatePlanWithExecutorLimit(unsafe.Pointer(env), uintptr(arr), int64(limit), int64(executorLimit)))
}

func (j *jvm) registerLocalDirs(roots ...string) _Ctype_jlong {
	j.t.Helper()
	elems := make([]*string, len(roots))
	for i := range roots {
		elems[i] = &roots[i]
	}
	h := Java_spillway_NativeSpill_registerLocalDirs(j.raw, 0, j.strings(elems...))
	j.ok("registerLocalDirs")
	require.NotZero(j.t, h)
	return h
}

func (j *jvm) createPlanIn(dirs _Ctype_jlong, limit int64) _Ctype_jlong {
	j.t.Helper()
	h := Java_spillway_NativeSpill_createPlanIn(j.raw, 0, dirs, _Ctype_jlong(limit), math.MaxInt64)
	j.ok("createPlanIn")
	require.NotZero(j.t, h)
	return h
}

func (j *jvm) createTmpFile(plan _Ctype_jlong) _Ctype_jlong {
	j.t.Helper()
	f := Java_spillway_NativeSpill_createTmpFile(j.raw, 0, plan)
	j.ok("createTmpFile")
	require.NotZero(j.t, f)
	return f
}

func (j *jvm) write(file _Ctype_jlong, buf *jnigi.ObjectRef, offset, length int32) {
	j.t.Helper()
	n := Java_spillway_NativeSpill_write(j.raw, 0, file, obj(buf), _Ctype_jint(offset), _Ctype_jint(length))
	j.ok("write")
	require.EqualValues(j.t, length, n)
}

func (j *jvm) used(plan _Ctype_jlong) int64 {
	j.t.Helper()
	n := Java_spillway_NativeSpill_usedDiskSpace(j.raw, 0, plan)
	j.ok("usedDiskSpace")
	return int64(n)
}

// path returns NativeSpill.path(file), read back through jnigi from the Java string.
func (j *jvm) path(file _Ctype_jlong) string {
	j.t.Helper()
	s := Java_spillway_NativeSpill_path(j.raw, 0, file)
	j.ok("path")
	return j.goString(jnigi.WrapJObject(uintptr(s), "java/lang/String", false))
}

func (j *jvm) goString(s *jnigi.ObjectRef) string {
	j.t.Helper()
	var chars []uint16
	require.NoError(j.t, s.CallMethod(j.env, "toCharArray", &chars))
	return string(utf16.Decode(chars))
}

// goStrings reads a String[] back.
func (j *jvm) goStrings(arr _Ctype_jobjectArray) []string {
	j.t.Helper()
	require.NotZero(j.t, arr)
	refs := j.env.FromObjectArray(jnigi.WrapJObject(uintptr(arr), "java/lang/String", true))
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = j.goString(r)
	}
	return out
}

func (j *jvm) releasePlan(plan _Ctype_jlong) {
	j.t.Helper()
	Java_spillway_NativeSpill_releasePlan(j.raw, 0, plan)
	j.ok("releasePlan")
}

func (j *jvm) releaseLocalDirs(dirs _Ctype_jlong) {
	j.t.Helper()
	Java_spillway_NativeSpill_releaseLocalDirs(j.raw, 0, dirs)
	j.ok("releaseLocalDirs")
}

// roots makes two local dirs under a temp dir the test removes; entries lists everything under
// them, relative to the temp dir.
func roots(t *testing.T) (base string, a, b string) {
	base = t.TempDir()
	a, b = filepath.Join(base, "a"), filepath.Join(base, "b")
	require.NoError(t, os.Mkdir(a, 0o700))
	require.NoError(t, os.Mkdir(b, 0o700))
	return base, a, b
}

func entries(t *testing.T, base string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(base, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != base {
			rel, _ := filepath.Rel(base, p)
			out = append(out, rel)
		}
		return nil
	}))
	return out
}

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + seed*7 ^ i>>8)
	}
	return b
}

// refusedEverywhere asserts that every method taking a plan or file handle refuses h with an
// IllegalStateException.
func (j *jvm) refusedEverywhere(h _Ctype_jlong, buf *jnigi.ObjectRef) {
	j.t.Helper()
	const illegalState = "java.lang.IllegalStateException"
	call := fmt.Sprintf("handle %#x: ", uint64(h))
	Java_spillway_NativeSpill_createTmpFile(j.raw, 0, h)
	j.thrown(illegalState, call+"createTmpFile")
	Java_spillway_NativeSpill_usedDiskSpace(j.raw, 0, h)
	j.thrown(illegalState, call+"usedDiskSpace")
	Java_spillway_NativeSpill_path(j.raw, 0, h)
	j.thrown(illegalState, call+"path")
	Java_spillway_NativeSpill_write(j.raw, 0, h, obj(buf), 0, 1)
	j.thrown(illegalState, call+"write")
	Java_spillway_NativeSpill_releaseTmpFile(j.raw, 0, h)
	j.thrown(illegalState, call+"releaseTmpFile")
	Java_spillway_NativeSpill_releaseSpillFile(j.raw, 0, h)
	j.thrown(illegalState, call+"releaseSpillFile")
	Java_spillway_NativeSpill_releasePlan(j.raw, 0, h)
	j.thrown(illegalState, call+"releasePlan")
	Java_spillway_NativeSpill_releaseLocalDirs(j.raw, 0, h)
	j.thrown(illegalState, call+"releaseLocalDirs")
	Java_spillway_NativeSpill_createPlanIn(j.raw, 0, h, 1<<20, math.MaxInt64)
	j.thrown(illegalState, call+"createPlanIn")
}
