package plan

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// update rewrites the generated part of the pages instead of checking it (make docs).
var update = flag.Bool("update", false, "rewrite the generated part of docs/user-guide/metrics.md")

const (
	metricsPage  = "../docs/user-guide/metrics.md"
	generatedTop = "<!-- BEGIN GENERATED: the metrics, from plan.StatsLayout (make docs) -->\n"
	generatedEnd = "<!-- END GENERATED -->\n"
)

// metricsTable renders StatsLayout as the metrics page's table, in its order.
func metricsTable() string {
	var b strings.Builder
	b.WriteString("| metric | kind | meaning |\n|---|---|---|\n")
	for _, s := range StatsLayout {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.Name, s.Kind, s.Doc)
	}
	return b.String()
}

// The metrics page's table is StatsLayout's, never written beside it: a counter added, renamed or
// described otherwise in the layout fails here until make docs writes the page again.
func TestMetricsPageIsGeneratedFromTheLayout(t *testing.T) {
	raw, err := os.ReadFile(metricsPage)
	require.NoError(t, err)
	page := string(raw)
	top, end := strings.Index(page, generatedTop), strings.Index(page, generatedEnd)
	require.True(t, top >= 0 && end > top, "%s has no %q ... %q markers", metricsPage, generatedTop, generatedEnd)
	want := page[:top+len(generatedTop)] + metricsTable() + page[end:]
	if *update {
		require.NoError(t, os.WriteFile(metricsPage, []byte(want), 0o644))
		return
	}
	require.Equal(t, want, page, "%s differs from plan.StatsLayout: run make docs", metricsPage)
}

// Every counter says what it means, as one sentence a table cell can hold.
func TestEveryStatHasADoc(t *testing.T) {
	for _, s := range StatsLayout {
		require.NotEmpty(t, s.Doc, s.Name)
		require.NotContains(t, s.Doc, "|", s.Name)
		require.NotContains(t, s.Doc, "\n", s.Name)
	}
}
