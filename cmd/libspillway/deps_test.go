package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/spillway/spillway/"

// deps lists what pkg links into the library (its imports, recursively, tests excluded), as the
// module's package paths relative to its root.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+pkg).CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	var own []string
	for _, p := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(p, module); ok {
			own = append(own, rel)
		}
	}
	return own
}

// The bindings stand side by side on plan: neither imports the other, and only this package links
// both. Test support (fault injection, the JVM host, the C ABI's Go client) is never linked in.
func TestEachDoorImportsPlanAlone(t *testing.T) {
	jni, capi := deps(t, "jni"), deps(t, "capi")
	assert.Contains(t, jni, "plan")
	assert.NotContains(t, jni, "capi")
	assert.Contains(t, capi, "plan")
	assert.NotContains(t, capi, "jni")
	library := deps(t, "cmd/libspillway")
	assert.Subset(t, library, []string{"jni", "capi", "plan", "spill"})
	for _, testOnly := range []string{"spill/errorfs", "spill/faultenv", "jni/internal/jvmhost", "capi/capitest"} {
		assert.NotContains(t, library, testOnly, "the library links test support")
	}
}
