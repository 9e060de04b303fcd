package metastoretest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/metastore"
)

// collect ranges over seq until n events arrived, and fails on an error.
func (s *suite) collect(t *testing.T, cancel context.CancelFunc, seq func(func(metastore.WatchEvent, error) bool), n int) []metastore.WatchEvent {
	t.Helper()
	guard := time.AfterFunc(s.c.wait, cancel)
	defer guard.Stop()
	var got []metastore.WatchEvent
	for ev, err := range seq {
		require.NoError(t, err, "watch failed after %d events", len(got))
		got = append(got, ev)
		if len(got) == n {
			break
		}
	}
	require.Len(t, got, n)
	return got
}

func (s *suite) watchReplay(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	r1 := put(t, ctx, st, "w/a", "1", 0)
	put(t, ctx, st, "x/outside", "1", 0)
	r2 := put(t, ctx, st, "w/b", "1", 0)
	r3 := put(t, ctx, st, "w/a", "2", r1)
	require.NoError(t, metastore.Delete(ctx, st, "w/b", r2))
	_, err := st.Txn(ctx, metastore.Txn{Then: []metastore.Op{{Key: "w/c", Value: []byte("1")}, {Key: "w/d", Value: []byte("1")}}})
	require.NoError(t, err)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := s.collect(t, cancel, st.Watch(wctx, "w/", r1), 6)
	want := []struct {
		typ metastore.EventType
		key string
		val string
	}{
		{metastore.EventPut, "w/a", "1"},
		{metastore.EventPut, "w/b", "1"},
		{metastore.EventPut, "w/a", "2"},
		{metastore.EventDelete, "w/b", ""},
		{metastore.EventPut, "w/c", "1"},
		{metastore.EventPut, "w/d", "1"},
	}
	var prev int64
	for i, ev := range events {
		assert.Equal(t, want[i].typ, ev.Type, "event %d", i)
		assert.Equal(t, want[i].key, ev.KV.Key, "event %d", i)
		assert.Equal(t, want[i].val, string(ev.KV.Value), "event %d", i)
		assert.GreaterOrEqual(t, ev.KV.Revision, prev, "events come in revision order")
		prev = ev.KV.Revision
	}
	assert.Equal(t, r1, events[0].KV.Revision)
	assert.Equal(t, r3, events[2].KV.Revision)
	assert.Equal(t, r1, events[2].KV.CreateRevision)
	assert.Equal(t, events[4].KV.Revision, events[5].KV.Revision, "ops of one txn share a revision")

	// A watch from a later revision sees only the later events, then live
	// ones.
	wctx2, cancel2 := context.WithCancel(ctx)
	defer cancel2()
	done := make(chan []metastore.WatchEvent, 1)
	go func() {
		var got []metastore.WatchEvent
		for ev, err := range st.Watch(wctx2, "w/", r3) {
			if err != nil {
				break
			}
			got = append(got, ev)
			if len(got) == 5 {
				break
			}
		}
		done <- got
	}()
	rLive := put(t, ctx, st, "w/e", "live", 0)
	var got []metastore.WatchEvent
	select {
	case got = <-done:
	case <-time.After(s.c.wait):
		cancel2()
		got = <-done
	}
	require.Len(t, got, 5)
	assert.Equal(t, "w/a", got[0].KV.Key)
	assert.Equal(t, r3, got[0].KV.Revision)
	assert.Equal(t, metastore.EventDelete, got[1].Type)
	assert.Equal(t, "w/e", got[4].KV.Key)
	assert.Equal(t, rLive, got[4].KV.Revision)
}

// watchFromNow: a watch from 0 sees only changes made after it started; the
// writer keeps writing until the watcher reports an event, since the moment
// a watch is established is not observable from outside.
func (s *suite) watchFromNow(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	before := put(t, ctx, st, "n/old", "x", 0)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		evs []metastore.WatchEvent
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		for ev, err := range st.Watch(wctx, "n/", 0) {
			if err != nil {
				r.err = err
				break
			}
			r.evs = append(r.evs, ev)
			if len(r.evs) == 3 {
				break
			}
		}
		done <- r
	}()
	deadline := time.After(s.c.wait)
	var r result
	rev := before
	for i := 0; ; i++ {
		select {
		case r = <-done:
		case <-deadline:
			cancel()
			r = <-done
		default:
			var err error
			rev, err = metastore.Put(ctx, st, "n/old", []byte(strconv.Itoa(i)), rev)
			require.NoError(t, err)
			continue
		}
		break
	}
	require.NoError(t, r.err)
	require.Len(t, r.evs, 3)
	prev := before
	for _, ev := range r.evs {
		assert.Greater(t, ev.KV.Revision, prev, "a watch from now sees no history and events in order")
		prev = ev.KV.Revision
	}
}

func (s *suite) watchCancel(t *testing.T) {
	ctx := s.ctx(t)
	st := s.newStore(t)
	wctx, cancel := context.WithCancel(ctx)
	type result struct {
		errs   []error
		events int
	}
	done := make(chan result, 1)
	started := make(chan struct{})
	go func() {
		var r result
		close(started)
		for ev, err := range st.Watch(wctx, "c/", 0) {
			if err != nil {
				r.errs = append(r.errs, err)
				continue // the iterator must stop by itself after the error
			}
			_ = ev
			r.events++
		}
		done <- r
	}()
	<-started
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(s.c.wait):
		t.Fatal("watch did not end after its context was canceled")
	}
	require.Len(t, r.errs, 1, "the context's error is yielded exactly once")
	assert.ErrorIs(t, r.errs[0], context.Canceled)
}

// watchCompactedThenList follows the advice for a watcher whose start
// revision was compacted away: the watch yields ErrCompacted once and ends;
// a List gives the current state and its revision; a watch from that
// revision plus one yields exactly the changes made after it.
func (s *suite) watchCompactedThenList(t *testing.T) {
	if s.c.compact == nil {
		t.Skip("no WithCompact hook")
	}
	ctx := s.ctx(t)
	st := s.newStore(t)
	r1 := put(t, ctx, st, "wc/a", "1", 0)
	put(t, ctx, st, "wc/b", "1", 0)
	r3 := put(t, ctx, st, "wc/a", "2", r1)
	s.c.compact(t, st)

	wctx, cancel := context.WithCancel(ctx)
	guard := time.AfterFunc(s.c.wait, cancel)
	var errs []error
	for ev, err := range st.Watch(wctx, "wc/", r1) {
		if err == nil {
			t.Errorf("a watch from the compacted revision %d yielded %v %s", r1, ev.Type, ev.KV.Key)
			continue
		}
		errs = append(errs, err)
	}
	guard.Stop()
	cancel()
	require.Len(t, errs, 1, "the watch ends with one error")
	require.ErrorIs(t, errs[0], metastore.ErrCompacted)
	assert.NotErrorIs(t, errs[0], metastore.ErrUnavailable)

	kvs, rev, err := st.List(ctx, "wc/")
	require.NoError(t, err)
	require.GreaterOrEqual(t, rev, r3)
	require.Len(t, kvs, 2)
	assert.Equal(t, "2", string(kvs[0].Value))
	r4 := put(t, ctx, st, "wc/c", "1", 0)
	wctx, cancel = context.WithCancel(ctx)
	defer cancel()
	events := s.collect(t, cancel, st.Watch(wctx, "wc/", rev+1), 1)
	assert.Equal(t, "wc/c", events[0].KV.Key, "the first change after the List's revision")
	assert.Equal(t, r4, events[0].KV.Revision)
}
