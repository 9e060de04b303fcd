// Package indexstore runs the paged ref index (settle.RefIndex) and the
// bulk open (lease.Star.OpenMany) on embedded etcd: floors and batched
// reads through etcd's ranged reads and read-only transactions, covers
// split over etcd's 128-operation transactions, retention and migration.
package indexstore
