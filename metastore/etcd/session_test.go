package etcd

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fakeLease answers grants and keep-alives in memory; when stalled, a
// keep-alive hangs until its context ends, as on a silent network. It
// records when each keep-alive was answered.
type fakeLease struct {
	clientv3.Lease // other methods are not used

	mu       sync.Mutex
	stalled  bool
	expired  bool
	answered []time.Time
}

func (f *fakeLease) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	return &clientv3.LeaseGrantResponse{ID: 7, TTL: ttl}, nil
}

func (f *fakeLease) Close() error { return nil }

func (f *fakeLease) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	return &clientv3.LeaseRevokeResponse{}, nil
}

func (f *fakeLease) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	f.mu.Lock()
	stalled, expired := f.stalled, f.expired
	if !stalled && !expired {
		f.answered = append(f.answered, time.Now())
	}
	f.mu.Unlock()
	switch {
	case expired:
		return nil, rpctypes.ErrLeaseNotFound
	case stalled:
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &clientv3.LeaseKeepAliveResponse{ID: id, TTL: 2}, nil
}

func (f *fakeLease) set(stalled, expired bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stalled, f.expired = stalled, expired
}

func (f *fakeLease) last() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.answered[len(f.answered)-1]
}

func fakeSession(t *testing.T) (*fakeLease, *session) {
	cli := clientv3.NewCtxClient(t.Context())
	t.Cleanup(func() { _ = cli.Close() })
	fl := &fakeLease{}
	cli.Lease = fl
	st, err := New(cli, Options{})
	require.NoError(t, err)
	sess, err := st.NewSession(t.Context(), 2*time.Second)
	require.NoError(t, err)
	return fl, sess.(*session)
}

// TestSessionDeadline: a session renewed every TTL/3 lives across many
// TTLs; once keep-alives hang, Done closes TTL − TTL/10 after the sending
// of the last answered one, and stays closed.
func TestSessionDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fl, sess := fakeSession(t)
		time.Sleep(10 * sess.TTL())
		synctest.Wait()
		select {
		case <-sess.Done():
			t.Fatal("healthy session ended")
		default:
		}
		require.GreaterOrEqual(t, len(fl.answered), 25)

		fl.set(true, false)
		<-sess.Done()
		require.Equal(t, life(sess.TTL()), time.Since(fl.last()))
		require.Equal(t, 1800*time.Millisecond, life(sess.TTL()))
		fl.set(false, false) // the network heals: the session stays ended
		time.Sleep(sess.TTL())
		synctest.Wait()
		require.Error(t, sess.ctx.Err())
		require.NoError(t, sess.Close(context.Background()))
	})
}

// TestSessionLeaseGone: etcd saying the lease is gone ends the session at
// once.
func TestSessionLeaseGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fl, sess := fakeSession(t)
		time.Sleep(sess.TTL())
		fl.set(false, true)
		start := time.Now()
		<-sess.Done()
		require.LessOrEqual(t, time.Since(start), sess.TTL()/sessionSendDiv)
		require.NoError(t, sess.Close(context.Background()))
	})
}

// TestSessionCloseStopsKeepAlives: Close ends the keep-alive goroutine even
// while a keep-alive hangs, and Done is closed when it returns.
func TestSessionCloseStopsKeepAlives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fl, sess := fakeSession(t)
		fl.set(true, false)
		time.Sleep(sess.TTL() / 2)
		synctest.Wait()
		require.NoError(t, sess.Close(context.Background()))
		select {
		case <-sess.Done():
		default:
			t.Fatal("Done open after Close")
		}
		require.NoError(t, sess.Close(context.Background()))
	})
}
