package capi

// These tests call the exports as Go functions; the C program of test/c calls them through the
// library. A test file cannot import "C": the parameter types are named by what cgo generates
// (_Ctype_int64_t, _Ctype_spillway_error).

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spillway/spillway/plan"
	"github.com/spillway/spillway/spill"
)

// The codes of include/spillway.h.
const (
	codeIO              = 1
	codeInvalidArgument = 2
	codeInvalidHandle   = 3
	codeLimitExceeded   = 4
	codeInternal        = 5
)

func message(e *_Ctype_spillway_error) string {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&e.message[0])), len(e.message))
	n := strings.IndexByte(string(b), 0)
	if n < 0 {
		return "<not terminated>"
	}
	return string(b[:n])
}

func TestStatusFollowsTheErrorKind(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{errors.New("spill: write /x: no space left on device"), codeIO},
		{&plan.ArgumentError{Reason: "bad"}, codeInvalidArgument},
		{&spill.ConfigError{Reason: "bad"}, codeInvalidArgument},
		{&plan.HandleError{What: "plan", Handle: 7}, codeInvalidHandle},
		{spill.ErrNotFinished, codeInvalidHandle},
		{&spill.LimitError{Setting: plan.MaxTempDirectorySizeKey}, codeLimitExceeded},
	} {
		assert.EqualValues(t, c.want, status(c.err), "%v", c.err)
	}
}

// A Go panic inside an entry point, here a real nil dereference (a nil registry), fails the call
// with the internal code and a message; it does not take the process down.
func TestPanicInAnEntryPointIsAnInternalError(t *testing.T) {
	saved := registry
	registry = nil
	defer func() { registry = saved }()
	out := _Ctype_int64_t(42)
	var e _Ctype_spillway_error
	code := spillway_plan_used_disk_space(1, &out, &e)
	assert.EqualValues(t, codeInternal, code)
	assert.Contains(t, message(&e), "internal error, please report it")
	assert.EqualValues(t, 42, out, "the out-parameter was written")
	assert.EqualValues(t, codeInternal, spillway_plan_release(1, nil), "with a NULL err too")
}

// A long message is cut to fit at a character boundary, and stays NUL-terminated UTF-8.
func TestMessageIsCutAtACharacterBoundary(t *testing.T) {
	var e _Ctype_spillway_error
	for _, msg := range []string{
		strings.Repeat("é", 1000),       // 2 bytes each: cut at 1022
		"x" + strings.Repeat("€", 1000), // 3 bytes each
		strings.Repeat("a", 1023),       // fits exactly
		"bad \xff byte",                 // invalid UTF-8 is replaced
		"",
	} {
		setMessage(&e, msg)
		got := message(&e)
		require.True(t, utf8.ValidString(got), "%q", got)
		assert.LessOrEqual(t, len(got), len(e.message)-1)
		want := strings.ToValidUTF8(msg, "\uFFFD")
		assert.True(t, strings.HasPrefix(want, got), "%q is not a prefix of the message", got)
		assert.GreaterOrEqual(t, len(got), min(len(want), len(e.message)-4), "cut too short")
	}
	setMessage(nil, "no struct: nothing happens")
}
