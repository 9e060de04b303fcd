package s3_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/s3"
)

func TestS3NewHTTPClientSettings(t *testing.T) {
	hc := s3.NewHTTPClient(64)
	tr, ok := hc.Transport.(*http.Transport)
	require.True(t, ok, "the host can reach the transport to add its TLS settings")
	require.Equal(t, 64, tr.MaxIdleConnsPerHost)
	require.Zero(t, tr.MaxIdleConns, "no total limit on idle connections")
	require.Zero(t, tr.MaxConnsPerHost, "no cap below the window")
	require.Zero(t, hc.Timeout, "the caller's context bounds a request, not a client clock")
	require.Positive(t, tr.TLSHandshakeTimeout)
	require.Positive(t, tr.ResponseHeaderTimeout)
	require.Positive(t, tr.IdleConnTimeout)
	require.NotNil(t, tr.DialContext)
	require.Nil(t, tr.TLSClientConfig, "TLS is the host's: Go's defaults until it sets its own")
	require.Nil(t, tr.Proxy, "no proxy read from the environment")
	require.PanicsWithValue(t, "s3: NewHTTPClient: connsPerHost is 0, want ≥ 1", func() { s3.NewHTTPClient(0) })
}

// windowServer answers every GET with a one-byte object, holding each
// round's requests until all of them are in flight at once, as a writer
// window keeps them, and counts the connections clients open.
type windowServer struct {
	srv     *httptest.Server
	opened  atomic.Int64
	arrived chan struct{}
	release atomic.Pointer[chan struct{}]
}

func newWindowServer(t *testing.T) *windowServer {
	s := &windowServer{arrived: make(chan struct{})}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release := *s.release.Load()
		s.arrived <- struct{}{}
		<-release
		w.Header().Set("Content-Length", "1")
		_, _ = w.Write([]byte("x"))
	}))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.opened.Add(1)
		}
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

// rounds runs rounds of window concurrent Gets through hc and returns how
// many connections were opened.
func (s *windowServer) rounds(t *testing.T, hc awss3.HTTPClient, window, rounds int) int64 {
	client := awss3.New(awss3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.srv.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDWINDOW", "secret-window", ""),
		HTTPClient:   hc,
	})
	b, err := s3.New(client, "zone-a", s3.Options{})
	require.NoError(t, err)
	before := s.opened.Load()
	for range rounds {
		release := make(chan struct{})
		s.release.Store(&release)
		var wg sync.WaitGroup
		errs := make(chan error, window)
		for range window {
			wg.Go(func() {
				_, err := b.Get(t.Context(), "k")
				errs <- err
			})
		}
		for range window {
			<-s.arrived
		}
		close(release)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
	return s.opened.Load() - before
}

// TestS3NewHTTPClientReusesConnections: a window of requests kept in
// flight round after round reuses its connections with NewHTTPClient,
// where the SDK's default client (10 idle connections per host) opens new
// ones every round, each closed one left in TIME_WAIT.
func TestS3NewHTTPClientReusesConnections(t *testing.T) {
	const window, rounds = 32, 5
	s := newWindowServer(t)

	hc := s3.NewHTTPClient(window)
	t.Cleanup(hc.CloseIdleConnections)
	opened := s.rounds(t, hc, window, rounds)
	t.Logf("NewHTTPClient: %d connections", opened)
	// The first round opens the window's connections; later ones reuse
	// them (a request that overtakes a connection on its way back to the
	// pool may still dial).
	require.GreaterOrEqual(t, opened, int64(window))
	require.Less(t, opened, int64(2*window), "NewHTTPClient opened %d connections for %d rounds of %d", opened, rounds, window)

	var sdkTransport *http.Transport
	sdk := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { sdkTransport = tr })
	opened = s.rounds(t, sdk, window, rounds)
	t.Logf("SDK default: %d connections", opened)
	t.Cleanup(sdkTransport.CloseIdleConnections)
	// At most 10 of each round's 32 requests find an idle connection.
	require.GreaterOrEqual(t, opened, int64(window+(rounds-1)*(window-awshttp.DefaultHTTPTransportMaxIdleConnsPerHost)),
		"the SDK's default client reuses only %d connections per host", awshttp.DefaultHTTPTransportMaxIdleConnsPerHost)
}

// TestS3NewHTTPClientKeepsSecrets: a request that fails on the transport
// says which endpoint failed, never the secret key.
func TestS3NewHTTPClientKeepsSecrets(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens any more
	const secret = "the-secret-key-0123456789"
	hc := s3.NewHTTPClient(4)
	t.Cleanup(hc.CloseIdleConnections)
	client, err := s3.NewClient(t.Context(), s3.ClientConfig{
		Endpoint: srv.URL, AccessKey: "AKIDSECRETS", SecretKey: secret, PathStyle: true,
		HTTPClient: hc, MaxAttempts: 1,
	})
	require.NoError(t, err)
	b, err := s3.New(client, "zone-a", s3.Options{})
	require.NoError(t, err)
	_, err = b.Get(t.Context(), "k")
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.NotContains(t, err.Error(), secret)
}
