package jni

import (
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodePathIsExactForValidUnicode(t *testing.T) {
	for _, path := range []string{"", "/tmp/a", "/tmp/é/ü", "/データ/日本", "/tmp/😀/𝄞", "/tmp/\uFFFD", "/tmp/\uFFFF"} {
		got, err := decodePath(utf16.Encode([]rune(path)))
		require.NoError(t, err, "%q", path)
		assert.Equal(t, path, got)
	}
}

func TestDecodePathRefusesUnpairedSurrogatesAndNUL(t *testing.T) {
	lone := func(prefix string, units ...uint16) []uint16 {
		return append(utf16.Encode([]rune(prefix)), units...)
	}
	for _, tc := range []struct {
		name  string
		units []uint16
		want  string
	}{
		{"lone high at the end", lone("/tmp/lone-", 0xD800), `\uD800 at index 10`},
		{"lone low", lone("/tmp/lone-", 0xDC00, 'x'), `\uDC00 at index 10`},
		{"high then a non-surrogate", lone("/a", 0xDBFF, 'b'), `\uDBFF at index 2`},
		{"two highs", lone("/a", 0xD800, 0xD801, 0xDC00), `\uD800 at index 2`},
		{"low before high", lone("/", 0xDC00, 0xD800), `\uDC00 at index 1`},
		{"NUL in ASCII", lone("/a", 0, 'b'), "NUL char at index 2"},
		{"NUL after non-ASCII", lone("/é", 0), "NUL char at index 2"},
	} {
		_, err := decodePath(tc.units)
		if assert.Error(t, err, tc.name) {
			assert.Contains(t, err.Error(), tc.want, tc.name)
		}
	}
	// What a lenient decoder would map the lone surrogate onto is a different, valid path.
	got, err := decodePath(utf16.Encode([]rune("/tmp/lone-?")))
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(got, "-?"))
}
