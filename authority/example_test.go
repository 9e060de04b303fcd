package authority_test

import (
	"context"
	"fmt"
	"time"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/metastore/memstore"
)

// A controller elected through the metastore grants a domain to the first
// usable offer; the node's runtime then admits writes until its deadline.
func Example() {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	sess, err := store.NewSession(ctx, time.Minute)
	if err != nil {
		panic(err)
	}
	defer sess.Close(ctx)

	// The controller: elected, its durable state loaded with a new term.
	el, err := authority.Campaign(ctx, store, "", "orders", "ctl-1", sess)
	if err != nil {
		panic(err)
	}
	st, err := el.Load(ctx)
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctl, err := authority.NewController(authority.ControllerConfig{Domain: "orders"}, st, now)
	if err != nil {
		panic(err)
	}

	// A node's runtime, whose messages the driver hands over directly
	// (a real host uses a transport: authority.Local or authhttp).
	caps := authority.Capabilities{Vote: true, Promotable: true}
	rt, err := authority.NewRuntime(authority.RuntimeConfig{Node: "node-a", Domain: "orders", Caps: caps}, now)
	if err != nil {
		panic(err)
	}
	d, err := authority.NewDriver(el, ctl, func(m authority.Msg) { _ = rt.Step(m) }, authority.DriverOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("admitted before a grant:", rt.Admit(now) == nil)

	_ = d.Step(ctx, authority.Connect{Node: "node-a", Caps: caps})
	_ = d.Step(ctx, authority.Offer{Node: "node-a", Usable: true})
	// A new controller assumes its predecessor may have renewed a holder
	// just before dying: the first token waits one lease.
	now = now.Add(authority.DefaultLease)
	_ = d.Step(ctx, authority.Tick{Now: now})

	g := rt.Grant()
	fmt.Println("grant:", g.Holder, "token", g.Token)
	fmt.Println("admitted now:", rt.Admit(now) == nil)
	fmt.Println("admitted past the deadline:", rt.Admit(g.Deadline) == nil)
	// Output:
	// admitted before a grant: false
	// grant: node-a token 1
	// admitted now: true
	// admitted past the deadline: false
}
