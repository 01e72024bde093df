package capi

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/plan"
)

// The kinds of include/spillway.h.
const (
	statCount = 1
	statLevel = 2
)

// goName reads a NUL-terminated name the library handed out.
func goName(p *_Ctype_char) string {
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}

// The C ABI's counters are plan.StatsLayout's, index for index: the same names and kinds, each
// name handed out as the same static string on every call.
func TestStatsDescribeTheOneLayout(t *testing.T) {
	var n _Ctype_int32_t
	var e _Ctype_spillway_error
	require.EqualValues(t, 0, spillway_stats_count(&n, &e), message(&e))
	require.EqualValues(t, len(plan.StatsLayout), n)
	for i, s := range plan.StatsLayout {
		var name, again *_Ctype_char
		kind := _Ctype_int32_t(-1)
		require.EqualValues(t, 0, spillway_stats_describe(_Ctype_int32_t(i), &name, &kind, &e), message(&e))
		assert.Equal(t, s.Name, goName(name))
		want := map[plan.StatKind]int{plan.Count: statCount, plan.Level: statLevel}[s.Kind]
		assert.EqualValues(t, want, kind, s.Name)
		require.EqualValues(t, 0, spillway_stats_describe(_Ctype_int32_t(i), &again, nil, &e))
		assert.Equal(t, name, again, "the name is the library's one string")
	}
	require.EqualValues(t, 0, spillway_stats_describe(0, nil, nil, &e), "both outs may be NULL")
}

// A plan made and released moves plansCreated by one, read in bulk and by name alike.
func TestStatsReadAllAndByName(t *testing.T) {
	created, err := plan.StatIndex("plansCreated")
	require.NoError(t, err)
	values := make([]_Ctype_int64_t, len(plan.StatsLayout))
	var e _Ctype_spillway_error
	require.EqualValues(t, 0, spillway_stats_read(&values[0], _Ctype_int32_t(len(values)), &e), message(&e))
	before := values[created]

	dirs, err := plan.ParseLocalDirs([]string{t.TempDir()})
	require.NoError(t, err)
	h, err := registry.CreatePlan(dirs, plan.Unlimited, plan.Unlimited)
	require.NoError(t, err)
	require.NoError(t, registry.ReleasePlan(h))

	var byName _Ctype_int64_t
	name := append([]byte("plansCreated"), 0)
	require.EqualValues(t, 0, spillway_stats_value((*_Ctype_char)(unsafe.Pointer(&name[0])), &byName, &e), message(&e))
	assert.GreaterOrEqual(t, int64(byName), int64(before)+1)
	require.EqualValues(t, 0, spillway_stats_read(&values[0], _Ctype_int32_t(created+1), &e), "the first counters only")
	assert.GreaterOrEqual(t, int64(values[created]), int64(byName), "read later: a count only grows")
	require.EqualValues(t, 0, spillway_stats_read(nil, 0, &e), "n 0 writes nothing")
}

// Bad arguments fail with INVALID_ARGUMENT and a message, and write no out-parameter.
func TestStatsBadArguments(t *testing.T) {
	n := len(plan.StatsLayout)
	sentinel := _Ctype_int64_t(0x5eed)
	values := []_Ctype_int64_t{sentinel, sentinel}
	var name *_Ctype_char
	kind := _Ctype_int32_t(7)
	unknown := append([]byte("spillFile"), 0)
	long := append([]byte(strings.Repeat("x", 5000)), 0)
	for _, c := range []struct {
		call func(*_Ctype_spillway_error) _Ctype_int32_t
		want string
	}{
		{func(e *_Ctype_spillway_error) _Ctype_int32_t { return spillway_stats_count(nil, e) }, "count_out is NULL"},
		{func(e *_Ctype_spillway_error) _Ctype_int32_t { return spillway_stats_describe(-1, &name, &kind, e) }, "index is -1"},
		{func(e *_Ctype_spillway_error) _Ctype_int32_t {
			return spillway_stats_describe(_Ctype_int32_t(n), &name, &kind, e)
		}, "the counters are 0 to"},
		{func(e *_Ctype_spillway_error) _Ctype_int32_t { return spillway_stats_read(&values[0], -1, e) }, "n is -1"},
		{func(e *_Ctype_spillway_error) _Ctype_int32_t {
			return spillway_stats_read(&values[0], _Ctype_int32_t(n+1), e)
		}, "the number of counters"},
		{func(e *_Ctype_spillway_error) _Ctype_int32_t { return spillway_stats_read(nil, 1, e) }, "values is NULL"},
		{func(e *_Ctype_spillway_error) _Ctype_int32_t { return spillway_stats_value(nil, &values[0], e) }, "name is NULL"},
		{func(e *_Ctype_spillway_error) _Ctype_int32_t {
			return spillway_stats_value((*_Ctype_char)(unsafe.Pointer(&unknown[0])), nil, e)
		}, "value_out is NULL"},
		{func(e *_Ctype_spillway_error) _Ctype_int32_t {
			return spillway_stats_value((*_Ctype_char)(unsafe.Pointer(&unknown[0])), &values[0], e)
		}, `no counter named "spillFile"; the counters are livePlans, `},
		{func(e *_Ctype_spillway_error) _Ctype_int32_t {
			return spillway_stats_value((*_Ctype_char)(unsafe.Pointer(&long[0])), &values[0], e)
		}, "no counter named"},
	} {
		var e _Ctype_spillway_error
		assert.EqualValues(t, codeInvalidArgument, c.call(&e), c.want)
		assert.Contains(t, message(&e), c.want)
	}
	assert.Nil(t, name)
	assert.EqualValues(t, 7, kind)
	assert.Equal(t, []_Ctype_int64_t{sentinel, sentinel}, values, "a failed call wrote its out-parameter")
}
