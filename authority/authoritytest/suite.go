// Package authoritytest is the scenario suite of package authority, run
// over any metastore: the controller and runtimes wired in process, every
// message delivered by the suite, the clock moved only by it. The tables
// cover token monotonicity across controllers (a deposed one included),
// racing campaigns, the reconnect reservation within and past its window,
// the deadline, racing and duplicate offers, recovery and read-only until
// the grant, planned handoff (no state without a holder) and a controller
// crash between the drain and the transition, process takeover, zero
// capabilities and misaddressed messages, a stale token trying every
// write path (admission, cursor advance, coverage, publication, mint),
// the fast fence and the self-fence, a former holder's reconnect answered
// in every order and with each answer lost, a self-fenced holder through
// a topology change, the selection of a candidate that can recover the
// requirement, and a candidate that does not recover in time.
//
// Scenarios that read as a sequence of steps are scripts in testdata
// (the grant and its renewal and deadline, the reconnect reservation,
// offers, recovery, the covering candidate, the fast fence's guards, the
// self-fence), embedded and run as subtests of Script; the first script
// describes the commands, and package authority's guide the format.
//
//	func TestScenarios(t *testing.T) {
//		authoritytest.Run(t, authoritytest.Backend{
//			NewStore: func(t *testing.T) metastore.Store { return memstore.New(memstore.Options{}) },
//			Expire: func(t *testing.T, s metastore.Store, sess metastore.Session) {
//				s.(*memstore.Store).Expire(sess)
//			},
//		})
//	}
package authoritytest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/metastore"
)

// Backend is the metastore the suite runs on.
type Backend struct {
	// NewStore returns a store whose keyspace is empty and private to the
	// calling test.
	NewStore func(t *testing.T) metastore.Store
	// Expire ends sess as its TTL running out would.
	Expire func(t *testing.T, s metastore.Store, sess metastore.Session)
}

// Run runs every scenario as a subtest.
func Run(t *testing.T, b Backend) {
	for _, sc := range []struct {
		name string
		run  func(*testing.T, Backend)
	}{
		{"TokenMonotonicAcrossControllers", tokenMonotonicAcrossControllers},
		{"RacingCampaigns", racingCampaigns},
		{"PlannedHandoff", plannedHandoff},
		{"HandoffCrashBeforeTransition", handoffCrashBeforeTransition},
		{"ProcessTakeover", processTakeover},
		{"CapabilitiesAndMisaddressed", capabilitiesAndMisaddressed},
		{"StaleTokenOnEveryWritePath", staleTokenOnEveryWritePath},
		{"RecoveryWithTheLibrary", recoveryWithTheLibrary},
		{"FastFenceArithmetic", fastFenceArithmetic},
		{"PartitionedHolder", partitionedHolder},
		{"CrashedHolderConfirmedLate", crashedHolderConfirmedLate},
		{"FormerHolderReconnects", formerHolderReconnects},
		{"FencedHolderTopologyChange", fencedHolderTopologyChange},
		{"RecoveryTimeout", recoveryTimeout},
	} {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, b) })
	}
	t.Run("Script", func(t *testing.T) { runScripts(t, b) })
}

// watchStates records every state written for the domain from now on;
// the returned func waits until the watch has seen the state written last
// and returns them all.
func (c *cluster) watchStates() func() []authority.StateRecord {
	c.t.Helper()
	key := "authority/" + domain + "/state"
	_, rev, err := c.store.List(c.ctx, key)
	require.NoError(c.t, err)
	ctx, cancel := context.WithCancel(c.ctx)
	type seen struct {
		st  authority.StateRecord
		rev int64
	}
	ch := make(chan seen)
	go func() {
		defer close(ch)
		for ev, err := range c.store.Watch(ctx, key, rev+1) {
			if err != nil {
				return
			}
			if ev.Type != metastore.EventPut || ev.KV.Key != key {
				continue
			}
			var st authority.StateRecord
			if metastore.DecodeRecord(key, ev.KV.Value, "authority-state", 1, &st) != nil {
				continue
			}
			select {
			case ch <- seen{st, ev.KV.Revision}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() []authority.StateRecord {
		defer cancel()
		last := c.state().Revision
		var got []authority.StateRecord
		for s := range ch {
			got = append(got, s.st)
			if s.rev >= last {
				return got
			}
		}
		c.t.Fatalf("the watch of %s ended before revision %d", key, last)
		return nil
	}
}
