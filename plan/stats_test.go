package plan

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// numberFields gives each int64 field of *v (embedded structs' fields included) its own value,
// 1, 2, ..., and returns how many it set.
func numberFields(t *testing.T, v any) int {
	t.Helper()
	rv := reflect.ValueOf(v).Elem()
	n := 0
	for _, f := range reflect.VisibleFields(rv.Type()) {
		if f.Anonymous {
			continue
		}
		if f.Type.Kind() != reflect.Int64 {
			t.Fatalf("%s.%s is a %s: the layout carries int64s only", rv.Type(), f.Name, f.Type)
		}
		n++
		rv.FieldByIndex(f.Index).SetInt(int64(n))
	}
	return n
}

// Every value of Stats crosses to the JVM exactly once, under a name of its own: a field added to
// Stats and not to StatsLayout fails here.
func TestStatsLayoutCarriesEveryFieldOnce(t *testing.T) {
	var st Stats
	fields := numberFields(t, &st)
	seen := map[int64]string{}
	names := map[string]bool{}
	for _, s := range StatsLayout {
		assert.False(t, names[s.Name], "%s is named twice", s.Name)
		names[s.Name] = true
		assert.Contains(t, []StatKind{Count, Level}, s.Kind, s.Name)
		v := s.Value(&st)
		assert.Empty(t, seen[v], "%s and %s read the same field", s.Name, seen[v])
		seen[v] = s.Name
	}
	assert.Len(t, StatsLayout, fields, "every field of Stats is in StatsLayout")
}

// Each name of SortStatsLayout reads a field of its own (the layout carries a chosen subset).
func TestSortStatsLayoutReadsDistinctFields(t *testing.T) {
	var st SortStats
	numberFields(t, &st)
	seen := map[int64]string{}
	names := map[string]bool{}
	for _, s := range SortStatsLayout {
		assert.False(t, names[s.Name], "%s is named twice", s.Name)
		names[s.Name] = true
		v := s.Value(&st)
		assert.Empty(t, seen[v], "%s and %s read the same field", s.Name, seen[v])
		seen[v] = s.Name
	}
}

// Every counter is found by its name; an unknown name is a bad argument that lists the names.
func TestStatIndexFindsEachCounterByName(t *testing.T) {
	for i, s := range StatsLayout {
		got, err := StatIndex(s.Name)
		assert.NoError(t, err)
		assert.Equal(t, i, got, s.Name)
	}
	_, err := StatIndex("spillFile")
	var arg *ArgumentError
	require.ErrorAs(t, err, &arg)
	assert.Contains(t, err.Error(), `no counter named "spillFile"`)
	for _, s := range StatsLayout {
		assert.Contains(t, err.Error(), s.Name)
	}
}
