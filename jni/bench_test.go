package jni

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"
	"github.com/timob/jnigi"
)

// loopHasFloor says whether spillway/jnitest/Loop.emptyCall is bound: only in the test build of
// the library (go test -tags spillway_testhooks), which has NativeFloor.emptyCall. Set in TestMain.
var loopHasFloor bool

const loopClass = "spillway/jnitest/Loop"

// BenchmarkJVMPlanLifecycle creates and releases a plan that never spills through real
// Java-to-native calls: each op is one iteration of a Java loop (testdata's Loop) calling the
// shim's NativeSpill, two calls into the library. floor is two empty calls
// (NativeFloor.emptyCall, -tags spillway_testhooks); in is createPlanIn with registered dirs, the
// executor's path; array is the card's createPlan(String[], long), the same String[] every time,
// as a caller without a registration passes it (after the first call, a hit of the library's
// cache of dir lists by content: the array is read, its paths not converted again); array-equal
// is two arrays of equal content in distinct Strings, alternately. Compare them within one run:
//
//	go test -tags spillway_testhooks -run '^$' -bench JVMPlanLifecycle -count 6 ./jni/
func BenchmarkJVMPlanLifecycle(b *testing.B) {
	dirs := make([]string, 8)
	base := b.TempDir()
	for i := range dirs {
		dirs[i] = filepath.Join(base, fmt.Sprintf("local-dir-%d", i))
		require.NoError(b, os.Mkdir(dirs[i], 0o700))
	}
	b.Run("floor", func(b *testing.B) {
		if !loopHasFloor {
			b.Skip("no NativeFloor.emptyCall: run with -tags spillway_testhooks")
		}
		j := attach(b)
		b.ResetTimer()
		require.NoError(b, j.env.CallStaticMethod(loopClass, "empty", nil, b.N))
	})
	b.Run("in/dirs=8", func(b *testing.B) {
		j := attach(b)
		h := j.registerLocalDirs(dirs...)
		defer j.releaseLocalDirs(h)
		b.ResetTimer()
		require.NoError(b, j.env.CallStaticMethod(loopClass, "createPlansIn", nil, b.N, int64(h)))
	})
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("array/dirs=%d", n), func(b *testing.B) {
			j := attach(b)
			refs := make([]*jnigi.ObjectRef, n)
			for i, d := range dirs[:n] {
				refs[i] = j.str(utf16.Encode([]rune(d)))
			}
			arr := j.env.ToObjectArray(refs, "java/lang/String")
			b.ResetTimer()
			require.NoError(b, j.env.CallStaticMethod(loopClass, "createPlans", nil, b.N, arr))
		})
	}
	b.Run("array-equal/dirs=8", func(b *testing.B) {
		j := attach(b)
		arrays := make([]*jnigi.ObjectRef, 2)
		for k := range arrays {
			refs := make([]*jnigi.ObjectRef, len(dirs))
			for i, d := range dirs {
				refs[i] = j.str(utf16.Encode([]rune(d))) // a new String every time
			}
			arrays[k] = j.env.ToObjectArray(refs, "java/lang/String")
		}
		b.ResetTimer()
		require.NoError(b, j.env.CallStaticMethod(loopClass, "createPlansAlternating", nil, b.N, arrays[0], arrays[1]))
	})
}
