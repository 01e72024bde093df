package jni

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/timob/jnigi"
)

// NativeSpill.createPlan(String[]), the card's call, recognises a list it validated before by its
// content: these tests check that what it recognises is always exactly what the array holds at
// the call.

// set stores a new String of s at arr[i] (in Java: testdata's Loop.set), as a caller mutating
// its array between calls does.
func (j *jvm) set(arr *jnigi.ObjectRef, i int, s string) {
	j.t.Helper()
	elem := j.str(utf16.Encode([]rune(s)))
	require.NoError(j.t, j.env.CallStaticMethod(loopClass, "set", nil, arr, i, elem))
	j.env.DeleteLocalRef(elem)
}

// newArray makes a String[] of new Strings, as a *jnigi.ObjectRef.
func (j *jvm) newArray(elems ...string) *jnigi.ObjectRef {
	j.t.Helper()
	refs := make([]*jnigi.ObjectRef, len(elems))
	for i, e := range elems {
		refs[i] = j.str(utf16.Encode([]rune(e)))
	}
	return j.env.ToObjectArray(refs, "java/lang/String")
}

// createPlanDirs calls createPlan(arr) and returns the dirs of the plan it made (released), or
// the message of the IllegalArgumentException it threw (plan dirs nil).
func (j *jvm) createPlanDirs(arr *jnigi.ObjectRef) (dirs []string, refused string) {
	j.t.Helper()
	h := Java_spillway_NativeSpill_createPlan(j.raw, 0, _Ctype_jobjectArray(arr.JObject()), 1<<20)
	if h == 0 {
		return nil, j.thrown("java.lang.IllegalArgumentException", "createPlan")
	}
	j.ok("createPlan")
	dirs, err := registry.PlanDirs(uint64(h))
	require.NoError(j.t, err)
	j.releasePlan(h)
	return dirs, ""
}

func TestJVMCreatePlanHitIsInTheSameDirs(t *testing.T) {
	j := attach(t)
	base, a, b := roots(t)
	arr := j.newArray(a, b)
	first, refused := j.createPlanDirs(arr)
	require.Empty(t, refused)
	assert.Equal(t, []string{a, b}, first)
	cached := registry.CachedDirSets()
	for range 3 {
		got, _ := j.createPlanDirs(arr)
		assert.Equal(t, []string{a, b}, got, "the same array")
		got, _ = j.createPlanDirs(j.newArray(a, b))
		assert.Equal(t, []string{a, b}, got, "another array of other Strings, the same content")
	}
	assert.Equal(t, cached, registry.CachedDirSets(), "the hits remember nothing new")

	// A hit's plan is a plan as any: its own limit, its dir made at its first file only.
	h := Java_spillway_NativeSpill_createPlan(j.raw, 0, _Ctype_jobjectArray(arr.JObject()), 100)
	j.ok("createPlan")
	assert.Equal(t, []string{"a", "b"}, entries(t, base))
	file := j.createTmpFile(h)
	path := j.path(file)
	assert.Contains(t, []string{a, b}, filepath.Dir(filepath.Dir(path)))
	Java_spillway_NativeSpill_write(j.raw, 0, file, obj(j.heapBuffer(make([]byte, 101))), 0, 101)
	j.thrown(limitException, "write past a hit's plan's limit")
	j.releasePlan(h)
	assert.Equal(t, []string{"a", "b"}, entries(t, base))
}

// A caller that puts another String at index i between calls, of the same content or not, valid
// or not, gets a plan in exactly the dirs its array holds at each call, or the error they deserve.
func TestJVMCreatePlanFollowsAMutatedArray(t *testing.T) {
	j := attach(t)
	_, a, b := roots(t)
	arr := j.newArray(a, b)
	steps := []mutationStep{
		{-1, "", []string{a, b}, ""},
		{1, a + "/../b", []string{a, b}, ""}, // the same dir after cleaning: a new list all the same
		{1, b, []string{a, b}, ""},           // a new String, the same content
		{0, b, nil, "is given twice"},
		{1, a, []string{b, a}, ""},
		{1, "relative/dir", nil, `#1 "relative/dir" is a relative path`},
		{1, a, []string{b, a}, ""}, // back to a list seen before
		{0, a, nil, "is given twice"},
		{0, b + "/x", []string{b + "/x", a}, ""},
		{0, "", nil, "#0 is an empty string"},
		{0, b, []string{b, a}, ""},
	}
	runMutationSteps(t, j, arr, steps, j.createPlanDirs)
}

// mutationStep sets arr[index] to value (index -1: no change), then expects a plan in want, or a
// refusal containing refused.
type mutationStep struct {
	index   int
	value   string
	want    []string
	refused string
}

// runMutationSteps runs steps against arr with create (which returns the plan's dirs, or the
// refusal), twice each: the first call may miss a cache, the second hits.
func runMutationSteps(t *testing.T, j *jvm, arr *jnigi.ObjectRef, steps []mutationStep, create func(*jnigi.ObjectRef) ([]string, string)) {
	t.Helper()
	for n, step := range steps {
		if step.index >= 0 {
			j.set(arr, step.index, step.value)
		}
		for range 2 {
			got, refused := create(arr)
			assert.Equal(t, step.want, got, "step %d", n)
			if step.refused == "" {
				assert.Empty(t, refused, "step %d", n)
			} else {
				assert.Contains(t, refused, step.refused, "step %d", n)
			}
		}
	}
}

