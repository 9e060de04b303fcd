package authority

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
)

const (
	stateKind    = "authority-state"
	tokenKind    = "authority-token"
	electionKind = "authority-controller"
	recFormat    = 1
)

// keys lays out a domain's records under a metastore root:
// authority/<domain>/{state,token,controller}.
type keys struct{ root, domain string }

func newKeys(root, domain string) (keys, error) {
	if root != "" && !strings.HasSuffix(root, "/") {
		return keys{}, &cutline.ConfigError{Field: "Root", Value: fmt.Sprintf("%q", root), Reason: "must be empty or end with '/'"}
	}
	if err := epoch.ValidateName("domain", domain); err != nil {
		return keys{}, err
	}
	return keys{root: root, domain: domain}, nil
}

func (k keys) base() string       { return k.root + "authority/" + k.domain + "/" }
func (k keys) state() string      { return k.base() + "state" }
func (k keys) token() string      { return k.base() + "token" }
func (k keys) controller() string { return k.base() + "controller" }

// arg is an argument or option a constructor requires, and whether it is
// missing.
type arg struct {
	name    string
	missing bool
}

// required returns a *cutline.ConfigError naming the first missing argument, in
// the order given, or nil: one field per error.
func required(args ...arg) error {
	for _, a := range args {
		if a.missing {
			return &cutline.ConfigError{Field: a.name, Value: nil, Reason: "required"}
		}
	}
	return nil
}

// tokenRecord is the token record: who may write the domain's progress.
// It changes only when that changes, so its revision guards progress
// writes (Guard).
type tokenRecord struct {
	metastore.RecordHeader
	Domain string `json:"domain"`
	Token  Token  `json:"token"`
	Writer string `json:"writer"`
}

type electionRecord struct {
	metastore.RecordHeader
	Domain  string `json:"domain"`
	Node    string `json:"node"`
	Session int64  `json:"session"`
}

// Election is a controller's right to act for a domain: the key
// authority/<domain>/controller, bound to the controller's session. Every
// write of the state compares it, so a deposed controller (its session
// ended, its key gone or replaced) writes nothing.
type Election struct {
	store metastore.Store
	keys  keys
	node  string
	sess  metastore.Session
	rev   int64
}

// Campaign blocks until node is the domain's controller (or ctx ends).
func Campaign(ctx context.Context, store metastore.Store, root, domain, node string, sess metastore.Session) (*Election, error) {
	k, err := newKeys(root, domain)
	if err != nil {
		return nil, err
	}
	if err := epoch.ValidateName("node", node); err != nil {
		return nil, err
	}
	if err := required(arg{"store", store == nil}, arg{"sess", sess == nil}); err != nil {
		return nil, err
	}
	v, err := metastore.EncodeRecord(&electionRecord{RecordHeader: metastore.RecordHeader{Kind: electionKind, Format: recFormat}, Domain: domain, Node: node, Session: sess.ID()})
	if err != nil {
		return nil, err
	}
	for {
		rev, err := metastore.PutBound(ctx, store, sess, k.controller(), v, 0)
		if err == nil {
			return &Election{store: store, keys: k, node: node, sess: sess, rev: rev}, nil
		}
		if !errors.Is(err, metastore.ErrConflict) {
			return nil, fmt.Errorf("authority: campaign for %s: %w", domain, err)
		}
		// Someone leads: wait until its key goes.
		kvs, at, err := store.List(ctx, k.controller())
		if err != nil {
			return nil, fmt.Errorf("authority: campaign for %s: %w", domain, err)
		}
		if len(kvs) == 0 {
			continue
		}
		if err := waitGone(ctx, store, k.controller(), at); err != nil {
			return nil, err
		}
	}
}

func waitGone(ctx context.Context, store metastore.Store, key string, at int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for ev, err := range store.Watch(ctx, key, at+1) {
		if err != nil {
			if errors.Is(err, metastore.ErrCompacted) {
				return nil // read again
			}
			return fmt.Errorf("authority: watch the controller key: %w", err)
		}
		if ev.KV.Key == key && ev.Type == metastore.EventDelete {
			return nil
		}
	}
	return ctx.Err()
}

