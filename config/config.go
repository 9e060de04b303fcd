// Package config holds the one error every cutline package returns for a
// refused option, name or constant: a *Error naming the field, matching
// ErrInvalid with errors.Is, and reaching its cause (an
// objstore.ErrInvalidKey, say) through Err. Nothing is written when a
// constructor or verb refuses its configuration, and a refusal is final:
// retrying the same input gets the same answer.
package config

import (
	"fmt"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
)

// ErrInvalid: a name, constant or option was refused. The error is a
// *Error naming the field.
var ErrInvalid = errkind.New(cutline.ErrInvalid, "invalid configuration")

// Error names the field that was refused, its value and why. Value never
// holds a credential; nil or "" means there is no value to show.
type Error struct {
	Field  string
	Value  any
	Reason string
	// Err is the cause, when there is one: errors.Is reaches it through
	// the Error.
	Err error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("invalid %s", e.Field)
	if e.Value != nil && e.Value != "" {
		s += fmt.Sprintf(" %v", e.Value)
	}
	s += ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap makes errors.Is match ErrInvalid and the cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalid}
	}
	return []error{ErrInvalid, e.Err}
}
