package azblob_test

import (
	"context"
	"log"
	"os"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/azblob"
)

// A host opens one container per zone with its own client and checks the
// zone set once at start-up.
func Example() {
	key := os.Getenv("AZURE_STORAGE_KEY") // the account's key, from the host's secret store
	ctx := context.Background()
	client, err := azblob.NewClient(ctx, azblob.ClientConfig{
		ServiceURL: "https://myaccount.blob.core.windows.net/",
		Account:    "myaccount",
		Key:        key,
	})
	if err != nil {
		log.Fatal(err)
	}
	var zones []objstore.Bucket
	for _, name := range []string{"zone-a", "zone-b", "zone-c"} {
		b, err := azblob.New(client, name, azblob.Options{Name: name})
		if err != nil {
			log.Fatal(err)
		}
		zones = append(zones, b)
	}
	if err := objstore.VerifyZones(ctx, zones, objstore.VerifyOptions{}); err != nil {
		log.Fatal(err) // objstore.ErrNotCreateOnly: never write there
	}
}
