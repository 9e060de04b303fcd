package planted_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cutline/cutline/internal/planted"
)

// Every variant has a name of its own that Parse reads back, is in Core
// or Tenure (not both), and names packages that exist to catch it.
func TestVariants(t *testing.T) {
	if len(planted.All) != len(planted.Core)+len(planted.Tenure) {
		t.Fatalf("All has %d variants, Core and Tenure %d", len(planted.All), len(planted.Core)+len(planted.Tenure))
	}
	seen := map[string]bool{}
	for _, b := range planted.All {
		name := b.String()
		if name == "unknown" || seen[name] {
			t.Errorf("variant %d: name %q is unknown or taken", b, name)
		}
		seen[name] = true
		if got, ok := planted.Parse(name); !ok || got != b {
			t.Errorf("Parse(%q) = %v, %v", name, got, ok)
		}
		if slices.Contains(planted.Core, b) == slices.Contains(planted.Tenure, b) {
			t.Errorf("%v: in Core and Tenure, or in neither", b)
		}
		if len(b.CaughtBy()) == 0 {
			t.Errorf("%v: no package is named to catch it", b)
		}
		for _, p := range b.CaughtBy() {
			dir, _, _ := strings.Cut(p, "=")
			if _, err := os.Stat(filepath.Join("..", "..", dir)); err != nil {
				t.Errorf("%v: package %s: %v", b, p, err)
			}
		}
	}
	if b, ok := planted.Parse("none"); !ok || b != planted.None {
		t.Errorf(`Parse("none") = %v, %v`, b, ok)
	}
}
