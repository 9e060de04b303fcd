package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/objstore"
)

// The demonstration's network. Every party runs in one process, and each
// broker node reaches the controller, its peers, the metastore and the
// zones through links the demonstration cuts, as a partition would, and
// heals again. None of this is part of a broker: it stands in for the
// network between processes.

// errCutOff is what a request across a cut link gets.
var errCutOff = errors.New("demo: cut off from the network")

// part names what of a node's network a cut covers.
type part int

const (
	partControl part = 1 << iota // the control channel to the controller
	partPeers                    // the direct health links with the peers
	partStore                    // the metastore (calls and session keep-alives)
)

// network is the set of cut links, by node.
type network struct {
	mu  sync.Mutex
	cut map[string]part
}

func (n *network) isCut(node string, p part) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut[node]&p != 0
}

func (n *network) set(node string, p part, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut == nil {
		n.cut = map[string]part{}
	}
	if cut {
		n.cut[node] |= p
	} else {
		n.cut[node] &^= p
	}
}

// ctrlConn is a node's control channel through the network: while the
// node is cut off, its events fail and the controller's messages to it
// are lost, while the connection stays open, as in a partition.
type ctrlConn struct {
	authority.Conn
	cut  func() bool
	msgs chan authority.Msg
	done chan struct{}
	once sync.Once
}

func newCtrlConn(inner authority.Conn, cut func() bool) *ctrlConn {
	c := &ctrlConn{Conn: inner, cut: cut, msgs: make(chan authority.Msg, authority.LocalBuffer), done: make(chan struct{})}
	go c.forward()
	return c
}

// forward passes the controller's messages on, except while cut; it ends
// when the inner connection closes.
func (c *ctrlConn) forward() {
	defer close(c.msgs)
	for m := range c.Conn.Msgs() {
		if c.cut() {
			continue
		}
		select {
		case c.msgs <- m:
		case <-c.done:
			return
		}
	}
}

func (c *ctrlConn) Send(ctx context.Context, ev authority.Event) error {
	if c.cut() {
		return errCutOff
	}
	return c.Conn.Send(ctx, ev)
}

func (c *ctrlConn) Msgs() <-chan authority.Msg { return c.msgs }

func (c *ctrlConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

// storeLink is a node's path to the metastore: while the node is cut off,
// every call fails as unavailable (metastore.ErrUnavailable) and its
// sessions get no keep-alives (suspend), so that the store expires them
// one TTL later and their bound keys (a stream's lease) go.
type storeLink struct {
	metastore.Store
	cut     func() bool
	suspend func(metastore.Session)

	mu       sync.Mutex
	sessions []metastore.Session
}

func (s *storeLink) check() error {
	if s.cut() {
		return metastore.Unavailable(errCutOff)
	}
	return nil
}

// cutSessions stops the keep-alives of every session opened through the
// link.
func (s *storeLink) cutSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range s.sessions {
		s.suspend(sess)
	}
}

func (s *storeLink) Get(ctx context.Context, key string) (metastore.KV, error) {
	if err := s.check(); err != nil {
		return metastore.KV{}, err
	}
	return s.Store.Get(ctx, key)
}

func (s *storeLink) List(ctx context.Context, prefix string) ([]metastore.KV, int64, error) {
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	return s.Store.List(ctx, prefix)
}

func (s *storeLink) Txn(ctx context.Context, t metastore.Txn) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	return s.Store.Txn(ctx, t)
}

func (s *storeLink) Watch(ctx context.Context, prefix string, from int64) iter.Seq2[metastore.WatchEvent, error] {
	if err := s.check(); err != nil {
		return func(yield func(metastore.WatchEvent, error) bool) { yield(metastore.WatchEvent{}, err) }
	}
	return s.Store.Watch(ctx, prefix, from)
}

func (s *storeLink) NewSession(ctx context.Context, ttl time.Duration) (metastore.Session, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	sess, err := s.Store.NewSession(ctx, ttl)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions = append(s.sessions, sess)
	return linkSession{sess, s}, nil
}

// linkSession is a session opened through a storeLink: while cut, its
// revocation cannot reach the store.
type linkSession struct {
	metastore.Session
	link *storeLink
}

func (s linkSession) Close(ctx context.Context) error {
	if err := s.link.check(); err != nil {
		return err
	}
	return s.Session.Close(ctx)
}

