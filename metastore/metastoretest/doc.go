// Package metastoretest is the conformance suite of metastore.Store. Every
// backend runs it, and a host can run it on a backend of its own:
//
//	func TestConformance(t *testing.T) {
//		metastoretest.Run(t,
//			func(t *testing.T) metastore.Store { return memstore.New(memstore.Options{}) },
//			metastoretest.WithExpire(func(t *testing.T, s metastore.Store, sess metastore.Session) {
//				s.(*memstore.Store).Expire(sess)
//			}),
//			metastoretest.WithDisconnect(func(t *testing.T, s metastore.Store) {
//				s.(*memstore.Store).Partition()
//			}),
//			metastoretest.WithCompact(func(t *testing.T, s metastore.Store) {
//				st := s.(*memstore.Store)
//				st.Compact(st.Revision())
//			}),
//		)
//	}
//
// The named subtests check get/put/delete by revision (create with 0, the
// conflict on a second create and on a stale revision, with the current
// revision in the *metastore.ConflictError), invalid keys, that byte slices
// are copied, txn atomicity and the first failing compare, a counter
// incremented by CAS from 16 goroutines (no lost update, no revision won
// twice), concurrent transfers whose sum is invariant in every List
// snapshot, list order, growing revisions, watch replay and live order,
// prefix filtering, delete events, the end of a watch on cancel, sessions
// (bound keys vanish on Close and on expiry, Done fires, an expired session
// binds nothing and a txn using it applies nothing), canceled contexts, the
// classification of an unreachable store (ErrUnavailable or the deadline,
// never an answer such as ErrNotFound or ErrConflict), the versioned
// record helpers, a List that spans pages while the keys change (one
// snapshot at its revision, never a mix) and while the store's history is
// compacted (it still succeeds, never with ErrCompacted), and a watcher
// that meets ErrCompacted and recovers with List and a watch from its
// revision plus one.
//
// Session expiry, unreachability, compaction and the middle of a List need
// a backend-specific trigger, given with WithExpire, WithDisconnect,
// WithCompact and WithBetweenListPages; the subtests that need a missing
// trigger are skipped. newStore is called once per subtest and must return
// a store whose keyspace is empty and private to that subtest (a fresh
// in-memory store, or a fresh root prefix on a shared etcd).
package metastoretest
