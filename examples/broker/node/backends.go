package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	etcdstore "github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/metastore/memstore"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/azblob"
	"github.com/cutline/cutline/objstore/fs"
	"github.com/cutline/cutline/objstore/latency"
	"github.com/cutline/cutline/objstore/s3"
)

// Backends are the metastore and the zones a process runs on.
type Backends struct {
	Store metastore.Store
	Zones []objstore.Bucket // zone order; named zone-a, zone-b, …
	Dir   string            // the data directory ("" when there is none)

	local   *localServer // the embedded etcd (nil with -etcd or -ephemeral)
	closers []func()     // run in reverse order by Close
}

func (b *Backends) Close() {
	if b == nil {
		return
	}
	for _, c := range slices.Backward(b.closers) {
		c()
	}
	b.closers = nil
}

const MaxZones = 26 // zone-a to zone-z

func ZoneName(i int) string { return fmt.Sprintf("zone-%c", 'a'+i) }

// remoteKind is a kind of zones reached over HTTP, one bucket (or
// container) per zone, on one service URL or one per zone: S3 or Azure.
// With secretURLs, a URL may carry a credential (an Azure SAS) and is
// never echoed.
type remoteKind struct {
	name, urlFlag, nameFlag, urlNoun, noun string
	secretURLs                             bool
}

var (
	s3Kind    = remoteKind{"S3", "s3-endpoint", "s3-buckets", "endpoint", "bucket", false}
	azureKind = remoteKind{"Azure", "azure-url", "azure-containers", "URL", "container", true}
)

// check refuses flags of a kind that do not name one distinct store per
// zone, and sets *k to the number of buckets. (Two names of one server
// look distinct here: objstore.VerifyZones catches those at start-up.)
func (z remoteKind) check(urls, names []string, creds bool, set map[string]bool, k *int) error {
	joined := strings.Join(names, ",")
	switch {
	case len(urls) == 0 && (len(names) > 0 || creds):
		return fmt.Errorf("-%s and the %s credentials need -%s", z.nameFlag, z.name, z.urlFlag)
	case len(urls) == 0:
		return nil
	case len(names) == 0:
		return fmt.Errorf("-%s needs -%s, one %s per zone", z.urlFlag, z.nameFlag, z.noun)
	case len(urls) > 1 && len(urls) != len(names):
		return fmt.Errorf("%d %ss in -%s for %d %ss: give one %s, or one per %s", len(urls), z.urlNoun, z.urlFlag, len(names), z.noun, z.urlNoun, z.noun)
	case len(names) > MaxZones:
		return Refuse(z.nameFlag, joined, "1 to %d %ss, one per zone", MaxZones, z.noun)
	}
	servers := make([]string, len(urls))
	for i, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			if z.secretURLs {
				return Refuse(z.urlFlag, fmt.Sprintf("(URL %d)", i+1), "http or https URLs with a host, comma-separated")
			}
			return Refuse(z.urlFlag, strings.Join(urls, ","), "http or https URLs, comma-separated; %q is not one", raw)
		}
		// The path names the account on an emulator.
		servers[i] = strings.ToLower(u.Scheme+"://"+u.Host) + strings.TrimRight(u.Path, "/")
	}
	zoneOf := map[string]int{}
	for i, name := range names {
		if name == "" {
			return Refuse(z.nameFlag, joined, "one %s name per zone, none empty", z.noun)
		}
		server, where := servers[min(i, len(servers)-1)], strconv.Quote(name)
		if len(urls) > 1 && !z.secretURLs {
			where += " at " + urls[i]
		}
		if j, dup := zoneOf[server+" "+name]; dup {
			return Refuse(z.nameFlag, joined, "one distinct store per zone: %s %s is given for %s and %s, which would count one physical copy as two",
				z.noun, where, ZoneName(j), ZoneName(i))
		}
		zoneOf[server+" "+name] = i
	}
	if set["k"] && *k != len(names) {
		return Refuse("k", *k, "%d, the number of %ss in -%s", len(names), z.noun, z.nameFlag)
	}
	*k = len(names)
	return nil
}

