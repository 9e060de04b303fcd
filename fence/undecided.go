package fence

import (
	"time"

	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/epoch"
)

type epochID struct {
	star  string
	epoch uint64
}

// Undecided describes a slot a fence is blocked on.
type Undecided struct {
	Star    string
	Epoch   uint64
	Slot    uint64
	Waiting []string
	Since   time.Time
}

// Undecided lists the slots this fencer is currently blocked on, with the
// time each was first found undecided. Alert on their age.
func (f *Fencer) Undecided() []Undecided {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Undecided, 0, len(f.undecided))
	for _, u := range f.undecided {
		out = append(out, u)
	}
	return out
}

func (f *Fencer) markUndecided(rec *epoch.Record, s uint64, obs []wire.Observation) time.Time {
	buckets, _ := f.zones.Resolve(rec.Constants.Buckets)
	f.mu.Lock()
	id := epochID{rec.Star, rec.Epoch}
	u, ok := f.undecided[id]
	fresh := !ok || u.Slot != s
	if fresh {
		u = Undecided{Star: rec.Star, Epoch: rec.Epoch, Slot: s, Since: f.opts.Clock.Now()}
	}
	u.Waiting = waiting(buckets, obs)
	f.undecided[id] = u
	f.mu.Unlock()
	if fresh {
		// Logged outside the lock: a handler may call Undecided.
		f.opts.Logger.Warn("fence slot undecided: unreachable buckets hold the deciding vote",
			"star", rec.Star, "epoch", rec.Epoch, "slot", s, "waiting", u.Waiting)
	}
	return u.Since
}

func (f *Fencer) clearUndecided(rec *epoch.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.undecided, epochID{rec.Star, rec.Epoch})
}
