package s3_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/s3"
)

// Example connects to a self-hosted S3-compatible store, checks that it
// enforces create-only writes, and writes an object twice. It needs a
// running server, so it is compiled but not run.
func Example() {
	ctx := context.Background()
	client, err := s3.NewClient(ctx, s3.ClientConfig{
		Endpoint:  "http://127.0.0.1:7070",
		AccessKey: "access-key",
		SecretKey: "secret-key",
		PathStyle: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	b, err := s3.New(client, "zone-a", s3.Options{RemoteOptions: objstore.RemoteOptions{Name: "zone-a"}})
	if err != nil {
		log.Fatal(err)
	}
	if err := objstore.Verify(ctx, b); err != nil {
		log.Fatal(err) // ErrNotCreateOnly: this store must not hold chains
	}

	if err := b.Create(ctx, "demo/0001", []byte("first")); err != nil {
		log.Fatal(err)
	}
	err = b.Create(ctx, "demo/0001", []byte("second"))
	switch {
	case errors.Is(err, objstore.ErrExists):
		fmt.Println("the key is taken")
	case errors.Is(err, objstore.ErrUnavailable):
		fmt.Println("zone unreachable: outcome unknown")
	}
}

// A host whose writer keeps a window of 64 appends in flight in each of
// three zones, one bucket per endpoint, shares one client among the zones:
// each endpoint keeps 64 idle connections, so appends reuse them instead
// of leaving a closed socket in TIME_WAIT per request.
func ExampleNewHTTPClient() {
	const window = 64
	hc := s3.NewHTTPClient(window)
	defer hc.CloseIdleConnections()
	tr := hc.Transport.(*http.Transport)
	// TLS stays the host's: tr.TLSClientConfig = &tls.Config{RootCAs: pool}

	for _, zone := range []string{"zone-a", "zone-b", "zone-c"} {
		client, err := s3.NewClient(context.Background(), s3.ClientConfig{
			Endpoint:   "https://" + zone + ".s3.example.net",
			AccessKey:  "access-key",
			SecretKey:  "secret-key",
			PathStyle:  true,
			HTTPClient: hc,
		})
		if err != nil {
			log.Fatal(err)
		}
		if _, err := s3.New(client, "cutline", s3.Options{RemoteOptions: objstore.RemoteOptions{Name: zone}}); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("idle connections per endpoint:", tr.MaxIdleConnsPerHost)
	// Output:
	// idle connections per endpoint: 64
}