// open opens the buckets (bucket opens one) over one HTTP client sized
// for window requests in flight to each.
func (z remoteKind) open(urls, names []string, window int, be *Backends, log *slog.Logger,
	bucket func(url, name, zone string, hc *http.Client) (objstore.Bucket, error)) error {
	perHost := window
	if len(urls) == 1 {
		perHost *= len(names)
	}
	hc := s3.NewHTTPClient(perHost) // sized for the window; nothing S3 in it
	be.closers = append(be.closers, hc.CloseIdleConnections)
	for i, name := range names {
		raw := urls[min(i, len(urls)-1)]
		b, err := bucket(raw, name, ZoneName(i), hc)
		if err != nil {
			return fmt.Errorf("zone %s: %w", ZoneName(i), err)
		}
		be.Zones = append(be.Zones, b)
		u, _ := url.Parse(raw)
		log.Info("zone: "+z.name, "zone", ZoneName(i), "url", u.Scheme+"://"+u.Host+u.Path, z.noun, name)
	}
	return nil
}

// CheckBackends refuses the backend flags (-etcd, the zones, -w, -window)
// that do not go together. The demo shares it.
func (c *Settings) CheckBackends(set map[string]bool) error {
	if c.Etcd != "" && strings.Contains(","+c.Etcd+",", ",,") {
		return Refuse("etcd", c.Etcd, "endpoints separated by single commas, none empty")
	}
	if err := c.checkEtcdDial(); err != nil {
		return err
	}
	if err := s3Kind.check(c.S3Endpoints, c.S3Buckets, c.S3AccessKey != "" || c.S3SecretKey != "", set, &c.K); err != nil {
		return err
	}
	if len(c.azureURLs) > 0 && len(c.S3Endpoints) > 0 {
		return errors.New("-azure-url and -s3-endpoint: give the zones of one kind")
	}
	if err := azureKind.check(c.azureURLs, c.azureContainers, c.azureAccount != "" || c.azureKey != "", set, &c.K); err != nil {
		return err
	}
	switch {
	case (c.azureAccount == "") != (c.azureKey == ""):
		return errors.New("-azure-account and -azure-key go together")
	case c.K < 1 || c.K > MaxZones:
		return Refuse("k", c.K, "1 to %d zones", MaxZones)
	case c.W < 1 || c.W > c.K:
		return Refuse("w", c.W, "1 ≤ W ≤ K=%d", c.K)
	case c.Window < 1 || c.Window > epoch.MaxWindow:
		return Refuse("window", c.Window, "1 to %d", epoch.MaxWindow)
	}
	return nil
}

// etcdFlags names the flag of each field of etcdstore.DialConfig.
var etcdFlags = map[string]string{"CAFile": "etcd-ca", "CertFile": "etcd-cert", "KeyFile": "etcd-key", "Username": "etcd-user", "Password": "etcd-password"}

// checkEtcdDial refuses, naming the flag, what etcdstore.Dial would.
func (c *Settings) checkEtcdDial() error {
	if d := c.etcdDial; c.Etcd == "" && (d.TLS() || d.Username != "" || d.Password != "") {
		return errors.New("-etcd-ca, -etcd-cert, -etcd-key, -etcd-user and -etcd-password need -etcd")
	} else if c.Etcd == "" {
		return nil
	}
	c.etcdDial.Endpoints = strings.Split(c.Etcd, ",")
	if _, err := c.etcdDial.ClientConfig(); err != nil {
		flag := "etcd"
		if ce, ok := errors.AsType[*cutline.ConfigError](err); ok {
			flag = cmp.Or(etcdFlags[ce.Field], flag)
		}
		return fmt.Errorf("-%s: %w", flag, err)
	}
	return nil
}

// modeFlag is a permission flag, in octal.
type modeFlag struct{ m *os.FileMode }

func (f modeFlag) String() string {
	if f.m == nil {
		return ""
	}
	return fmt.Sprintf("%04o", uint32(*f.m))
}

func (f modeFlag) Set(v string) error {
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil || n > 0o777 {
		return errors.New("a permission in octal, 0000 to 0777")
	}
	*f.m = os.FileMode(n)
	return nil
}

// zoneOptions are the options of the filesystem zone name.
func (c *Settings) zoneOptions(name string) fs.Options {
	return fs.Options{Name: name, CreateRoot: true, FileMode: c.zoneFileMode, DirMode: c.zoneDirMode}
}