// zoneLink is a node's path to one zone. It passes every request through
// until hold is called; from then on a request that hold matches gets no
// answer until its caller's context ends, and a PUT (Create) among them
// is kept, to land in the zone when the link is released, as a zombie's
// PUT that was held up in the network. Its caller never learns that it
// landed.
//
// A PUT the link passes on completes whatever its caller does (within
// the run), like a request already sent: whether a zone got a copy does
// not depend on how far it had come when its writer gave up. A PUT that
// gets no answer is never retried, so the link keeps exactly one PUT per
// key it holds, whatever the timing.
type zoneLink struct {
	objstore.Bucket
	run context.Context // bounds the PUTs passed on and landed

	mu       sync.Mutex
	holds    func(op, key string) bool // nil: pass everything
	kept     []keptPut                 // in the order they were sent
	seen     map[string]bool           // keys created or kept since hold
	changed  chan struct{}             // closed and replaced when seen grows
	released chan struct{}             // closed by release: held requests fail
}

type keptPut struct {
	key  string
	data []byte
}

var _ objstore.Bucket = (*zoneLink)(nil)

func newZoneLink(run context.Context, zone objstore.Bucket) *zoneLink {
	return &zoneLink{Bucket: zone, run: run, changed: make(chan struct{})}
}

// hold makes the link hold back every later request match accepts.
func (l *zoneLink) hold(match func(op, key string) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holds, l.seen, l.released = match, map[string]bool{}, make(chan struct{})
}

// see records a key created or kept while holding.
func (l *zoneLink) see(key string) {
	if l.seen == nil {
		return
	}
	l.seen[key] = true
	close(l.changed)
	l.changed = make(chan struct{})
}

// intercept holds the request back if hold matches it: it keeps a PUT,
// and returns only when ctx ends or the link is released, with an error.
func (l *zoneLink) intercept(ctx context.Context, op, key string, data []byte) (bool, error) {
	l.mu.Lock()
	if l.holds == nil || !l.holds(op, key) {
		l.mu.Unlock()
		return false, nil
	}
	if op == "create" {
		l.kept = append(l.kept, keptPut{key: key, data: bytes.Clone(data)})
		l.see(key)
	}
	released := l.released
	l.mu.Unlock()
	select {
	case <-ctx.Done():
		return true, &objstore.OpError{Op: op, Bucket: l.Name(), Key: key, Err: objstore.ContextEnded(ctx.Err(), errCutOff)}
	case <-released:
		return true, &objstore.OpError{Op: op, Bucket: l.Name(), Key: key, Err: objstore.Unavailable(errCutOff)}
	}
}

func (l *zoneLink) Create(ctx context.Context, key string, data []byte) error {
	if held, err := l.intercept(ctx, "create", key, data); held {
		return err
	}
	err := l.Bucket.Create(l.run, key, data)
	if err == nil {
		l.mu.Lock()
		l.see(key)
		l.mu.Unlock()
	}
	return err
}

func (l *zoneLink) Get(ctx context.Context, key string) ([]byte, error) {
	if held, err := l.intercept(ctx, "get", key, nil); held {
		return nil, err
	}
	return l.Bucket.Get(ctx, key)
}

func (l *zoneLink) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if held, err := l.intercept(ctx, "get_range", key, nil); held {
		return nil, err
	}
	return l.Bucket.GetRange(ctx, key, offset, length)
}

func (l *zoneLink) Delete(ctx context.Context, key string) error {
	if held, err := l.intercept(ctx, "delete", key, nil); held {
		return err
	}
	return l.Bucket.Delete(ctx, key)
}

func (l *zoneLink) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	if held, err := l.intercept(ctx, "list", prefix, nil); held {
		return nil, err
	}
	return l.Bucket.List(ctx, prefix, startAfter, limit)
}

// waitSeen blocks until every key was created or kept since hold, or ctx
// ends.
func (l *zoneLink) waitSeen(ctx context.Context, keys []string) error {
	done := 0 // keys[:done] are seen; a seen key stays seen
	for {
		l.mu.Lock()
		for done < len(keys) && l.seen[keys[done]] {
			done++
		}
		ch := l.changed
		l.mu.Unlock()
		if done == len(keys) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%s: %d of %d requests not sent yet: %w", l.Name(), len(keys)-done, len(keys), ctx.Err())
		}
	}
}

// release ends the hold: the requests still held fail, and the kept PUTs
// land in the zone in the order they were sent. It returns how many
// created their object and how many found their key taken
// (objstore.ErrExists); any other failure ends it with the error.
func (l *zoneLink) release(ctx context.Context) (created, refused int, err error) {
	l.mu.Lock()
	kept := l.kept
	if l.released != nil {
		close(l.released)
	}
	l.holds, l.kept, l.seen, l.released = nil, nil, nil, nil
	l.mu.Unlock()
	for _, p := range kept {
		switch err := l.Bucket.Create(ctx, p.key, p.data); {
		case err == nil:
			created++
		case errors.Is(err, objstore.ErrExists):
			refused++
		default:
			return created, refused, fmt.Errorf("land a held-back PUT in %s: %w", l.Name(), err)
		}
	}
	return created, refused, nil
}
