// Package etcdstore holds the tests of metastore/etcd against embedded etcd:
// the metastore conformance suite on one member (TestEtcdConformance),
// CAS increments through a leader crash on three members
// (TestEtcdClusterLeaderLoss), and the CAS rate of the Store against raw
// client transactions (BenchmarkEtcdCAS).
package etcdstore
