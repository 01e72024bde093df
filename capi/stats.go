package capi

/*
#include "spillway_cgo.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/spillway/spillway/plan"
)

// The counters are plan.StatsLayout's, by index; this file only converts them.

// statNames are the counters' names as C strings, made once and never freed: the header promises
// that the names spillway_stats_describe hands out live as long as the library.
var statNames = func() []*C.char {
	names := make([]*C.char, len(plan.StatsLayout))
	for i, s := range plan.StatsLayout {
		names[i] = C.CString(s.Name)
	}
	return names
}()

// maxStatNameLen bounds how much of a caller's name spillway_stats_value reads: no counter's name
// is longer, and a name this long still fits the message that says it is unknown.
const maxStatNameLen = 256

func statKind(k plan.StatKind) C.int32_t {
	if k == plan.Count {
		return C.SPILLWAY_STAT_COUNT
	}
	return C.SPILLWAY_STAT_LEVEL
}

//export spillway_stats_count
func spillway_stats_count(countOut *C.int32_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	if countOut == nil {
		return fail(err, argumentError("count_out is NULL; pass where to write the number of counters"))
	}
	*countOut = C.int32_t(len(plan.StatsLayout))
	return C.SPILLWAY_OK
}

//export spillway_stats_describe
func spillway_stats_describe(index C.int32_t, nameOut **C.char, kindOut *C.int32_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	if index < 0 || int(index) >= len(plan.StatsLayout) {
		return fail(err, argumentError(fmt.Sprintf("index is %d; the counters are 0 to %d", index, len(plan.StatsLayout)-1)))
	}
	if nameOut != nil {
		*nameOut = statNames[index]
	}
	if kindOut != nil {
		*kindOut = statKind(plan.StatsLayout[index].Kind)
	}
	return C.SPILLWAY_OK
}

//export spillway_stats_read
func spillway_stats_read(values *C.int64_t, n C.int32_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	switch {
	case n < 0 || int(n) > len(plan.StatsLayout):
		return fail(err, argumentError(fmt.Sprintf("n is %d; give 0 to %d, the number of counters (spillway_stats_count)", n, len(plan.StatsLayout))))
	case n == 0:
		return C.SPILLWAY_OK
	case values == nil:
		return fail(err, argumentError(fmt.Sprintf("values is NULL with n %d; pass room for %d values", n, n)))
	}
	st := registry.Stats()
	out := unsafe.Slice(values, n)
	for i := range out {
		out[i] = C.int64_t(plan.StatsLayout[i].Value(&st))
	}
	return C.SPILLWAY_OK
}

//export spillway_stats_value
func spillway_stats_value(name *C.char, valueOut *C.int64_t, err *C.spillway_error) (code C.int32_t) {
	defer recoverPanic(&code, err)
	switch {
	case name == nil:
		return fail(err, argumentError("name is NULL; give a counter's name, e.g. livePlans"))
	case valueOut == nil:
		return fail(err, argumentError("value_out is NULL; pass where to write the value"))
	}
	i, e := plan.StatIndex(C.GoStringN(name, C.int(C.strnlen(name, maxStatNameLen))))
	if e != nil {
		return fail(err, e)
	}
	st := registry.Stats()
	*valueOut = C.int64_t(plan.StatsLayout[i].Value(&st))
	return C.SPILLWAY_OK
}
