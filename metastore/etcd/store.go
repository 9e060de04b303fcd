package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/metastore"
)

// DefaultRoot is the key prefix used when Options.Root is empty.
const DefaultRoot = "/cutline/"

// DefaultRequestTimeout bounds each call when Options.RequestTimeout is 0.
const DefaultRequestTimeout = 5 * time.Second

// DefaultListPageSize is how many keys one range request of List fetches
// when Options.ListPageSize is 0.
const DefaultListPageSize = 1000

// maxListAttempts bounds how often List starts over because etcd compacted
// its history past the revision of a paged read before the read was done.
const maxListAttempts = 5

// Options configures a Store. The zero value works.
type Options struct {
	// Root is prepended to every key; keys come back without it. It must
	// end with "/" so that two roots never share keys. Empty means
	// DefaultRoot.
	Root string
	// RequestTimeout bounds every unary call (get, list, txn, lease grant
	// and revoke). A call that runs out of it fails with
	// metastore.ErrUnavailable: its outcome is unknown. 0 means
	// DefaultRequestTimeout; it must not be negative. The caller's context
	// still applies and, when it ends first, its error is returned instead.
	RequestTimeout time.Duration
	// Logger receives session losses and other notable events. Nil
	// discards.
	Logger *slog.Logger
	// Clock drives the request timeouts. Nil means the wall clock.
	Clock clock.Clock
	// ListPageSize is how many keys one range request of List fetches; a
	// prefix with more keys is read in several requests at one revision.
	// Smaller pages keep each response small when values are large. 0 means
	// DefaultListPageSize; it must not be negative.
	ListPageSize int
}

