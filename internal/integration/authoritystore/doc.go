// Package authoritystore runs package authority's scenario suite
// (authoritytest) on a real, embedded etcd server, and a planned handoff
// across the restart of the etcd leader.
package authoritystore
