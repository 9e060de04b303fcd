package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/metastore/memstore"
)

// authorityIdle is the authority layer's steady state: what its elected
// controller asks of the metastore while one node holds the domain's
// grant and heartbeats, over period. It runs on simulated time (the
// controller and the runtime are state machines stepped with the ticks
// and heartbeats their Driver and Agent would give them: a tick every
// 100 ms, a heartbeat every second), so it takes no wall time. The layer
// makes no object requests: it has no buckets.
type authorityIdle struct {
	meta       int64 // metastore requests during period
	txns       int64
	heartbeats int
	admitted   bool // the holder could still admit at the end
}

func measureAuthorityIdle(ctx context.Context, period time.Duration) (authorityIdle, error) {
	const (
		domain         = "bench"
		node           = "node-a"
		tickEvery      = 100 * time.Millisecond
		heartbeatEvery = time.Second
	)
	meta := &countingStore{Store: memstore.New(memstore.Options{})}
	sess, err := meta.NewSession(ctx, time.Minute)
	if err != nil {
		return authorityIdle{}, err
	}
	defer func() { _ = sess.Close(ctx) }()
	el, err := authority.Campaign(ctx, meta, "", domain, "ctl-1", sess)
	if err != nil {
		return authorityIdle{}, err
	}
	st, err := el.Load(ctx)
	if err != nil {
		return authorityIdle{}, err
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctl, err := authority.NewController(authority.ControllerConfig{Domain: domain}, st, now)
	if err != nil {
		return authorityIdle{}, err
	}
	caps := authority.Capabilities{Vote: true, Promotable: true}
	rt, err := authority.NewRuntime(authority.RuntimeConfig{Node: node, Domain: domain, Caps: caps}, now)
	if err != nil {
		return authorityIdle{}, err
	}
	d, err := authority.NewDriver(el, ctl, func(m authority.Msg) { _ = rt.Step(m) }, authority.DriverOptions{TickEvery: tickEvery})
	if err != nil {
		return authorityIdle{}, err
	}
	if err := d.Step(ctx, authority.Connect{Node: node, Caps: caps}); err != nil {
		return authorityIdle{}, err
	}
	if err := d.Step(ctx, authority.Offer{Node: node, Usable: true}); err != nil {
		return authorityIdle{}, err
	}
	// The first grant waits one lease after the election.
	now = now.Add(authority.DefaultLease)
	if err := d.Step(ctx, authority.Tick{Now: now}); err != nil {
		return authorityIdle{}, err
	}
	if g := rt.Grant(); g.Holder != node || rt.Admit(now) != nil {
		return authorityIdle{}, fmt.Errorf("authority: no grant to %s: %+v", node, g)
	}

	meta.reset()
	var res authorityIdle
	end := now.Add(period)
	nextBeat := now.Add(heartbeatEvery)
	steps := int(period/tickEvery) + 1
	for i := 0; i < steps && now.Before(end); i++ {
		now = now.Add(tickEvery)
		_ = rt.Step(authority.Tick{Now: now})
		if !now.Before(nextBeat) {
			nextBeat = now.Add(heartbeatEvery)
			_ = rt.Step(authority.HeartbeatDue{Progress: chain.Position{}})
		}
		rd := rt.Ready()
		rt.Advance(rd)
		for _, ev := range rd.Events {
			if err := d.Step(ctx, ev); err != nil {
				return authorityIdle{}, err
			}
		}
		if hb := rd.Heartbeat; hb != nil {
			res.heartbeats++
			if err := d.Step(ctx, *hb); err != nil {
				return authorityIdle{}, err
			}
		}
		if err := d.Step(ctx, authority.Tick{Now: now}); err != nil {
			return authorityIdle{}, err
		}
	}
	res.meta, res.txns = meta.total(), meta.txns.Load()
	res.admitted = rt.Admit(now) == nil
	return res, nil
}
