package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

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
	// HTTPClient replaces the SDK's default HTTP client (timeouts,
	// transport). Optional.
	HTTPClient *http.Client
	// MaxAttempts bounds the SDK's own retries (first attempt included).
	// 0 keeps the SDK default (3).
	MaxAttempts int
}

// NewClient builds an *s3.Client from cfg. It reads no environment
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
