package jni

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timob/jnigi"
)

// NativeSpill.createPlan(String[]) recognises in Java the lists the library accepted before (the
// shim's DirListCache, compiled into the test JVM), each through a registration it made once:
// these tests watch it from the library's side, where the registrations and each plan's dirs are.
// They bring new lists of their own; the cache keeps 64, of which the jni tests use a few.

const nativeSpillClass = "spillway/NativeSpill"

// javaCreatePlanDirs calls NativeSpill.createPlan(arr, 1 MiB) in Java and returns the dirs of the
// plan it made (released), or the message of the IllegalArgumentException it threw.
func (j *jvm) javaCreatePlanDirs(arr *jnigi.ObjectRef) (dirs []string, refused string) {
	j.t.Helper()
	handler := j.env.ExceptionHandler
	j.env.ExceptionHandler = jnigi.ThrowableErrorExceptionHandler
	defer func() { j.env.ExceptionHandler = handler }()
	var h int64
	err := j.env.CallStaticMethod(nativeSpillClass, "createPlan", &h, arr, int64(1<<20))
	if err != nil {
		var thrown jnigi.ThrowableError
		require.True(j.t, errors.As(err, &thrown), "createPlan: %v", err)
		require.Equal(j.t, "java.lang.IllegalArgumentException", thrown.ClassName, thrown.Message)
		return nil, thrown.Message
	}
	dirs, err = registry.PlanDirs(uint64(h))
	require.NoError(j.t, err)
	j.releasePlan(_Ctype_jlong(h))
	return dirs, ""
}

// A caller that changes its array between calls gets a plan in exactly the dirs it holds at each
// call, or the exception they deserve, whether the list is one the cache knows or not.
func TestJVMJavaCreatePlanFollowsAMutatedArray(t *testing.T) {
	j := attach(t)
	_, a, b := roots(t)
	arr := j.newArray(a, b)
	steps := []mutationStep{
		{-1, "", []string{a, b}, ""},
		{1, a + "/../b", []string{a, b}, ""}, // the same dirs after cleaning, another list
		{1, b, []string{a, b}, ""},           // a new String, the same content: a hit
		{0, b, nil, "is given twice"},
		{1, a, []string{b, a}, ""},
		{1, "relative/dir", nil, `#1 "relative/dir" is a relative path`},
		{1, a, []string{b, a}, ""},
		{0, "", nil, "#0 is an empty string"},
		{0, b, []string{b, a}, ""},
	}
	runMutationSteps(t, j, arr, steps, j.javaCreatePlanDirs)
}

// Threads that bring a new list at the same time make one registration between them, kept: a
// thread that lost the race to publish its own releases it, and a hit makes none. Every plan is
// in the list's dirs.
func TestJVMJavaCreatePlanRegistersAListOnce(t *testing.T) {
	const callers, rounds = 4, 50
	_, a, b := roots(t)
	registrations := registry.LiveLocalDirs()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range callers {
		wg.Add(1)
		go t.Run(fmt.Sprintf("caller %d", g), func(t *testing.T) {
			defer wg.Done()
			j := attach(t)
			arr := j.newArray(a, b) // Strings of its own, equal to the other callers'
			<-start
			for i := range rounds {
				got, refused := j.javaCreatePlanDirs(arr)
				require.Empty(t, refused)
				require.Equal(t, []string{a, b}, got, "round %d", i)
			}
		})
	}
	close(start)
	wg.Wait()
	assert.Equal(t, registrations+1, registry.LiveLocalDirs())

	j := attach(t)
	for range 3 {
		got, _ := j.javaCreatePlanDirs(j.newArray(a, b))
		assert.Equal(t, []string{a, b}, got)
	}
	assert.Equal(t, registrations+1, registry.LiveLocalDirs(), "hits register nothing")
}
