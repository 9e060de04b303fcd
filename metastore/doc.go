// Package metastore is the contract of cutline's metadata store: a durable
// key-value store with compare-and-set by revision, atomic multi-key
// transactions, prefix listing, watches, and TTL sessions. Epoch records,
// chain counters, tenure records and grants all live in it. Production hosts
// use the etcd backend (package metastore/etcd); tests and examples use the
// in-memory one (package metastore/memstore). Both pass the conformance
// suite in package metastore/metastoretest, which is also how a host checks
// a backend of its own.
//
// # Revisions and compare-and-set
//
// Every write is stamped with the store's revision, a number that only
// grows. KV.Revision is the revision of a key's last write and is what a CAS
// compares; KV.CreateRevision is the revision at which the key was created
// (a deleted and recreated key gets a new one). The CAS primitive is
//
//	rev, err := metastore.Put(ctx, st, key, value, expect)
//
// where expect is the revision read earlier, or 0 for "the key must not
// exist". A lost CAS returns a *ConflictError (errors.Is(err, ErrConflict))
// that carries the key's current revision (0 if it is absent), and writes
// nothing. Delete removes a key under the same condition. The usual loop is:
// Get, decide, Put with the revision read; on ErrConflict read again.
//
// # Transactions
//
// Store.Txn applies a Txn atomically: when every Compare holds, every Op is
// applied at one new revision; otherwise nothing is applied and the
// *ConflictError names the first compare that failed. A Txn may not hold two
// ops on one key (ErrInvalidKey). Each package that keeps records here
// lists the transactions it makes beside its keys (see "Key layout").
//
// # Sessions
//
// NewSession starts a lease with a TTL that the backend keeps alive in the
// background. An Op with Session set binds its key to the session: the key
// vanishes when the session ends, which is how liveness records such as a
// star's registry entry (package lease) disappear with their owner.
// Session.Done is closed when the session has ended (expired, revoked,
// closed, or its keep-alives failed for a whole TTL); from then on it binds
// nothing (ErrSessionExpired) and the holder must stop acting on anything
// the session guarded. Close revokes the session and deletes its keys at
// once.
//
// # Listing
//
// List(ctx, prefix) returns the keys under prefix in key order and the
// revision they were read at, as one snapshot: exactly the keys and values
// under prefix at that revision, never a mix of two moments, and the
// revision is at least that of every write that completed before the call.
// A large prefix may be read in several requests (etcd: pages of
// Options.ListPageSize keys, all at the first page's revision). Stores
// discard old history (etcd compacts on a schedule), and a compaction may
// pass that revision before the last page; List then starts over at the
// current revision, so it never fails with ErrCompacted. Only if
// compactions overtake it several times in a row does it give up, with
// ErrUnavailable; a later List may succeed.
//
// # Watches
//
// Watch(ctx, prefix, from) yields the changes under prefix with revision ≥
// from in revision order (ops of one txn share a revision), first the
// history, then live changes. from = 0 means the changes after the watch
// started. A watch ends when ctx ends (it then yields ctx's error once),
// when the store cannot serve it any more (ErrUnavailable: resume from the
// last revision seen plus one) or when from was compacted away
// (ErrCompacted). After ErrCompacted the changes in between are lost: read
// the current state with List, which a compaction does not fail, and watch
// from the revision it returned plus one; List's snapshot and that watch
// together miss no change and show none twice. Should that watch meet
// ErrCompacted too (another compaction came first), do the same again.
//
// # Errors and unknown outcomes
//
// Backends classify every failure into the sentinels: ErrNotFound,
// ErrConflict (*ConflictError), ErrUnavailable, ErrSessionExpired,
// ErrInvalidKey, ErrCompacted (from Watch only), or the caller's context
// error. A backend's own final errors for misconfiguration (the etcd
// backend's ErrNotEtcd) match none of them. ErrNotFound and ErrConflict are
// answers from the store. ErrUnavailable is not: the store did not answer (a
// timeout, a lost leader, a broken connection), and a write that returns it
// may or may not have been applied, now or a little later. Callers must
// never read it as "absent" or "lost"; they re-read the key and decide from
// what they find, or retry a write whose condition makes it idempotent (a
// CAS on the revision they read cannot apply twice). The same holds for a
// write cut short by the caller's context.
//
// # Key layout
//
// Keys are opaque strings (ValidateKey: non-empty, at most 1024 bytes, no
// control characters). A backend may keep them all under a root of its
// own, which it strips from every key it returns (for etcd, Options.Root,
// "/cutline/" by default). This package writes no key. Each package that
// keeps records in the store documents its keys, their records and the
// transactions that write them in its "Metastore keys" section, below a
// root prefix the host chooses: package epoch (epoch.Options.Root), settle
// (the root of settle.NewRefIndex), lease (lease.Config.Root) and
// authority (the root of an authority Election). Package cutline
// gathers them in one map.
//
// # Versioned records
//
// Values are JSON records that an operator can read with etcdctl. Each embeds
// a Header naming its Kind and major Format. EncodeRecord writes one;
// DecodeRecord checks the kind and refuses a format newer than the reader
// knows, a value of another kind, and corrupt or empty values, with a
// *RecordError (errors.Is(err, ErrBadRecord)) that names the key. Minor
// additions are new optional fields, which older readers ignore.
//
//	type chain struct {
//		metastore.RecordHeader
//		Next int64 `json:"next"`
//	}
//	data, _ := metastore.EncodeRecord(chain{RecordHeader: metastore.RecordHeader{Kind: "chain", Format: 1}, Next: 1})
//	var c chain
//	err := metastore.DecodeRecord(key, data, "chain", 1, &c)
package metastore
