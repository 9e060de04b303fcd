package linearize_test

import (
	"errors"
	"testing"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/cutlinetest/linearize"
)

// TestErrorKinds: the package's exported errors each match exactly one of
// the root package's kinds (the root module's kinds test lists them as
// checked here).
func TestErrorKinds(t *testing.T) {
	for name, err := range map[string]error{"ErrInconsistent": linearize.ErrInconsistent} {
		var n int
		for _, k := range cutline.Kinds() {
			if errors.Is(err, k) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s matches %d kinds, want exactly one", name, n)
		}
	}
}
