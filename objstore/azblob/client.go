package azblob

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	sdk "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
)

// ClientConfig describes a client with a shared key, for tests, demos and
// tools. Production hosts usually build their own *azblob.Client (with
// Entra ID credentials, a SAS, their own transport) and pass it to New.
type ClientConfig struct {
	// ServiceURL is the account's Blob service URL:
	// "https://<account>.blob.core.windows.net/", or
	// "http://127.0.0.1:10000/<account>" for an emulator.
	ServiceURL string
	// Account and Key are the storage account's name and shared key
	// (base64). Both empty means anonymous requests, or a SAS carried in
	// ServiceURL's query.
	Account string
	Key     string
	// HTTPClient replaces the SDK's default transport. Optional.
	HTTPClient *http.Client
	// MaxRetries bounds the SDK's own retries of reads, lists and
	// deletes (Create makes its own). 0 keeps the SDK default (3); -1
	// means none.
	MaxRetries int32
}

// NewClient builds an *azblob.Client from cfg. It reads no environment
// variable or configuration file.
func NewClient(ctx context.Context, cfg ClientConfig) (*sdk.Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if (cfg.Account == "") != (cfg.Key == "") {
		return nil, errors.New("azblob: NewClient: Account and Key must be set together")
	}
	u, err := url.Parse(cfg.ServiceURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		// The URL is not echoed back: it could carry a SAS token.
		return nil, errors.New("azblob: NewClient: ServiceURL must be an http or https URL with a host and no user info")
	}
	opts := &sdk.ClientOptions{}
	opts.Retry = policy.RetryOptions{MaxRetries: cfg.MaxRetries}
	if cfg.HTTPClient != nil {
		opts.Transport = cfg.HTTPClient
	}
	if cfg.Key == "" {
		return sdk.NewClientWithNoCredential(cfg.ServiceURL, opts)
	}
	cred, err := sdk.NewSharedKeyCredential(cfg.Account, cfg.Key)
	if err != nil {
		// The key is not echoed back.
		return nil, errors.New("azblob: NewClient: Key is not a base64 shared key")
	}
	return sdk.NewClientWithSharedKeyCredential(cfg.ServiceURL, cred, opts)
}
