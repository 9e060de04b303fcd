package azurite_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// A keep-alive connection to an emulator can outlive its test by
		// a moment: the transport closes idle connections at cleanup, not
		// ones a response body is still draining. They end on their own.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}
