package s3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// ClientConfig describes an S3 client with static credentials, for tests,
// demos and tools. Production hosts usually build their own *s3.Client
// (with the SDK's config loader, roles, TLS settings) and pass it to New.
type ClientConfig struct {
	// Endpoint is the store's base URL, e.g. "http://127.0.0.1:7070".
	// Empty means AWS's regional endpoints.
	Endpoint string
	// Region defaults to "us-east-1".
	Region string
	// AccessKey and SecretKey are static credentials; both empty means
	// anonymous requests.
	AccessKey string
	SecretKey string
	// PathStyle addresses buckets as endpoint/bucket/key instead of
	// bucket.endpoint/key: most self-hosted S3-compatible stores need it.
	PathStyle bool
	// HTTPClient replaces the SDK's default HTTP client, whose pool of 10
	// idle connections per host is too small for a writer window (see
	// the package guide and NewHTTPClient). Optional.
	HTTPClient *http.Client
	// MaxAttempts bounds the SDK's own retries (first attempt included).
	// 0 keeps the SDK default (3).
	MaxAttempts int
}

// NewClient builds a *s3.Client from cfg. It reads no environment
// variable or shared config file. Checksums are computed and validated only
// when an operation requires them, which S3-compatible stores accept most
// widely.
func NewClient(ctx context.Context, cfg ClientConfig) (*awss3.Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if (cfg.AccessKey == "") != (cfg.SecretKey == "") {
		return nil, errors.New("s3: NewClient: AccessKey and SecretKey must be set together")
	}
	if cfg.MaxAttempts < 0 {
		return nil, fmt.Errorf("s3: NewClient: MaxAttempts is %d, want ≥ 0", cfg.MaxAttempts)
	}
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			// The endpoint is not echoed back: it could embed user info.
			return nil, errors.New("s3: NewClient: Endpoint must be an http or https URL with a host and no user info")
		}
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	o := awss3.Options{
		Region:                     region,
		UsePathStyle:               cfg.PathStyle,
		RetryMaxAttempts:           cfg.MaxAttempts,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if cfg.Endpoint != "" {
		o.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	if cfg.AccessKey != "" {
		o.Credentials = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, ""))
	} else {
		o.Credentials = aws.AnonymousCredentials{}
	}
	if cfg.HTTPClient != nil {
		o.HTTPClient = cfg.HTTPClient
	}
	return awss3.New(o), nil
}

// Connection timeouts of NewHTTPClient. They bound one connection's
// set-up and silence, never a whole request: the caller's context does
// that, and a 64 MiB upload must not be cut short by a clock of ours.
const (
	dialTimeout           = 10 * time.Second
	keepAlive             = 30 * time.Second
	tlsHandshakeTimeout   = 10 * time.Second
	responseHeaderTimeout = 30 * time.Second
	expectContinueTimeout = time.Second
	idleConnTimeout       = 90 * time.Second
)

// NewHTTPClient returns an HTTP client for S3 requests that keeps up to
// connsPerHost idle connections to each endpoint, so that as many
// concurrent requests reuse their connections instead of each opening a
// new one and leaving the old one in TIME_WAIT. connsPerHost is the most
// requests the host has in flight to one endpoint at once: the writer
// window, times the buckets sharing the endpoint, plus readers (the
// package guide says how to size it). It panics if connsPerHost < 1.
//
// Its transport keeps idle connections without a total limit and opens
// connections without a per-host cap (the window bounds them); dialing and
// the TLS handshake time out after 10 s, response headers after 30 s, idle
// connections close after 90 s; HTTP/2 is attempted. There is no overall
// request timeout (http.Client.Timeout): the caller's context bounds each
// call. It uses no proxy and reads no environment variable, and its
// TLSClientConfig is nil (Go's defaults): a host that needs a private CA,
// client certificates or a proxy sets them on the returned client's
// *http.Transport before first use. The client holds no credentials; the
// SDK signs each request.
//
// Pass it as ClientConfig.HTTPClient or as the HTTPClient of the host's
// own s3.Options; one client may serve every zone.
func NewHTTPClient(connsPerHost int) *http.Client {
	if connsPerHost < 1 {
		panic(fmt.Sprintf("s3: NewHTTPClient: connsPerHost is %d, want ≥ 1", connsPerHost))
	}
	dialer := &net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}
	return &http.Client{Transport: &http.Transport{
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          0, // no total limit: connsPerHost bounds each endpoint
		MaxIdleConnsPerHost:   connsPerHost,
		MaxConnsPerHost:       0, // a cap below the window would queue appends
		IdleConnTimeout:       idleConnTimeout,
		TLSHandshakeTimeout:   tlsHandshakeTimeout,
		ResponseHeaderTimeout: responseHeaderTimeout,
		ExpectContinueTimeout: expectContinueTimeout,
	}}
}
