package jni

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/capi/capitest"
	"github.com/spillway/spillway/plan"
)

// The two bindings share one registry: a native engine adopts the plan a JVM task created by its
// handle, its files take the format the JVM configured, its bytes count in the JVM's view of the
// plan and in the executor budget of every plan, and the JVM's release of the plan removes them.
func TestJVMPlanIsAdoptedThroughTheCABI(t *testing.T) {
	j := attach(t)
	base, a, _ := roots(t)
	lz4 := j.str([]uint16{'l', 'z', '4'})
	Java_spillway_NativeSpill_configureFormat(j.raw, 0, _Ctype_jstring(obj(lz4)), 1, 1, 128)
	j.ok("configureFormat")
	t.Cleanup(func() { require.NoError(t, registry.ConfigureFormat("none", 1, false, 128)) })

	jvmPlan := Java_spillway_NativeSpill_createPlan(j.raw, 0, j.strings(&a), math.MaxInt64)
	j.ok("createPlan")
	require.NotZero(t, jvmPlan)
	assert.Equal(t, []string{"a", "b"}, entries(t, base), "no dir before the first file")

	data := bytes.Repeat([]byte("spilled by a native engine, "), 20000) // compressible
	file, err := capitest.CreateFile(int64(jvmPlan))
	require.NoError(t, err)
	require.NoError(t, capitest.Write(file, data))
	require.NoError(t, capitest.Finish(file))
	logical, stored, err := capitest.Size(file)
	require.NoError(t, err)
	assert.EqualValues(t, len(data), logical)
	assert.Less(t, stored, logical/4, "the JVM's format (lz4) applies to the C side's files")
	got, err := capitest.ReadAll(file)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(data, got), "the bytes read back differ")
	assert.Equal(t, stored, j.used(jvmPlan), "the JVM sees the C side's bytes in its plan")
	cUsed, err := capitest.UsedDiskSpace(int64(jvmPlan))
	require.NoError(t, err)
	assert.Equal(t, stored, cUsed)

	// A plan of the C side's own, with an executor limit the JVM plan's bytes already take most of.
	cPlan, err := capitest.CreatePlan([]string{a}, plan.Unlimited, stored+100<<10)
	require.NoError(t, err)
	big, err := capitest.CreateFile(cPlan)
	require.NoError(t, err)
	err = capitest.Write(big, pattern(600<<10, 1))
	var cerr *capitest.Error
	require.ErrorAs(t, err, &cerr)
	assert.EqualValues(t, capitest.ErrLimitExceeded, cerr.Status)
	assert.Contains(t, cerr.Message, plan.MaxExecutorTempDirectorySizeKey)
	require.NoError(t, capitest.ReleasePlan(cPlan))

	// The JVM releases its plan: the C side's file goes with it, and its handle is dead.
	j.releasePlan(jvmPlan)
	assert.Equal(t, []string{"a", "b"}, entries(t, base), "the JVM's release left the C side's files")
	_, _, err = capitest.Size(file)
	require.ErrorAs(t, err, &cerr)
	assert.EqualValues(t, capitest.ErrInvalidHandle, cerr.Status)
	err = capitest.ReleasePlan(int64(jvmPlan))
	require.ErrorAs(t, err, &cerr)
	assert.EqualValues(t, capitest.ErrInvalidHandle, cerr.Status)
}

// Both bindings expose the one stats layout: the C ABI names, in the JNI binding's order, the counters
// the JVM reads, with the same kinds, and counts a plan the JVM creates.
func TestBothDoorsReadTheSameCounters(t *testing.T) {
	j := attach(t)
	kinds := map[int32]string{capitest.StatCount: string(plan.Count), capitest.StatLevel: string(plan.Level)}
	before, err := capitest.Stats()
	require.NoError(t, err)
	var names, kindNames []string
	for _, s := range before {
		names = append(names, s.Name)
		kindNames = append(kindNames, kinds[s.Kind])
	}
	assert.Equal(t, j.goStrings(Java_spillway_NativeSpill_statsNames(j.raw, 0)), names)
	j.ok("statsNames")
	assert.Equal(t, j.goStrings(Java_spillway_NativeSpill_statsKinds(j.raw, 0)), kindNames)
	j.ok("statsKinds")

	_, a, _ := roots(t)
	jvmPlan := Java_spillway_NativeSpill_createPlan(j.raw, 0, j.strings(&a), math.MaxInt64)
	j.ok("createPlan")
	live, err := capitest.StatValue("livePlans")
	require.NoError(t, err)
	created, err := capitest.StatValue("plansCreated")
	require.NoError(t, err)
	j.releasePlan(jvmPlan)
	value := func(name string) int64 {
		for _, s := range before {
			if s.Name == name {
				return s.Value
			}
		}
		t.Fatalf("no counter %s through the C ABI", name)
		return 0
	}
	assert.Equal(t, value("livePlans")+1, live, "the JVM's plan is live for the C side")
	assert.Equal(t, value("plansCreated")+1, created)
}
