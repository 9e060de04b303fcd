package azblob

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/cutline/cutline/objstore"
)

// errRange: 416 InvalidRange, the offset is at or past the end. GetRange
// answers it with an empty result; elsewhere the request was rejected.
var errRange = fmt.Errorf("%w: range not satisfiable", objstore.ErrRejected)

// Error codes grouped by meaning. The HTTP status is the fallback when a
// code is missing or unknown.
var (
	notFoundCodes = map[bloberror.Code]bool{bloberror.BlobNotFound: true, bloberror.ResourceNotFound: true}
	noBucketCodes = map[bloberror.Code]bool{
		bloberror.ContainerNotFound: true, bloberror.ContainerBeingDeleted: true, bloberror.ContainerDisabled: true,
	}
	existsCodes = map[bloberror.Code]bool{bloberror.BlobAlreadyExists: true, bloberror.ConditionNotMet: true}
	deniedCodes = map[bloberror.Code]bool{
		bloberror.AuthenticationFailed: true, bloberror.AuthorizationFailure: true,
		bloberror.AuthorizationPermissionMismatch: true, bloberror.AuthorizationProtocolMismatch: true,
		bloberror.AuthorizationResourceTypeMismatch: true, bloberror.AuthorizationServiceMismatch: true,
		bloberror.AuthorizationSourceIPMismatch: true, bloberror.InsufficientAccountPermissions: true,
		bloberror.AccountIsDisabled: true, bloberror.InvalidAuthenticationInfo: true,
		bloberror.NoAuthenticationInformation: true,
	}
	unavailableCodes = map[bloberror.Code]bool{
		bloberror.ServerBusy: true, bloberror.InternalError: true, bloberror.OperationTimedOut: true,
		bloberror.AccountBeingCreated: true,
	}
)

// classify maps an error returned by the client (after its own retries)
// onto the sentinel it means: the service's error code first, then the
// HTTP status, then "no answer". What it cannot place is ErrUnavailable:
// an unrecognised failure means "unknown", never "absent".
func classify(err error) error {
	if err == nil {
		panic("azblob: classify(nil)")
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		// No response: connection refused or reset, DNS, TLS, a timeout, a
		// truncated body... all "unknown".
		return objstore.ErrUnavailable
	}
	code := bloberror.Code(re.ErrorCode)
	switch {
	case noBucketCodes[code]:
		return objstore.ErrNoSuchBucket
	case notFoundCodes[code]:
		return objstore.ErrNotFound
	case existsCodes[code]:
		return objstore.ErrExists
	case code == bloberror.InvalidRange:
		return errRange
	case deniedCodes[code]:
		return objstore.ErrAccessDenied
	case unavailableCodes[code]:
		return objstore.ErrUnavailable
	}
	switch s := re.StatusCode; {
	case s == http.StatusNotFound:
		return objstore.ErrNotFound
	case s == http.StatusPreconditionFailed:
		return objstore.ErrExists
	case s == http.StatusRequestedRangeNotSatisfiable:
		return errRange
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return objstore.ErrAccessDenied
	case s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500:
		return objstore.ErrUnavailable
	case s >= 400:
		return objstore.ErrRejected
	}
	// A 2xx/3xx with an error attached: the answer was not understood.
	return objstore.ErrUnavailable
}

// classifyCall classifies err from a call made under ctx into the error a
// Bucket method returns (before the *objstore.OpError wrapper): when the
// caller's context has ended, that is the answer. errors.As still reaches
// the client's *azcore.ResponseError, whose message names the method,
// host and path, never the query (where a SAS token would be) or the
// account key.
func classifyCall(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return objstore.ContextEnded(ctxErr, err)
	}
	return objstore.Classify(classify(err), err)
}
