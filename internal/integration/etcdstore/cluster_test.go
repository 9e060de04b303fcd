package etcdstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
)

// casLog records the outcome of every CAS increment of one counter.
type casLog struct {
	mu        sync.Mutex
	successes int
	unknown   int
	conflicts int
	expected  map[int64]int // expected revision → successful CAS with it
	values    map[int]int   // value written → successful CAS writing it
	failures  []error
	progress  chan struct{} // one token per success, for the test's phases
}

func (l *casLog) record(expected int64, value int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.successes++
		l.expected[expected]++
		l.values[value]++
		select {
		case l.progress <- struct{}{}:
		default:
		}
	case errors.Is(err, metastore.ErrConflict):
		l.conflicts++
	case errors.Is(err, metastore.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		l.unknown++
	default:
		l.failures = append(l.failures, err)
	}
}

// TestEtcdClusterLeaderLoss increments one counter by CAS from several
// goroutines through the Store on a 3-member etcd cluster, crashes the
// leader in the middle of the run and restarts it later. A CAS that failed
// with ErrUnavailable may or may not have applied; a success must never be
// lost and no revision may be won twice:
//
//	successes ≤ final value ≤ successes + unknown outcomes
//	every expected revision and every written value belongs to at most one success
func TestEtcdClusterLeaderLoss(t *testing.T) {
	cluster := etcdtest.StartCluster(t, 3)
	cli := cluster.Client(t)
	st, err := etcd.New(cli, etcd.Options{Root: "/leaderloss/", RequestTimeout: 750 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	_, err = metastore.Put(ctx, st, "counter", []byte("0"), 0)
	require.NoError(t, err)

	log := &casLog{expected: map[int64]int{}, values: map[int]int{}, progress: make(chan struct{}, 1024)}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const workers, maxAttempts = 6, 400
	for range workers {
		wg.Go(func() {
			for range maxAttempts {
				select {
				case <-stop:
					return
				default:
				}
				kv, err := st.Get(ctx, "counter")
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					continue // a failed read decides nothing
				}
				n, err := strconv.Atoi(string(kv.Value))
				if err != nil {
					log.record(kv.Revision, 0, err)
					return
				}
				_, err = metastore.Put(ctx, st, "counter", []byte(strconv.Itoa(n+1)), kv.Revision)
				log.record(kv.Revision, n+1, err)
			}
		})
	}
	waitSuccesses := func(n int, phase string) {
		t.Helper()
		for range n {
			select {
			case <-log.progress:
			case <-ctx.Done():
				t.Errorf("%s: no progress: %v", phase, ctx.Err())
				return
			}
		}
	}

	waitSuccesses(30, "before the crash")
	leader := cluster.Leader(t, 20*time.Second)
	t.Logf("crashing leader %s", leader.Name)
	leader.Stop()
	newLeader := cluster.Leader(t, 20*time.Second)
	t.Logf("new leader %s", newLeader.Name)
	require.NotEqual(t, leader.Name, newLeader.Name)
	waitSuccesses(30, "without the old leader")
	leader.Restart(t)
	t.Logf("restarted %s", leader.Name)
	waitSuccesses(30, "after the restart")
	close(stop)
	wg.Wait()

	// Read the final value; the cluster is whole again, but a read may still
	// meet a member that is catching up.
	var final metastore.KV
	for attempt := 0; ; attempt++ {
		final, err = st.Get(ctx, "counter")
		if err == nil || !errors.Is(err, metastore.ErrUnavailable) || attempt == 20 {
			break
		}
	}
	require.NoError(t, err)
	value, err := strconv.Atoi(string(final.Value))
	require.NoError(t, err)

	log.mu.Lock()
	defer log.mu.Unlock()
	t.Logf("successes=%d conflicts=%d unknown=%d final=%d", log.successes, log.conflicts, log.unknown, value)
	require.Empty(t, log.failures, "only success, conflict and unavailable are allowed outcomes")
	assert.GreaterOrEqual(t, value, log.successes, "a successful CAS was lost")
	assert.LessOrEqual(t, value, log.successes+log.unknown, "more increments applied than attempted")
	for rev, n := range log.expected {
		assert.Equal(t, 1, n, "two CAS expecting revision %d both succeeded", rev)
	}
	for v, n := range log.values {
		assert.Equal(t, 1, n, "value %d was written by %d successful CAS", v, n)
	}
	assert.GreaterOrEqual(t, log.successes, 90)
}