// OpenBackends opens the store and the zones the flags name: by default
// an embedded etcd and K filesystem zones in the data directory; etcd, S3
// or Azure when their flags are given; with -ephemeral (or settings that
// name neither etcd nor a directory, as the demo's) an in-memory
// metastore and zones in a temporary directory. The zones are verified
// (objstore.VerifyZones) before anything is written to them.
func OpenBackends(ctx context.Context, cfg *Settings, log *slog.Logger) (_ *Backends, err error) {
	be := &Backends{}
	defer func() {
		if err != nil {
			be.Close()
		}
	}()
	if err := be.openDir(cfg, log); err != nil {
		return nil, err
	}
	opts := etcdstore.Options{Root: cfg.EtcdRoot, Logger: log}
	switch {
	case cfg.Etcd == "" && cfg.local.Listen != "":
		if be.local, err = startLocalEtcd(ctx, cfg.local.Listen, be.Dir, log); err != nil {
			return nil, err
		}
		be.closers = append(be.closers, func() { be.local.stop(false) })
		if be.Store, err = etcdstore.New(be.local.cli, opts); err != nil {
			return nil, err
		}
		log.Info("metastore: embedded etcd", "data", filepath.Join(be.Dir, "etcd"), "endpoint", be.local.Endpoint, "root", cfg.EtcdRoot,
			"quota_bytes", localEtcdQuota, "history", localEtcdRetention)
	case cfg.Etcd == "":
		be.Store = memstore.New(memstore.Options{})
		log.Warn("in-memory metastore: everything is gone at exit")
	default:
		// A refused password is the dial's error; a certificate etcd
		// does not trust, the first request's.
		cli, err := etcdstore.Dial(ctx, cfg.etcdDial)
		if err != nil {
			return nil, err
		}
		be.closers = append(be.closers, func() { _ = cli.Close() })
		if be.Store, err = etcdstore.New(cli, opts); err != nil {
			return nil, err
		}
		// Fail early and clearly when nobody answers.
		if _, err := be.Store.Get(ctx, "ping"); err != nil && !errors.Is(err, metastore.ErrNotFound) {
			return nil, fmt.Errorf("etcd at %s: %w", cfg.Etcd, err)
		}
		log.Info("metastore: etcd", "endpoints", cfg.Etcd, "root", cfg.EtcdRoot)
	}
	if cfg.Role == roleController {
		return be, nil // the controller keeps nothing in the zones
	}
	if err := be.openZones(ctx, cfg, log); err != nil {
		return nil, err
	}
	// One check of the zone set, before anything is written to it.
	if err := objstore.VerifyZones(ctx, be.Zones, objstore.VerifyOptions{}); err != nil {
		return nil, fmt.Errorf("zones: %w", err)
	}
	// After the verification: the model slows the broker's work, not its
	// start.
	if cfg.latency > 0 {
		for i, z := range be.Zones {
			be.Zones[i] = latency.Wrap(z, latency.Options{Default: latency.Fixed(cfg.latency), Seed: uint64(i)})
		}
		log.Warn("injected latency before every zone request (-latency)", "latency", cfg.latency)
	}
	return be, nil
}

func (be *Backends) openZones(ctx context.Context, cfg *Settings, log *slog.Logger) error {
	switch {
	case len(cfg.azureURLs) > 0:
		return azureKind.open(cfg.azureURLs, cfg.azureContainers, cfg.Window, be, log, func(u, name, zone string, hc *http.Client) (objstore.Bucket, error) {
			client, err := azblob.NewClient(ctx, azblob.ClientConfig{ServiceURL: u, Account: cfg.azureAccount, Key: cfg.azureKey, HTTPClient: hc})
			if err != nil {
				return nil, err
			}
			return azblob.New(client, name, azblob.Options{Name: zone})
		})
	case len(cfg.S3Endpoints) > 0:
		clients := map[string]*awss3.Client{} // one per endpoint
		return s3Kind.open(cfg.S3Endpoints, cfg.S3Buckets, cfg.Window, be, log, func(u, name, zone string, hc *http.Client) (objstore.Bucket, error) {
			if clients[u] == nil {
				client, err := s3.NewClient(ctx, s3.ClientConfig{Endpoint: u, Region: cfg.S3Region,
					AccessKey: cfg.S3AccessKey, SecretKey: cfg.S3SecretKey, PathStyle: true, HTTPClient: hc})
				if err != nil {
					return nil, err
				}
				clients[u] = client
			}
			return s3.New(clients[u], name, s3.Options{RemoteOptions: objstore.RemoteOptions{Name: zone}})
		})
	}
	for i := range cfg.K {
		b, err := fs.New(filepath.Join(be.Dir, ZoneName(i)), cfg.zoneOptions(ZoneName(i)))
		if err != nil {
			return err
		}
		be.closers = append(be.closers, func() { _ = b.Close() })
		be.Zones = append(be.Zones, b)
	}
	log.Info("zones: filesystem", "k", cfg.K, "dir", be.Dir)
	return nil
}
