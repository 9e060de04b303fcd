package etcdstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline/internal/integration/etcdtest"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
)

// BenchmarkEtcdCAS measures compare-and-put round trips on one embedded
// etcd member, sequentially, through the Store (metastore.Put with the
// expected revision) and through raw clientv3 transactions doing the same
// compare and put, in one run. It reports both rates and their ratio
// (store/raw); ns/op covers one CAS of each kind.
func BenchmarkEtcdCAS(b *testing.B) {
	cluster := etcdtest.StartCluster(b, 1)
	cli := cluster.Client(b)
	st, err := etcd.New(cli, etcd.Options{Root: "/bench/"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	rev, err := metastore.Put(ctx, st, "store-counter", []byte("0"), 0)
	if err != nil {
		b.Fatal(err)
	}
	const rawKey = "/bench/raw-counter"
	resp, err := cli.Put(ctx, rawKey, "0")
	if err != nil {
		b.Fatal(err)
	}
	rawRev := resp.Header.Revision

	b.ResetTimer()
	var storeTime, rawTime time.Duration
	storeCAS := func(v string) {
		start := time.Now()
		rev, err = metastore.Put(ctx, st, "store-counter", []byte(v), rev)
		storeTime += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
	}
	rawCAS := func(v string) {
		start := time.Now()
		tr, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(rawKey), "=", rawRev)).
			Then(clientv3.OpPut(rawKey, v)).
			Else(clientv3.OpGet(rawKey, clientv3.WithKeysOnly())).
			Commit()
		rawTime += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if !tr.Succeeded {
			b.Fatal("raw CAS lost")
		}
		rawRev = tr.Header.Revision
	}
	// The order alternates so that neither kind always follows the other.
	for i := 0; b.Loop(); i++ {
		v := strconv.Itoa(i + 1)
		if i%2 == 0 {
			storeCAS(v)
			rawCAS(v)
		} else {
			rawCAS(v)
			storeCAS(v)
		}
	}
	n := float64(b.N)
	storeRate := n / storeTime.Seconds()
	rawRate := n / rawTime.Seconds()
	b.ReportMetric(storeRate, "store-cas/s")
	b.ReportMetric(rawRate, "raw-cas/s")
	b.ReportMetric(storeRate/rawRate, "store/raw")
}
