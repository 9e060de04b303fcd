package cutline_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestREADMEShowsExampleCompose keeps the README's composition example
// identical to Example_compose, which the tests run.
func TestREADMEShowsExampleCompose(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(readme), "```go\n")
	require.True(t, ok, "no Go code block in README.md")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)

	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	// The README shows the imports, then the body.
	_, imports, ok := strings.Cut(string(src), "import (")
	require.True(t, ok)
	imports, _, ok = strings.Cut(imports, ")\n")
	require.True(t, ok)
	_, body, ok := strings.Cut(string(src), "func Example_compose() {\n")
	require.True(t, ok)
	body, _, ok = strings.Cut(body, "\t// Output:")
	require.True(t, ok)
	var lines []string
	for line := range strings.Lines(body) {
		lines = append(lines, strings.TrimPrefix(line, "\t"))
	}
	require.Equal(t, "import ("+imports+")\n\n"+strings.Join(lines, ""), block, "README.md's Go example differs from Example_compose")
}
