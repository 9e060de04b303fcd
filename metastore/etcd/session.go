package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline/metastore"
)

// A session's keep-alive deadline. etcd renews a lease when a keep-alive
// request reaches its leader, which is after the client sent it, so the
// server's expiry is at least (send time of the last answered keep-alive) +
// TTL. The session measures from that send time (from the start of the
// grant for the first one) on the store's clock and ends itself when no
// keep-alive has been answered for TTL − TTL/sessionMarginDiv. The margin
// (a tenth of the TTL: 200 ms for etcd's usual 2 s minimum) covers what the
// measurement does not: our timer and goroutine firing late under load, and
// the clock rates of client and server differing. Keep-alives are sent
// every TTL/sessionSendDiv, so a healthy connection renews two or three
// times within every deadline; after a failure the session retries every
// TTL/sessionRetryDiv until the deadline passes.
const (
	sessionMarginDiv = 10
	sessionSendDiv   = 3
	sessionRetryDiv  = 20
)

// NewSession implements metastore.Store with an etcd lease. The TTL is
// rounded up to whole seconds, and etcd may raise it to its minimum (about
// 1.5 election timeouts); Session.TTL reports the granted value. The store
// keeps the lease alive itself, with one keep-alive every TTL/3. Done is
// closed when the lease is gone (it expired or was revoked, or Close was
// called) or when no keep-alive has been answered for TTL − TTL/10,
// measured on the store's clock from the sending of the last answered one
// (or of the grant): by then etcd has not yet expired the lease, so the
// holder learns of the loss no later than anyone watching its keys. A
// session that ended never comes back.
func (s *Store) NewSession(ctx context.Context, ttl time.Duration) (metastore.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("metastore: session TTL must be positive, got %v", ttl)
	}
	secs := int64(math.Ceil(ttl.Seconds()))
	start := s.clock.Now()
	cctx, done := s.call(ctx)
	grant, err := s.client.Grant(cctx, secs)
	done()
	if err != nil {
		return nil, s.fail(ctx, cctx, "new session", "", err)
	}
	kctx, stop := context.WithCancel(context.Background())
	sess := &session{
		s:       s,
		id:      grant.ID,
		ttl:     time.Duration(grant.TTL) * time.Second,
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
		ctx:     kctx,
		stop:    stop,
	}
	go sess.keepAlive(start)
	return sess, nil
}

type session struct {
	s       *Store
	id      clientv3.LeaseID
	ttl     time.Duration
	done    chan struct{} // closed when the session has ended
	stopped chan struct{} // closed when keepAlive has returned
	ctx     context.Context
	stop    context.CancelFunc // ends ctx: Close, or the session ended

	mu     sync.Mutex
	closed bool
}

var _ metastore.Session = (*session)(nil)

func (ss *session) ID() int64             { return int64(ss.id) }
func (ss *session) TTL() time.Duration    { return ss.ttl }
func (ss *session) Done() <-chan struct{} { return ss.done }

// life is how long a keep-alive answered with ttl seconds keeps the session
// alive, counted from its sending.
func life(ttl time.Duration) time.Duration { return ttl - ttl/sessionMarginDiv }

// keepAlive renews the lease until Close, until etcd says it is gone, or
// until the deadline passes without an answered keep-alive. renewed is the
// time the grant was sent.
func (ss *session) keepAlive(renewed time.Time) {
	defer close(ss.stopped)
	defer close(ss.done)
	defer ss.stop()
	clk := ss.s.clock
	ttl := ss.ttl
	deadline := renewed.Add(life(ttl))
	next := renewed.Add(ttl / sessionSendDiv)
	for {
		if !ss.sleepUntil(next) {
			return // closed
		}
		sent := clk.Now()
		if !sent.Before(deadline) {
			ss.lost(fmt.Sprintf("no keep-alive answered for %v", sent.Sub(renewed)))
			return
		}
		got, err := ss.renew(min(deadline.Sub(sent), ttl/sessionSendDiv))
		switch {
		case ss.ctx.Err() != nil:
			return // closed
		case err == nil:
			ttl = min(ss.ttl, got)
			renewed, deadline = sent, sent.Add(life(ttl))
			next = sent.Add(ttl / sessionSendDiv)
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			ss.lost("lease not found")
			return
		default:
			next = clk.Now().Add(ttl / sessionRetryDiv)
			if next.After(deadline) {
				next = deadline
			}
		}
	}
}

// renew sends one keep-alive and returns the TTL etcd renewed the lease
// for. It gives up after timeout.
func (ss *session) renew(timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ss.ctx)
	t := ss.s.clock.AfterFunc(timeout, cancel)
	defer func() {
		t.Stop()
		cancel()
	}()
	resp, err := ss.s.client.KeepAliveOnce(ctx, ss.id)
	if err != nil {
		return 0, err
	}
	if resp.TTL <= 0 {
		return 0, rpctypes.ErrLeaseNotFound
	}
	return time.Duration(resp.TTL) * time.Second, nil
}

// sleepUntil waits on the store's clock until t; it reports false when the
// session was closed first.
func (ss *session) sleepUntil(t time.Time) bool {
	d := t.Sub(ss.s.clock.Now())
	if d <= 0 {
		return ss.ctx.Err() == nil
	}
	timer := ss.s.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ss.ctx.Done():
		return false
	case <-timer.C():
		return true
	}
}

func (ss *session) lost(reason string) {
	ss.s.log.Warn("metastore session ended", slog.Int64("session", int64(ss.id)),
		slog.Duration("ttl", ss.ttl), slog.String("reason", reason))
}

// Close stops the keep-alives and revokes the lease, which deletes the
// bound keys. Done is closed when Close returns, even when the revocation
// did not get through (the error then matches metastore.ErrUnavailable and
// the keys vanish when the TTL runs out). A second Close returns nil.
func (ss *session) Close(ctx context.Context) error {
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return nil
	}
	ss.closed = true
	ss.mu.Unlock()
	ss.stop()
	<-ss.stopped
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("metastore close session %d: %w", ss.id, err)
	}
	cctx, done := ss.s.call(ctx)
	defer done()
	_, err := ss.s.client.Revoke(cctx, ss.id)
	if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return ss.s.fail(ctx, cctx, "close session", fmt.Sprint(int64(ss.id)), err)
}