// The errors of bad arrays are the same whether the cache holds valid sets that look like them or
// not: a null element, a lone surrogate or a NUL never matches a remembered list.
func TestJVMCreatePlanBadInputNeverHits(t *testing.T) {
	j := attach(t)
	_, a, b := roots(t)
	for _, good := range [][]string{{a}, {a, b}, {a + "/x"}} {
		_, refused := j.createPlanDirs(j.newArray(good...))
		require.Empty(t, refused)
	}
	nul := j.stringArray(j.str(utf16.Encode([]rune(a + "\x00" + b))))
	lone := j.stringArray(j.str(append(utf16.Encode([]rune(a+"/x")), 0xD800)))
	for range 2 {
		p := Java_spillway_NativeSpill_createPlan(j.raw, 0, j.strings(&a, nil), 1<<20)
		assert.Contains(t, j.thrown("java.lang.IllegalArgumentException", "a null element"), "localDirs[1] is null")
		assert.Zero(t, p)
		p = Java_spillway_NativeSpill_createPlan(j.raw, 0, nul, 1<<20)
		assert.Contains(t, j.thrown("java.lang.IllegalArgumentException", "a NUL"), "NUL char")
		assert.Zero(t, p)
		p = Java_spillway_NativeSpill_createPlan(j.raw, 0, lone, 1<<20)
		assert.Contains(t, j.thrown("java.lang.IllegalArgumentException", "a lone surrogate"), `unpaired UTF-16 surrogate \uD800`)
		assert.Zero(t, p)
		p = Java_spillway_NativeSpill_createPlan(j.raw, 0, 0, 1<<20)
		assert.Contains(t, j.thrown("java.lang.IllegalArgumentException", "a null array"), "localDirs is null")
		assert.Zero(t, p)
		h := Java_spillway_NativeSpill_createPlan(j.raw, 0, j.strings(&a), -1)
		assert.Contains(t, j.thrown("java.lang.IllegalArgumentException", "a negative limit on a hit"), "negative")
		assert.Zero(t, h)
	}
}

// Threads mutate arrays while others create plans from them (under -race, the detector watches
// the Go side): a plan is only ever in dirs the array held at the call, element by element, and a
// bad element read is refused, never mapped onto a remembered set.
func TestJVMCreatePlanConcurrentMutatorsNeverGetWrongDirs(t *testing.T) {
	const callers, rounds = 3, 300
	j := attach(t)
	_, a, b := roots(t)
	c, d := a+"/c", b+"/d"
	shared := j.env.NewGlobalRef(j.newArray(a, b))
	defer j.env.DeleteGlobalRef(shared)

	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go t.Run("mutator", func(t *testing.T) {
		defer wg.Done()
		j := attach(t)
		// Each element flips between a valid value and another, valid or not.
		values := [][]string{{a, c, a + "/.", "relative"}, {b, d, "", b}}
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			k := i % 2
			j.set(shared, k, values[k][(i/2)%len(values[k])])
		}
	})
	var callersWG sync.WaitGroup
	for g := range callers {
		callersWG.Add(1)
		go t.Run(fmt.Sprintf("caller %d", g), func(t *testing.T) {
			defer callersWG.Done()
			j := attach(t)
			own := j.newArray(a, b)
			ownWant := []string{a, b}
			for i := range rounds {
				// The caller's own array, changed by itself: exactly its content.
				if i%3 == g%3 {
					next := []string{c, d, a, b}[(i+g)%4]
					j.set(own, i%2, next)
					ownWant[i%2] = next
				}
				got, refused := j.createPlanDirs(own)
				if ownWant[0] == ownWant[1] {
					assert.Contains(t, refused, "is given twice")
				} else {
					assert.Equal(t, ownWant, got, "round %d", i)
				}

				// The shared array: any mix of the values each element held, never another dir.
				got, refused = j.createPlanDirs(shared)
				if got == nil {
					assert.Regexp(t, `relative path|empty string|given twice`, refused)
					continue
				}
				if assert.Len(t, got, 2) {
					assert.Contains(t, []string{a, c}, got[0], "round %d: element 0", i)
					assert.Contains(t, []string{b, d}, got[1], "round %d: element 1", i)
				}
			}
		})
	}
	callersWG.Wait()
	close(done)
	wg.Wait()
}

// javaCreatePlanDirs calls NativeSpill.createPlan(arr, 1 MiB) from Java, through the native the
// JVM bound, and returns the dirs of the plan it made (released), or the message of the
// IllegalArgumentException it threw.
func (j *jvm) javaCreatePlanDirs(arr *jnigi.ObjectRef) (dirs []string, refused string) {
	j.t.Helper()
	handler := j.env.ExceptionHandler
	j.env.ExceptionHandler = jnigi.ThrowableErrorExceptionHandler
	defer func() { j.env.ExceptionHandler = handler }()
	var h int64
	err := j.env.CallStaticMethod("spillway/NativeSpill", "createPlan", &h, arr, int64(1<<20))
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

// Called from Java, createPlan follows a caller that changes its array between calls exactly as
// the entry point called from Go does.
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

// Threads that bring equal lists from Java at the same time all get plans in the list's dirs, and
// the recognition of the list makes no registration: it is the library's own cache, not a handle.
func TestJVMJavaCreatePlanFromThreadsRegistersNothing(t *testing.T) {
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
	assert.Equal(t, registrations, registry.LiveLocalDirs())
}
