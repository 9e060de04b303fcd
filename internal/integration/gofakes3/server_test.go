package gofakes3_test

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/s3"
)

// fakeS3 is one gofakes3 server on 127.0.0.1 over one backend. Stop
// closes the listener and every connection, like a killed process;
// Restart serves the same backend on the same address again.
type fakeS3 struct {
	t       testing.TB
	backend gofakes3.Backend
	handler http.Handler
	addr    string
	tr      *http.Transport

	mu   sync.Mutex
	srv  *http.Server
	done chan struct{}
}

// startFakeS3 serves backend (nil: a fresh in-memory one) with bucket
// created; it stops when the test ends.
func startFakeS3(t testing.TB, backend gofakes3.Backend, bucket string) *fakeS3 {
	t.Helper()
	if backend == nil {
		backend = s3mem.New()
	}
	require.NoError(t, backend.CreateBucket(bucket))
	f := &fakeS3{t: t, backend: backend, handler: gofakes3.New(backend).Server(), tr: &http.Transport{MaxIdleConnsPerHost: 64}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f.addr = l.Addr().String()
	f.serve(l)
	t.Cleanup(func() {
		f.Stop()
		f.tr.CloseIdleConnections()
	})
	return f
}

func (f *fakeS3) serve(l net.Listener) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.srv = &http.Server{Handler: f.handler, ReadHeaderTimeout: 10 * time.Second}
	f.done = make(chan struct{})
	srv, done := f.srv, f.done
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.t.Errorf("gofakes3 on %s: %v", f.addr, err)
		}
	}()
}

// Stop closes the server. Idempotent.
func (f *fakeS3) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv == nil {
		return
	}
	_ = f.srv.Close()
	<-f.done
	f.srv = nil
	f.tr.CloseIdleConnections()
}

// Restart serves the same backend on the same address.
func (f *fakeS3) Restart() {
	f.t.Helper()
	f.Stop()
	l, err := net.Listen("tcp", f.addr)
	require.NoError(f.t, err, "listening on %s again", f.addr)
	f.serve(l)
}

// client is a path-style client of the server with the SDK's retries
// off, so that a stopped server answers at once.
func (f *fakeS3) client() *awss3.Client {
	return awss3.New(awss3.Options{
		Region:                     "us-east-1",
		BaseEndpoint:               aws.String("http://" + f.addr),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider("AKIDGOFAKES3", "secret-gofakes3", ""),
		HTTPClient:                 &http.Client{Transport: f.tr, Timeout: 30 * time.Second},
		RetryMaxAttempts:           1,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

func (f *fakeS3) bucket(t testing.TB, bucket, name string) *s3.Bucket {
	t.Helper()
	b, err := s3.New(f.client(), bucket, s3.Options{RemoteOptions: objstore.RemoteOptions{Name: name}})
	require.NoError(t, err)
	return b
}
