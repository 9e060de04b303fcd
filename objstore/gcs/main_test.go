package gcs_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Started by an init function of the storage client's tracing
		// dependency; it lives as long as the process.
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		// A keep-alive connection between the storage client and the
		// in-process emulator can outlive its test by a moment: the
		// transport closes idle connections at cleanup, not ones a
		// response body is still draining. They end on their own.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
	)
}
