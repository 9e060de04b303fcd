package errkind_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
)

func TestNewMatchesItsKindOnly(t *testing.T) {
	err := errkind.New(cutline.ErrStale, "pkg: stale thing")
	if got := err.Error(); got != "pkg: stale thing" {
		t.Fatalf("Error() = %q", got)
	}
	wrapped := fmt.Errorf("context: %w", err)
	for _, k := range cutline.Kinds() {
		if want := k == cutline.ErrStale; errors.Is(wrapped, k) != want {
			t.Errorf("errors.Is(err, %v) = %v, want %v", k, !want, want)
		}
	}
	if !errors.Is(wrapped, err) {
		t.Error("the sentinel does not match itself through a wrapper")
	}
	if other := errkind.New(cutline.ErrStale, "pkg: stale thing"); errors.Is(err, other) {
		t.Error("two sentinels of one kind and message match each other")
	}
	if errors.Unwrap(err) != nil {
		t.Error("the sentinel unwraps to its kind")
	}
}

func TestNewRefusesNilKind(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New(nil, …) did not panic")
		}
	}()
	errkind.New(nil, "x")
}
