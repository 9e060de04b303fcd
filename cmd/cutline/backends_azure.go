package main

import (
	"context"
	"flag"
	"os"
	"strings"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/azblob"
	"github.com/cutline/cutline/objstore/s3"
)

// azureFlags are the global flags of Azure Blob Storage zones: one
// container per zone, in one storage account or one per zone.
type azureFlags struct {
	url, containers, account, key string
}

func (a *azureFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.url, "azure-url", a.url, "Azure Blob service URLs, comma-separated: one for every zone, or one per zone (https://ACCOUNT.blob.core.windows.net/)")
	fs.StringVar(&a.containers, "azure-containers", a.containers, "Azure zones, comma-separated: container or name=container (name defaults to the container)")
	fs.StringVar(&a.account, "azure-account", a.account, "Azure storage account (default $AZURE_STORAGE_ACCOUNT)")
	fs.StringVar(&a.key, "azure-key", a.key, "Azure storage account key, base64 (default $AZURE_STORAGE_KEY; none: a SAS in -azure-url or anonymous)")
}

// given reports whether any Azure zone flag was given.
func (a *azureFlags) given() bool { return a.url != "" || a.containers != "" }

// azureBuckets opens the Azure zones of the flags: one client per service
// URL, one shared HTTP client.
func (c *cmd) azureBuckets(ctx context.Context) ([]objstore.Bucket, error) {
	f := c.g.azure
	if f.containers == "" || f.url == "" {
		return nil, usagef("Azure zones need both -azure-url and -azure-containers")
	}
	urls := strings.Split(f.url, ",")
	specs := strings.Split(f.containers, ",")
	if len(urls) != 1 && len(urls) != len(specs) {
		return nil, usagef("-azure-url lists %d URLs for %d containers: give one, or one per container", len(urls), len(specs))
	}
	account, key := f.account, f.key
	if account == "" {
		account = os.Getenv("AZURE_STORAGE_ACCOUNT")
	}
	if key == "" {
		key = os.Getenv("AZURE_STORAGE_KEY")
	}
	if key == "" {
		account = "" // a SAS in the URL, or anonymous
	}
	hc := s3.NewHTTPClient(16)
	c.be().closers = append(c.be().closers, hc.CloseIdleConnections)
	var out []objstore.Bucket
	for i, spec := range specs {
		name, container := splitNamed(spec)
		u := strings.TrimSpace(urls[0])
		if len(urls) > 1 {
			u = strings.TrimSpace(urls[i])
		}
		client, err := azblob.NewClient(ctx, azblob.ClientConfig{ServiceURL: u, Account: account, Key: key, HTTPClient: hc})
		if err != nil {
			// Neither the URL (it may carry a SAS) nor the key is echoed.
			return nil, usagef("bad Azure zone %q: %v", spec, err)
		}
		b, err := azblob.New(client, container, azblob.Options{Name: name})
		if err != nil {
			return nil, usagef("bad Azure zone %q: %v", spec, err)
		}
		out = append(out, b)
	}
	return out, nil
}
