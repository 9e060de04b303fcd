package main

import (
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore/etcd"
)

// figMint: epoch.Minter.Mint on one embedded etcd member, beside a raw
// clientv3 transaction (compare a key's revision, put it): the round trip
// a mint cannot do without. The two alternate.
func figMint(s *scope, cfg config) ([]Row, error) {
	ctx := s.Context()
	cli := etcdClient(s)
	st, err := etcd.New(cli, etcd.Options{Root: "/bench/"})
	if err != nil {
		return nil, err
	}
	meta := &countingStore{Store: st}
	m, err := epoch.NewMinter(meta, epoch.Options{})
	if err != nil {
		return nil, err
	}
	c := constants(memZones(), window)
	const rawKey = "/raw/counter"
	resp, err := cli.Put(ctx, rawKey, "0")
	if err != nil {
		return nil, err
	}
	rawRev := resp.Header.Revision
	// One of each first: connections, the minter's first reads.
	if _, err := m.Mint(ctx, star, c); err != nil {
		return nil, err
	}
	meta.reset()
	var mints, raws []time.Duration
	for i := range cfg.mints {
		mint := func() error {
			start := time.Now()
			_, err := m.Mint(ctx, star, c)
			mints = append(mints, time.Since(start))
			return err
		}
		raw := func() error {
			start := time.Now()
			tr, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(rawKey), "=", rawRev)).
				Then(clientv3.OpPut(rawKey, fmt.Sprint(i))).
				Else(clientv3.OpGet(rawKey, clientv3.WithKeysOnly())).
				Commit()
			raws = append(raws, time.Since(start))
			if err != nil {
				return err
			}
			if !tr.Succeeded {
				return fmt.Errorf("raw transaction lost its compare")
			}
			rawRev = tr.Header.Revision
			return nil
		}
		first, second := mint, raw
		if i%2 == 1 {
			first, second = raw, mint
		}
		if err := first(); err != nil {
			return nil, err
		}
		if err := second(); err != nil {
			return nil, err
		}
	}
	n := float64(cfg.mints)
	return []Row{
		Row{ID: "mint.latency", Figure: "mint latency p50, embedded etcd (1 member)", Value: ms(quantile(mints, 0.5)), Unit: "ms"}.
			ref("raw clientv3 compare-and-put transaction", ms(quantile(raws, 0.5)), "ms").
			note("%d each, alternating; per mint %.1f gets, %.1f lists, %.1f transactions", cfg.mints, float64(meta.gets.Load())/n, float64(meta.lists.Load())/n, float64(meta.txns.Load())/n),
	}, nil
}
