package azblob

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/internal/classifytest"
)

// respErr is the error the client returns for an answer with status and
// the service's error code.
func respErr(status int, code string) error {
	req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:1/acct/c/k", nil)
	return &azcore.ResponseError{ErrorCode: code, StatusCode: status,
		RawResponse: &http.Response{StatusCode: status, Request: req, Body: io.NopCloser(strings.NewReader(""))}}
}

func TestAzureClassify(t *testing.T) {
	classifytest.Run(t, classifytest.Remote(classify), []classifytest.Case{
		{"404 BlobNotFound", respErr(404, "BlobNotFound"), objstore.ErrNotFound},
		{"404 ContainerNotFound", respErr(404, "ContainerNotFound"), objstore.ErrNoSuchBucket},
		{"409 ContainerBeingDeleted", respErr(409, "ContainerBeingDeleted"), objstore.ErrNoSuchBucket},
		{"404 bare", respErr(404, ""), objstore.ErrNotFound},
		{"409 BlobAlreadyExists", respErr(409, "BlobAlreadyExists"), objstore.ErrExists},
		{"412 ConditionNotMet", respErr(412, "ConditionNotMet"), objstore.ErrExists},
		{"412 bare", respErr(412, ""), objstore.ErrExists},
		{"wrapped BlobAlreadyExists", fmt.Errorf("upload: %w", respErr(409, "BlobAlreadyExists")), objstore.ErrExists},
		{"416 InvalidRange", respErr(416, "InvalidRange"), objstore.ErrUnsatisfiableRange},
		{"416 bare", respErr(416, ""), objstore.ErrUnsatisfiableRange},
		{"403 AuthenticationFailed", respErr(403, "AuthenticationFailed"), objstore.ErrAccessDenied},
		{"403 AuthorizationPermissionMismatch", respErr(403, "AuthorizationPermissionMismatch"), objstore.ErrAccessDenied},
		{"401 bare", respErr(401, ""), objstore.ErrAccessDenied},
		{"409 other conflict", respErr(409, "LeaseIdMissing"), objstore.ErrUnavailable},
		{"408", respErr(408, ""), objstore.ErrUnavailable},
		{"429", respErr(429, ""), objstore.ErrUnavailable},
		{"500 InternalError", respErr(500, "InternalError"), objstore.ErrUnavailable},
		{"503 ServerBusy", respErr(503, "ServerBusy"), objstore.ErrUnavailable},
		{"500 OperationTimedOut", respErr(500, "OperationTimedOut"), objstore.ErrUnavailable},
		{"400 InvalidHeaderValue", respErr(400, "InvalidHeaderValue"), objstore.ErrRejected},
		{"400 Md5Mismatch", respErr(400, "Md5Mismatch"), objstore.ErrRejected},
		{"200 with an error", respErr(200, ""), objstore.ErrUnavailable},
	}, classifytest.Transport(nil))
}

func TestAzureClassifyCallPrefersTheContext(t *testing.T) {
	classifytest.CallPrefersTheContext(t, classifytest.Remote(classify).Call, nil)
}
