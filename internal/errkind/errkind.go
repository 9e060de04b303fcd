// Package errkind builds the packages' sentinel errors so that each
// matches its kind, one of the root package's (cutline.ErrStale, …),
// with errors.Is.
package errkind

// New returns a sentinel with message msg (prefixed by its package's
// name) that matches itself and kind with errors.Is. kind is one of the
// root package's kinds. errors.Unwrap of the sentinel is nil: the kind
// is what it is, not its cause.
func New(kind error, msg string) error {
	if kind == nil {
		panic("errkind: New with a nil kind")
	}
	return &sentinel{msg: msg, kind: kind}
}

type sentinel struct {
	msg  string
	kind error
}

func (e *sentinel) Error() string { return e.msg }

// Is makes errors.Is match the kind.
func (e *sentinel) Is(target error) bool { return target == e.kind }
