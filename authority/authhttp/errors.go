package authhttp

import (
	"fmt"
	"net/http"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
)

// Errors of the package. A refused event is not among them: the client
// returns the controller's *authority.RefusedError, matching
// authority.ErrRefused.
var (
	// ErrForbidden: the server refused the caller's identity or what it
	// asked (an event naming another node, a handoff from a node, an
	// operator speaking as a node). The error is a *StatusError.
	ErrForbidden = errkind.New(cutline.ErrDenied, "authhttp: forbidden")
	// ErrBadRequest: the server could not read the request (malformed
	// JSON, an unknown kind or parameter, a body too large, an unknown
	// route). The error is a *StatusError.
	ErrBadRequest = errkind.New(cutline.ErrInvalid, "authhttp: bad request")
	// ErrIdentity: a certificate does not name an acceptable identity.
	// The error is a *IdentityError.
	ErrIdentity = errkind.New(cutline.ErrDenied, "authhttp: no acceptable identity")
)

// Errors that say no more than their kind.
var (
	// errUnavailable: the controller could not be reached or could not
	// decide (its driver failed, it has no driver yet, it is shutting
	// down). The error is a *StatusError or a *RequestError; it matches
	// cutline.ErrUnavailable.
	errUnavailable = errkind.New(cutline.ErrUnavailable, "authhttp: controller unavailable")
	// errClosed: the connection was closed by Close; it matches
	// cutline.ErrClosed.
	errClosed = errkind.New(cutline.ErrClosed, "authhttp: connection closed")
)

// StatusError is a request the server answered with an error status. It
// matches ErrForbidden (401, 403), cutline.ErrUnavailable (5xx) or ErrBadRequest
// (any other status).
type StatusError struct {
	// Route is the request's path, such as "/v1/event".
	Route string
	// Code is the HTTP status.
	Code int
	// Message is the server's explanation.
	Message string
}

// Error says which route answered what.
func (e *StatusError) Error() string {
	return fmt.Sprintf("authhttp: %s: %d %s: %s", e.Route, e.Code, http.StatusText(e.Code), e.Message)
}

// Unwrap makes errors.Is match the sentinel of the status's class.
func (e *StatusError) Unwrap() error {
	switch {
	case e.Code == http.StatusUnauthorized || e.Code == http.StatusForbidden:
		return ErrForbidden
	case e.Code >= 500:
		return errUnavailable
	}
	return ErrBadRequest
}

// RequestError is a request that got no answer: the connection, the TLS
// handshake (a certificate the server refused, or one the client did not
// trust) or the context failed. It matches cutline.ErrUnavailable and reaches its
// cause (a *tls.AlertError, a *url.Error, context.Canceled) through Err.
type RequestError struct {
	// Route is the request's path.
	Route string
	// Err is the cause.
	Err error
}

// Error says which route failed, and how.
func (e *RequestError) Error() string {
	return fmt.Sprintf("authhttp: %s: %v", e.Route, e.Err)
}

// Unwrap makes errors.Is match cutline.ErrUnavailable and the cause.
func (e *RequestError) Unwrap() []error { return []error{errUnavailable, e.Err} }

// IdentityError says why a certificate names no acceptable identity.
type IdentityError struct {
	// Subject is the certificate's subject, for the logs; it is public.
	Subject string
	// Reason says why it was refused.
	Reason string
}

// Error says which certificate was refused, and why.
func (e *IdentityError) Error() string {
	return fmt.Sprintf("authhttp: certificate %q: %s", e.Subject, e.Reason)
}

// Unwrap makes errors.Is match ErrIdentity.
func (e *IdentityError) Unwrap() error { return ErrIdentity }
