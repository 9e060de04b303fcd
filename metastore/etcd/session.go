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

// NewSession implements metastore.Store with an etcd lease. The TTL is
// rounded up to whole seconds, and etcd may raise it to its minimum (about
// 1.5 election timeouts); Session.TTL reports the granted value. The lease
// is kept alive by the client in the background; Done is closed when the
// keep-alives stop (the lease expired or was revoked, the client was closed,
// or no keep-alive got through for a whole TTL).
func (s *Store) NewSession(ctx context.Context, ttl time.Duration) (metastore.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("metastore: session TTL must be positive, got %v", ttl)
	}
	secs := int64(math.Ceil(ttl.Seconds()))
	cctx, done := s.call(ctx)
	grant, err := s.client.Grant(cctx, secs)
	done()
	if err != nil {
		return nil, s.fail(ctx, cctx, "new session", "", err)
	}
	kctx, stop := context.WithCancel(context.Background())
	ch, err := s.client.KeepAlive(kctx, grant.ID)
	if err != nil {
		stop()
		// Without keep-alives the lease would only linger until its TTL.
		rctx, done := s.call(context.WithoutCancel(ctx))
		_, _ = s.client.Revoke(rctx, grant.ID)
		done()
		return nil, classify(ctx, "new session", "", err)
	}
	sess := &session{
		s:       s,
		id:      grant.ID,
		ttl:     time.Duration(grant.TTL) * time.Second,
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
		stop:    stop,
	}
	go sess.keepAlive(ch)
	return sess, nil
}

type session struct {
	s       *Store
	id      clientv3.LeaseID
	ttl     time.Duration
	done    chan struct{} // closed when the keep-alives have stopped
	stopped chan struct{} // closed when keepAlive has returned
	stop    context.CancelFunc

	mu     sync.Mutex
	closed bool
}

var _ metastore.Session = (*session)(nil)

func (ss *session) ID() int64             { return int64(ss.id) }
func (ss *session) TTL() time.Duration    { return ss.ttl }
func (ss *session) Done() <-chan struct{} { return ss.done }

// keepAlive drains the client's keep-alive responses; the channel closes
// when the lease is gone or the keep-alives are stopped.
func (ss *session) keepAlive(ch <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(ss.stopped)
	for range ch {
	}
	ss.mu.Lock()
	closed := ss.closed
	ss.mu.Unlock()
	if !closed {
		ss.s.log.Warn("metastore session ended", slog.Int64("session", int64(ss.id)), slog.Duration("ttl", ss.ttl))
	}
	close(ss.done)
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