// Done is closed when the election's session ends: the controller must
// stop.
func (e *Election) Done() <-chan struct{} { return e.sess.Done() }

// Resign gives the election up.
func (e *Election) Resign(ctx context.Context) error {
	err := metastore.Delete(ctx, e.store, e.keys.controller(), e.rev)
	if errors.Is(err, metastore.ErrConflict) {
		return nil
	}
	return err
}

// Load reads the domain's state and writes it back with the next term, so
// that from here on a deposed controller's writes fail on the state as
// well. A domain never granted is Vacant with token 0.
func (e *Election) Load(ctx context.Context) (StateRecord, error) {
	st, err := Read(ctx, e.store, e.keys.root, e.keys.domain)
	if err != nil {
		return StateRecord{}, err
	}
	next := st
	next.Term++
	return e.Save(ctx, st, next)
}

// Read reads a domain's durable state without acting on it (for
// operators, runtimes and tests).
func Read(ctx context.Context, store metastore.Store, root, domain string) (StateRecord, error) {
	k, err := newKeys(root, domain)
	if err != nil {
		return StateRecord{}, err
	}
	st := StateRecord{RecordHeader: metastore.RecordHeader{Kind: stateKind, Format: recFormat}, Domain: domain, Phase: Vacant}
	kv, err := store.Get(ctx, k.state())
	switch {
	case errors.Is(err, metastore.ErrNotFound):
	case err != nil:
		return StateRecord{}, fmt.Errorf("authority: read %s: %w", domain, err)
	default:
		if err := metastore.DecodeRecord(kv.Key, kv.Value, stateKind, recFormat, &st); err != nil {
			return StateRecord{}, err
		}
		if st.Domain != domain {
			return StateRecord{}, &metastore.RecordError{Key: kv.Key, Kind: stateKind, Reason: fmt.Sprintf("claims domain %q", st.Domain)}
		}
		switch st.Phase {
		case Vacant, Granted, Recovering, Handoff:
		default:
			return StateRecord{}, &metastore.RecordError{Key: kv.Key, Kind: stateKind, Reason: fmt.Sprintf("unknown phase %q", st.Phase)}
		}
		st.Revision = kv.Revision
	}
	tkv, err := store.Get(ctx, k.token())
	switch {
	case errors.Is(err, metastore.ErrNotFound):
	case err != nil:
		return StateRecord{}, fmt.Errorf("authority: read %s: %w", domain, err)
	default:
		st.TokenRevision = tkv.Revision
	}
	return st, nil
}

// Save writes next over cur by compare-and-set on the state and on the
// election, and writes the token record in the same transaction when the
// writer changes. It returns next with its revisions. A lost compare is
// ErrDeposed: another controller wrote the state or holds the election.
func (e *Election) Save(ctx context.Context, cur, next StateRecord) (StateRecord, error) {
	next.RecordHeader = metastore.RecordHeader{Kind: stateKind, Format: recFormat}
	next.Domain = e.keys.domain
	v, err := metastore.EncodeRecord(&next)
	if err != nil {
		return StateRecord{}, err
	}
	txn := metastore.Txn{
		If:   []metastore.Compare{{Key: e.keys.controller(), Revision: e.rev}, {Key: e.keys.state(), Revision: cur.Revision}},
		Then: []metastore.Op{{Key: e.keys.state(), Value: v}},
	}
	ct, cw := cur.writer()
	nt, nw := next.writer()
	newToken := ct != nt || cw != nw || cur.TokenRevision == 0
	if newToken {
		tv, err := metastore.EncodeRecord(&tokenRecord{RecordHeader: metastore.RecordHeader{Kind: tokenKind, Format: recFormat}, Domain: e.keys.domain, Token: nt, Writer: nw})
		if err != nil {
			return StateRecord{}, err
		}
		txn.If = append(txn.If, metastore.Compare{Key: e.keys.token(), Revision: cur.TokenRevision})
		txn.Then = append(txn.Then, metastore.Op{Key: e.keys.token(), Value: tv})
	}
	rev, err := e.store.Txn(ctx, txn)
	if errors.Is(err, metastore.ErrConflict) {
		return StateRecord{}, fmt.Errorf("%w: %s: %w", ErrDeposed, e.keys.domain, err)
	}
	if err != nil {
		return StateRecord{}, fmt.Errorf("authority: save %s: %w", e.keys.domain, err)
	}
	next.Revision = rev
	if newToken {
		next.TokenRevision = rev
	} else {
		next.TokenRevision = cur.TokenRevision
	}
	return next, nil
}