func (o *Options) validate() error {
	if o.Root == "" {
		o.Root = DefaultRoot
	}
	if err := metastore.ValidateKey(o.Root); err != nil {
		return &cutline.ConfigError{Field: "Root", Value: fmt.Sprintf("%.40q", o.Root), Reason: "not a valid key", Err: err}
	}
	if !strings.HasSuffix(o.Root, "/") {
		return &cutline.ConfigError{Field: "Root", Value: fmt.Sprintf("%q", o.Root), Reason: `must end with "/"`}
	}
	if len(o.Root) > 256 {
		return &cutline.ConfigError{Field: "Root", Value: fmt.Sprintf("%.40q", o.Root), Reason: "longer than 256 bytes"}
	}
	switch {
	case o.RequestTimeout < 0:
		return &cutline.ConfigError{Field: "RequestTimeout", Value: o.RequestTimeout.String(), Reason: "negative"}
	case o.RequestTimeout == 0:
		o.RequestTimeout = DefaultRequestTimeout
	}
	switch {
	case o.ListPageSize < 0:
		return &cutline.ConfigError{Field: "ListPageSize", Value: fmt.Sprint(o.ListPageSize), Reason: "negative"}
	case o.ListPageSize == 0:
		o.ListPageSize = DefaultListPageSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Clock = clock.Or(o.Clock)
	return nil
}

// Store is a metastore.Store on etcd. It is safe for concurrent use. It does
// not own the client: the host closes the client after its last use of the
// store and of the store's sessions.
type Store struct {
	client  *clientv3.Client
	root    string
	timeout time.Duration
	page    int
	log     *slog.Logger
	clock   clock.Clock
}

var _ metastore.Store = (*Store)(nil)

// New returns a Store that keeps its keys under opts.Root on client. The
// client's endpoints, TLS and authentication are the host's business, but
// New checks the endpoints the client has now: each must be
// http(s)://host:port, unix(s)://path or host:port, without credentials. A
// refused option or endpoint is a *cutline.ConfigError (cutline.ErrInvalid) naming
// the field. New does no I/O.
func New(client *clientv3.Client, opts Options) (*Store, error) {
	if err := checkClient(client); err != nil {
		return nil, err
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Store{
		client:  client,
		root:    opts.Root,
		timeout: opts.RequestTimeout,
		page:    opts.ListPageSize,
		log:     opts.Logger,
		clock:   opts.Clock,
	}, nil
}

// Root returns the key prefix under which the store keeps its keys.
func (s *Store) Root() string { return s.root }

// errRequestTimeout is the cause of a call context ended by RequestTimeout.
var errRequestTimeout = errors.New("etcd: request timeout")

// call derives the context of one unary call: the caller's, bounded by the
// request timeout on the store's clock.
func (s *Store) call(ctx context.Context) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(ctx)
	t := s.clock.AfterFunc(s.timeout, func() { cancel(errRequestTimeout) })
	return cctx, func() {
		t.Stop()
		cancel(nil)
	}
}

func (s *Store) toKV(key []byte, value []byte, mod, create, lease int64) metastore.KV {
	kv := metastore.KV{
		Key:            strings.TrimPrefix(string(key), s.root),
		Value:          value,
		Revision:       mod,
		CreateRevision: create,
		Session:        lease,
	}
	if kv.Value == nil {
		kv.Value = []byte{}
	}
	return kv
}

// Get implements metastore.Store. The read is linearizable.
func (s *Store) Get(ctx context.Context, key string) (metastore.KV, error) {
	if err := ctx.Err(); err != nil {
		return metastore.KV{}, err
	}
	if err := metastore.ValidateKey(key); err != nil {
		return metastore.KV{}, err
	}
	cctx, done := s.call(ctx)
	defer done()
	resp, err := s.client.Get(cctx, s.root+key)
	if err != nil {
		return metastore.KV{}, s.fail(ctx, cctx, "get", key, err)
	}
	if len(resp.Kvs) == 0 {
		return metastore.KV{}, fmt.Errorf("metastore get %q: %w", key, metastore.ErrNotFound)
	}
	kv := resp.Kvs[0]
	return s.toKV(kv.Key, kv.Value, kv.ModRevision, kv.CreateRevision, kv.Lease), nil
}

// List implements metastore.Store. A prefix with more keys than
// Options.ListPageSize is read in pages, all at the revision of the first
// page, so that the result is one snapshot at that revision. etcd compacts
// its history on a schedule; when a compaction passes that revision before
// the last page, the pages read so far are dropped and List starts over at
// the current revision, at most maxListAttempts times in all. If every
// attempt is overtaken, List returns an error matching
// metastore.ErrUnavailable (never metastore.ErrCompacted).
func (s *Store) List(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	return s.list(ctx, prefix, true)
}

// ListKeys implements metastore.KeyLister: List, paged and retried the
// same way, with etcd sending no values.
func (s *Store) ListKeys(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	return s.list(ctx, prefix, false)
}

func (s *Store) list(ctx context.Context, prefix string, values bool) ([]metastore.KV, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if err := metastore.ValidatePrefix(prefix); err != nil {
		return nil, 0, err
	}
	var compacted *compactedError
	for attempt := 1; attempt <= maxListAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, 0, fmt.Errorf("metastore list %q: %w", prefix, err)
		}
		kvs, rev, err := s.listOnce(ctx, prefix, values)
		if !errors.As(err, &compacted) {
			return kvs, rev, err
		}
		s.log.InfoContext(ctx, "metastore list overtaken by a compaction; starting over at the current revision",
			slog.String("prefix", prefix), slog.Int64("revision", compacted.rev),
			slog.Int("page", compacted.page), slog.Int("attempt", attempt))
	}
	return nil, 0, fmt.Errorf("metastore list %q: %w", prefix,
		metastore.Unavailable(fmt.Errorf("etcd: history compacted during each of %d attempts to read the prefix at one revision, the last at revision %d: %w",
			maxListAttempts, compacted.rev, compacted.err)))
}

// compactedError: etcd compacted its history past the revision of a paged
// read before its last page (page counts from 1).
type compactedError struct {
	rev  int64
	page int
	err  error
}

func (e *compactedError) Error() string {
	return fmt.Sprintf("etcd: revision %d compacted before page %d: %v", e.rev, e.page, e.err)
}

