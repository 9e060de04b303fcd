// Package memstore is an in-memory metastore.Store with the semantics of the etcd
// backend: one global revision, CAS by revision, atomic txns (two ops on one
// key refused), watches from a revision with a bounded, compacted history,
// and TTL sessions on an injected clock, so that expiry is tested without
// sleeping. It passes the metastoretest conformance suite.
//
// Sessions are kept alive implicitly (there is no network to lose). The
// test knobs model what a real deployment does:
//
//   - Suspend stops a session's keep-alives: unless Resume comes first, the
//     session expires one TTL later on the store's clock (advance a
//     clock.Fake to get there) and its bound keys are deleted.
//   - Expire ends a session at once, as if its TTL had run out.
//   - Partition makes the store unreachable: every call fails with
//     metastore.ErrUnavailable, running watches end with it, and every live
//     session is suspended; Heal undoes it and resumes the sessions that
//     have not expired meanwhile.
//
// Options.HistoryLimit bounds the history kept for watches from an old
// revision; a watch from before it yields metastore.ErrCompacted. Compact
// discards history up to a revision on demand, as an etcd compaction does.
// List reads a prefix in one step, so no compaction affects it.
package memstore