// Guard returns a view of store whose every transaction also requires
// the domain's token record to be at rev, the Grant.Revision of the grant
// (or recovery placement) the writer holds: the progress fence. Cursor
// advances, coverage writes, marks and publications made through it apply
// only while that grant is current; after a new token or a recovery
// placement they fail with ErrStaleGrant (never with
// metastore.ErrConflict, which writers retry) and apply nothing. Reads
// pass through.
func Guard(store metastore.Store, root, domain string, rev int64) (metastore.Store, error) {
	if rev <= 0 {
		return nil, &cutline.ConfigError{Field: "rev", Value: rev, Reason: "a grant's token revision is positive"}
	}
	g, err := NewGuarded(store, root, domain)
	if err != nil {
		return nil, err
	}
	g.Set(rev)
	return g, nil
}

// Guarded is a store behind the progress fence whose guard follows the
// node's authority: the Agent sets it to each grant's (or recovery
// placement's) revision and clears it when the node holds nothing, so a
// host builds its minter, index and star once over it. While cleared,
// every write fails with ErrStaleGrant.
type Guarded struct {
	metastore.Store
	key string
	rev atomic.Int64
}

// NewGuarded returns a cleared Guarded view of store for domain.
func NewGuarded(store metastore.Store, root, domain string) (*Guarded, error) {
	k, err := newKeys(root, domain)
	if err != nil {
		return nil, err
	}
	if store == nil {
		return nil, &cutline.ConfigError{Field: "store", Value: nil, Reason: "required"}
	}
	return &Guarded{Store: store, key: k.token()}, nil
}

// Set makes writes require the token record at rev (0 refuses them all).
func (g *Guarded) Set(rev int64) { g.rev.Store(max(rev, 0)) }

// Revision returns the revision writes are guarded with.
func (g *Guarded) Revision() int64 { return g.rev.Load() }

// StaleGrantError is a write refused by Guard.
type StaleGrantError struct {
	Key      string
	Guard    int64
	Revision int64
}

func (e *StaleGrantError) Error() string {
	if e.Guard == 0 {
		return "authority: write refused: this node holds no grant"
	}
	return fmt.Sprintf("authority: write refused: the token record %q moved from revision %d to %d", e.Key, e.Guard, e.Revision)
}

func (e *StaleGrantError) Unwrap() error { return ErrStaleGrant }

// Txn implements metastore.Store, with the guard's compare added.
func (g *Guarded) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	guard := g.rev.Load()
	if guard == 0 {
		return 0, &StaleGrantError{Key: g.key}
	}
	t.If = append(append([]metastore.Compare(nil), t.If...), metastore.Compare{Key: g.key, Revision: guard})
	rev, err := g.Store.Txn(ctx, t)
	var ce *metastore.ConflictError
	if errors.As(err, &ce) && ce.Key == g.key {
		return 0, &StaleGrantError{Key: g.key, Guard: guard, Revision: ce.Revision}
	}
	if errors.As(err, &ce) {
		// Another compare failed; the guard may have too. Say which.
		if kv, gerr := g.Store.Get(ctx, g.key); gerr == nil && kv.Revision != guard {
			return 0, &StaleGrantError{Key: g.key, Guard: guard, Revision: kv.Revision}
		}
	}
	return rev, err
}

// Watch implements metastore.Store.
func (g *Guarded) Watch(ctx context.Context, prefix string, from int64) iter.Seq2[metastore.WatchEvent, error] {
	return g.Store.Watch(ctx, prefix, from)
}

// NewSession implements metastore.Store.
func (g *Guarded) NewSession(ctx context.Context, ttl time.Duration) (metastore.Session, error) {
	return g.Store.NewSession(ctx, ttl)
}