func (e *compactedError) Unwrap() error { return e.err }

// listOnce reads prefix page by page at the revision of the first page. The
// first page reads the current revision, which etcd never has compacted;
// a later page that finds its revision compacted returns a
// *compactedError.
func (s *Store) listOnce(ctx context.Context, prefix string, values bool) ([]metastore.KV, int64, error) {
	start := s.root + prefix
	end := clientv3.GetPrefixRangeEnd(start)
	var (
		out []metastore.KV
		rev int64
	)
	for page := 1; ; page++ {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(s.page))}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		if !values {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		cctx, done := s.call(ctx)
		resp, err := s.client.Get(cctx, start, opts...)
		done()
		if err != nil {
			if rev > 0 && ctx.Err() == nil && errors.Is(err, rpctypes.ErrCompacted) {
				return nil, 0, &compactedError{rev: rev, page: page, err: err}
			}
			return nil, 0, s.fail(ctx, cctx, "list", prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			out = append(out, s.toKV(kv.Key, kv.Value, kv.ModRevision, kv.CreateRevision, kv.Lease))
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, rev, nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

func ended(sess metastore.Session) bool {
	select {
	case <-sess.Done():
		return true
	default:
		return false
	}
}

// Txn implements metastore.Store: one etcd transaction whose compares are
// ModRevision(key) == rev (CreateRevision(key) == 0 for rev 0). When a
// compare fails, the same round trip reads every compared key so that the
// *ConflictError carries the current revision.
func (s *Store) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := metastore.ValidateTxn(t); err != nil {
		return 0, err
	}
	cmps := make([]clientv3.Cmp, 0, len(t.If))
	reads := make([]clientv3.Op, 0, len(t.If))
	for _, c := range t.If {
		k := s.root + c.Key
		if c.Revision == 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", c.Revision))
		}
		reads = append(reads, clientv3.OpGet(k, clientv3.WithKeysOnly()))
	}
	ops := make([]clientv3.Op, 0, len(t.Then))
	var sessions []int64
	for _, op := range t.Then {
		k := s.root + op.Key
		switch {
		case op.Delete:
			ops = append(ops, clientv3.OpDelete(k))
		case op.Session != nil:
			if ended(op.Session) {
				return 0, fmt.Errorf("metastore txn put %q: session %d: %w", op.Key, op.Session.ID(), metastore.ErrSessionExpired)
			}
			sessions = append(sessions, op.Session.ID())
			ops = append(ops, clientv3.OpPut(k, string(op.Value), clientv3.WithLease(clientv3.LeaseID(op.Session.ID()))))
		default:
			ops = append(ops, clientv3.OpPut(k, string(op.Value)))
		}
	}
	label := ""
	if len(t.Then) > 0 {
		label = t.Then[0].Key
	} else if len(t.If) > 0 {
		label = t.If[0].Key
	}
	cctx, done := s.call(ctx)
	defer done()
	resp, err := s.client.Txn(cctx).If(cmps...).Then(ops...).Else(reads...).Commit()
	if err != nil {
		err = s.fail(ctx, cctx, "txn", label, err)
		if errors.Is(err, metastore.ErrSessionExpired) {
			return 0, fmt.Errorf("metastore txn: sessions %v: %w", sessions, err)
		}
		return 0, err
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	current := make(map[string]int64, len(reads))
	for _, r := range resp.Responses {
		if rr := r.GetResponseRange(); rr != nil {
			for _, kv := range rr.Kvs {
				current[string(kv.Key)] = kv.ModRevision
			}
		}
	}
	for _, c := range t.If {
		if cur := current[s.root+c.Key]; cur != c.Revision {
			return 0, &metastore.ConflictError{Key: c.Key, Expected: c.Revision, Revision: cur}
		}
	}
	// Unreachable with a correct server: the compares failed but the reads
	// of the same revision say they hold.
	c := t.If[0]
	return 0, &metastore.ConflictError{Key: c.Key, Expected: c.Revision, Revision: current[s.root+c.Key]}
}
