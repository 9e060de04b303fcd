package node

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/azblob"
	"github.com/cutline/cutline/objstore/s3"
)

// azureZones are the Azure Blob Storage zones the flags name: one
// container per zone, in one storage account or one per zone.
type azureZones struct {
	urls       []string // -azure-url: one Blob service URL, or one per zone
	containers []string // -azure-containers, in zone order
	account    string   // -azure-account
	key        string   // -azure-key: a credential, never logged
}

// register adds the Azure flags to fs.
func (a *azureZones) register(fs *flag.FlagSet) {
	list := func(dst *[]string) func(string) error {
		return func(v string) error {
			*dst = strings.Split(v, ",")
			return nil
		}
	}
	fs.Func("azure-url", "Azure Blob service URL (https://ACCOUNT.blob.core.windows.net/), or one per zone, comma-separated (default: no Azure zones)", list(&a.urls))
	fs.Func("azure-containers", "Azure containers, one per zone, comma-separated, in zone order", list(&a.containers))
	fs.StringVar(&a.account, "azure-account", "", "Azure storage account of -azure-key")
	fs.StringVar(&a.key, "azure-key", "", "Azure storage account key, base64 (prefer CUTLINE_AZURE_KEY; never logged; none: a SAS in -azure-url)")
}

// given reports whether the zones are Azure containers.
func (a *azureZones) given() bool { return len(a.urls) > 0 }

// check refuses Azure flags that do not go together, or that do not name
// one distinct store per zone, and sets *k to the number of containers
// (refusing a -k that says otherwise). s3 says whether S3 zones are given
// too: a broker's zones are of one kind.
func (a *azureZones) check(s3 bool, set map[string]bool, k *int) error {
	if !a.given() {
		if len(a.containers) > 0 || a.account != "" || a.key != "" {
			return errors.New("-azure-containers and the Azure key need -azure-url")
		}
		return nil
	}
	flagValue := strings.Join(a.containers, ",")
	switch {
	case s3:
		return errors.New("-azure-url and -s3-endpoint: give the zones of one kind")
	case len(a.containers) == 0:
		return errors.New("-azure-url needs -azure-containers, one container per zone")
	case len(a.urls) > 1 && len(a.urls) != len(a.containers):
		return fmt.Errorf("%d URLs in -azure-url for %d containers: give one URL, or one per container", len(a.urls), len(a.containers))
	case len(a.containers) > MaxZones:
		return Refuse("azure-containers", flagValue, "1 to %d containers, one per zone", MaxZones)
	case (a.account == "") != (a.key == ""):
		return errors.New("-azure-account and -azure-key go together")
	}
	accounts := make([]string, len(a.urls))
	for i, raw := range a.urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			// Not echoed: the URL may carry a SAS.
			return Refuse("azure-url", fmt.Sprintf("(URL %d)", i+1), "http or https URLs with a host, comma-separated")
		}
		// Scheme and host are case-insensitive; a trailing slash changes
		// nothing. The path names the account on an emulator.
		accounts[i] = strings.ToLower(u.Scheme+"://"+u.Host) + strings.TrimRight(u.Path, "/")
	}
	zoneOf := make(map[string]int, len(a.containers))
	for i, name := range a.containers {
		if name == "" {
			return Refuse("azure-containers", flagValue, "one container name per zone, none empty")
		}
		account := accounts[min(i, len(accounts)-1)]
		if j, dup := zoneOf[account+" "+name]; dup {
			return Refuse("azure-containers", flagValue, "one distinct store per zone: container %q is given for %s and %s, which would count one physical copy as two",
				name, ZoneName(j), ZoneName(i))
		}
		zoneOf[account+" "+name] = i
	}
	if set["k"] && *k != len(a.containers) {
		return Refuse("k", *k, "%d, the number of containers in -azure-containers", len(a.containers))
	}
	*k = len(a.containers)
	return nil
}

// open opens the zones, one client per service URL over one HTTP client
// sized for window requests in flight to each container. The HTTP
// client's idle connections are closed by the returned func.
func (a *azureZones) open(ctx context.Context, window int, log *slog.Logger) ([]objstore.Bucket, func(), error) {
	perHost := window
	if len(a.urls) == 1 {
		perHost *= len(a.containers)
	}
	hc := s3.NewHTTPClient(perHost) // sized for the window; nothing S3 in it
	var zones []objstore.Bucket
	for i, name := range a.containers {
		raw := a.urls[min(i, len(a.urls)-1)]
		client, err := azblob.NewClient(ctx, azblob.ClientConfig{ServiceURL: raw, Account: a.account, Key: a.key, HTTPClient: hc})
		if err != nil {
			hc.CloseIdleConnections()
			return nil, nil, fmt.Errorf("zone %s: %w", ZoneName(i), err)
		}
		b, err := azblob.New(client, name, azblob.Options{Name: ZoneName(i)})
		if err != nil {
			hc.CloseIdleConnections()
			return nil, nil, fmt.Errorf("zone %s: %w", ZoneName(i), err)
		}
		zones = append(zones, b)
		u, _ := url.Parse(raw)
		log.Info("zone: Azure", "zone", ZoneName(i), "service", u.Scheme+"://"+u.Host+u.Path, "container", name)
	}
	return zones, hc.CloseIdleConnections, nil
}
