package gcs_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/gcs"
)

// Example wraps a host's GCS client, checks that the bucket enforces
// create-only writes, and writes an object twice. It needs credentials and
// a bucket, so it is compiled but not run.
func Example() {
	ctx := context.Background()
	client, err := storage.NewClient(ctx) // Application Default Credentials
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	b, err := gcs.New(client, "my-zone-c-bucket", gcs.Options{Name: "zone-c"})
	if err != nil {
		log.Fatal(err)
	}
	if err := objstore.Verify(ctx, b); err != nil {
		log.Fatal(err)
	}
	if err := b.Create(ctx, "demo/0001", []byte("first")); err != nil {
		log.Fatal(err)
	}
	err = b.Create(ctx, "demo/0001", []byte("second"))
	fmt.Println(errors.Is(err, objstore.ErrExists))
}

// ExampleNew runs against fake-gcs-server in the same process, the way the
// package's own tests do.
func ExampleNew() {
	ctx := context.Background()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1"})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "zone-c"})
	client := srv.Client()
	defer client.Close()

	b, err := gcs.New(client, "zone-c", gcs.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("verify:", objstore.Verify(ctx, b))
	fmt.Println("first:", b.Create(ctx, "chain/0001", []byte("flight")))
	err = b.Create(ctx, "chain/0001", []byte("poison"))
	fmt.Println("second exists:", errors.Is(err, objstore.ErrExists))
	got, _ := b.Get(ctx, "chain/0001")
	fmt.Println("kept:", string(got))
	// Output:
	// verify: <nil>
	// first: <nil>
	// second exists: true
	// kept: flight
}
