package metastoretest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/metastore"
)

// Option adjusts Run.
type Option func(*config)

type config struct {
	expire       func(t *testing.T, s metastore.Store, sess metastore.Session)
	disconnect   func(t *testing.T, s metastore.Store)
	compact      func(t *testing.T, s metastore.Store)
	pageSize     int
	betweenPages func(t *testing.T, s metastore.Store, f func())
	ttl          time.Duration
	wait         time.Duration
}

// WithExpire gives the suite a way to end a session as if its TTL had run
// out (mem: Store.Expire; etcd: revoke the lease with another client).
// Without it the expiry subtests are skipped.
func WithExpire(f func(t *testing.T, s metastore.Store, sess metastore.Session)) Option {
	return func(c *config) { c.expire = f }
}

// WithDisconnect gives the suite a way to make a store's backend
// unreachable for the rest of a subtest (mem: Store.Partition; etcd: cut
// the connection). Without it the unavailability subtest is skipped.
func WithDisconnect(f func(t *testing.T, s metastore.Store)) Option {
	return func(c *config) { c.disconnect = f }
}

// WithCompact gives the suite a way to discard a store's history up to its
// current revision, as etcd's compaction does (mem: Store.Compact at
// Store.Revision; etcd: Compact through another client). A watch from an
// older revision must then yield ErrCompacted. Without it the compaction
// subtests are skipped.
func WithCompact(f func(t *testing.T, s metastore.Store)) Option {
	return func(c *config) { c.compact = f }
}

// WithBetweenListPages gives the suite a way into the middle of a List:
// arm arranges that f runs once, during the next List on s that reads more
// than one page, after its first page and before its second (etcd: a
// wrapper of the client's KV that runs f when a range response says More).
// pageSize is how many keys one page of the store's List holds; the suite
// lists more than two pages. A backend that reads a List in one step (memstore)
// passes any positive pageSize and runs f when the next List begins.
// Without it the subtests that list across pages are skipped.
func WithBetweenListPages(pageSize int, arm func(t *testing.T, s metastore.Store, f func())) Option {
	return func(c *config) {
		c.pageSize = pageSize
		c.betweenPages = arm
	}
}

// WithSessionTTL sets the TTL of the sessions the suite creates (default
// 5 s). The suite never waits for a TTL to run out.
func WithSessionTTL(d time.Duration) Option {
	return func(c *config) { c.ttl = d }
}

// WithWait bounds how long the suite waits for something that must happen
// (a watch event, a session's Done) before it fails (default 20 s). It is a
// guard against hangs, never a delay.
func WithWait(d time.Duration) Option {
	return func(c *config) { c.wait = d }
}

// Run runs the conformance suite. newStore is called once per subtest and
// must return an empty store (or one whose keyspace is private to the
// subtest, such as a fresh root prefix on a shared etcd); the store is not
// closed by the suite.
func Run(t *testing.T, newStore func(t *testing.T) metastore.Store, opts ...Option) {
	c := &config{ttl: 5 * time.Second, wait: 20 * time.Second}
	for _, o := range opts {
		o(c)
	}
	if c.betweenPages != nil && c.pageSize <= 0 {
		t.Fatalf("metastoretest: WithBetweenListPages: page size %d is not positive", c.pageSize)
	}
	s := &suite{c: c, newStore: newStore}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"GetMissing", s.getMissing},
		{"PutCreates", s.putCreates},
		{"PutCreateTwiceConflicts", s.putCreateTwice},
		{"PutStaleRevisionConflicts", s.putStale},
		{"PutMissingWithRevisionConflicts", s.putMissingWithRevision},
		{"DeleteByRevision", s.deleteByRevision},
		{"InvalidKeys", s.invalidKeys},
		{"ValuesAreCopied", s.valuesAreCopied},
		{"TxnAllOrNothing", s.txnAllOrNothing},
		{"TxnReportsFirstFailingCompare", s.txnFirstFailing},
		{"TxnCompareOnly", s.txnCompareOnly},
		{"ConcurrentCASCounter", s.casCounter},
		{"ConcurrentTransfers", s.transfers},
		{"ListPrefixInKeyOrder", s.listPrefix},
		{"Floor", s.floor},
		{"ListKeys", s.listKeys},
		{"ReadMany", s.readMany},
		{"RevisionsGrow", s.revisionsGrow},
		{"WatchReplaysFromRevision", s.watchReplay},
		{"WatchFromNow", s.watchFromNow},
		{"WatchEndsOnCancel", s.watchCancel},
		{"SessionBoundKeysVanishOnClose", s.sessionClose},
		{"SessionExpiry", s.sessionExpiry},
		{"SessionExpiredTxnAppliesNothing", s.sessionExpiredTxn},
		{"CanceledContext", s.canceledContext},
		{"UnavailableIsNeverAnAnswer", s.unavailable},
		{"Records", s.records},
		{"ListIsOneSnapshot", func(t *testing.T) { s.listAcrossPages(t, false) }},
		{"ListSurvivesCompaction", func(t *testing.T) { s.listAcrossPages(t, true) }},
		{"WatchCompactedThenList", s.watchCompactedThenList},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}

type suite struct {
	c        *config
	newStore func(t *testing.T) metastore.Store
}

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*s.c.wait)
	t.Cleanup(cancel)
	return ctx
}

func put(t *testing.T, ctx context.Context, st metastore.Store, key, value string, expect int64) int64 {
	t.Helper()
	rev, err := metastore.Put(ctx, st, key, []byte(value), expect)
	require.NoError(t, err, "put %q expecting revision %d", key, expect)
	require.Positive(t, rev)
	return rev
}

func requireConflict(t *testing.T, err error, key string, expected, current int64) {
	t.Helper()
	require.ErrorIs(t, err, metastore.ErrConflict)
	var ce *metastore.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, key, ce.Key, "conflict key")
	assert.Equal(t, expected, ce.Expected, "conflict expected revision")
	assert.Equal(t, current, ce.Revision, "conflict current revision")
}
