package lease_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/cutline/cutline/internal/planted/failfast"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bounded returns a context that ends failfast.Bound from now: a call of
// a test that takes milliseconds when the code is right fails instead of
// hanging when it is not.
func bounded(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), failfast.Bound)
	t.Cleanup(cancel)
	return ctx
}
