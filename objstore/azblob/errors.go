package azblob

import (
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/cutline/cutline/objstore"
)

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
// HTTP status (objstore.ClassifyStatus), then "no answer";
// objstore.Remote.Call applies it. The client's *azcore.ResponseError
// names the method, host and path, never the query (where a SAS token
// would be) or the account key. What it cannot place is ErrUnavailable:
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
		return objstore.ErrUnsatisfiableRange
	case deniedCodes[code]:
		return objstore.ErrAccessDenied
	case unavailableCodes[code]:
		return objstore.ErrUnavailable
	}
	// A 2xx/3xx with an error attached is an answer not understood.
	return objstore.ClassifyStatus(re.StatusCode)
}
