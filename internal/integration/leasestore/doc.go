// Package leasestore runs package lease's scenario suite (leasetest) on a
// real, embedded etcd server: every departure kind, every branch of the
// open gate, crashes, a replayed mark, racing opens, session loss and
// limbo, each checked with the guarantee checker.
package leasestore
