// Package etcdstore holds the tests of metastore/etcd against embedded etcd:
// the metastore conformance suite on one member, with pages of 3 keys and
// compactions between pages (TestEtcdConformance), CAS increments through
// a leader crash on three members (TestEtcdClusterLeaderLoss), a List of
// 1,500 keys across a compaction and a List that gives up under endless
// compactions (TestEtcdListSurvivesCompaction,
// TestEtcdListGivesUpUnderCompactions), the errors of unreachable and
// wrong endpoints (TestEtcdUnreachableEndpoints), and the CAS rate of the
// Store against raw client transactions (BenchmarkEtcdCAS).
package etcdstore
