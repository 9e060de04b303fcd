package fence

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/internal/testservers"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/s3"
)

// s3Zones runs one versitygw process per zone, so that a test can take a
// zone down for real by stopping its process. They are stopped when the
// test ends. Without the binary the test is skipped, or fails when CI=true.
type s3Zones struct {
	servers []*testservers.S3Server
	clients []*awss3.Client
}

func startS3Zones(t *testing.T, k int) *s3Zones {
	t.Helper()
	z := &s3Zones{}
	for range k {
		srv := testservers.StartVersityGW(t, testservers.S3Options{})
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		// One attempt per request: a stopped zone answers "unavailable"
		// at once, and the fencer's own retries are what is under test.
		client := srv.NewClient(&http.Client{Transport: tr, Timeout: 10 * time.Second}, func(o *awss3.Options) {
			o.RetryMaxAttempts = 1
		})
		z.servers = append(z.servers, srv)
		z.clients = append(z.clients, client)
	}
	return z
}

// buckets creates a fresh S3 bucket in each of the first k zones and
// returns them as objstore buckets named a, b, c…
func (z *s3Zones) buckets(t *testing.T, k int) []objstore.Bucket {
	t.Helper()
	out := make([]objstore.Bucket, k)
	for i := range out {
		name := z.servers[i].NewBucketName(t)
		b, err := s3.New(z.clients[i], name, s3.Options{RemoteOptions: objstore.RemoteOptions{Name: string(rune('a' + i))}})
		require.NoError(t, err)
		out[i] = b
	}
	return out
}

// TestS3Scenarios fences hand-laid epochs on three real S3 zones: the
// empty epoch, a committed prefix, the pipelined tail's repair, a crashed
// fencer's poison resumed, the one-short-of-quorum repair, the frontier
// slot left undecided by an unreachable zone, foreign and corrupt copies,
// and conflicting flights.
func TestS3Scenarios(t *testing.T) {
	zones := startS3Zones(t, 3)
	want := map[string]bool{
		"empty epoch":   true,
		"all committed": true,
		"pipelined tail: repair, then cut before a straggler":          true,
		"a crashed fencer's poison is resumed":                         true,
		"a crashed fencer's poison after a racing flight: repair wins": true,
		"one short of quorum: repair, never poison":                    true,
		"flight and poison with the deciding zone down: undecided":     true,
		"K=1 W=1":                                                             true,
		"K=2 W=2: one poison kills":                                           true,
		"foreign object holds the deciding vote":                              true,
		"misplaced object is neither flight nor poison":                       true,
		"a corrupt copy beside two empty zones is decided around":             true,
		"corrupt copies in two zones at the frontier stop the fence":          true,
		"an intact copy beside a corrupt one is repaired from the intact one": true,
		"two different flights with a quorum of one are a conflict":           true,
		"two different flights without a quorum are a conflict":               true,
		"a corrupt copy past the end does not move the walk's start":          true,
	}
	ran := 0
	for _, c := range scenarios() {
		if !want[c.name] {
			continue
		}
		ran++
		t.Run(c.name, func(t *testing.T) {
			runScenario(t, newEnvOn(t, zones.buckets(t, c.k), c.w, 4), c)
		})
	}
	require.Equal(t, len(want), ran, "every chosen scenario exists")
}

// TestS3LateFencerAdoptsThePublishedCut is
// TestLateFencerAdoptsThePublishedCut on three real S3 zones.
func TestS3LateFencerAdoptsThePublishedCut(t *testing.T) {
	zones := startS3Zones(t, 3)
	lateFencerAdopts(t, newEnvOn(t, zones.buckets(t, 3), 2, 4))
}

// TestS3WriterRace races a live pipelined writer and a fencer on three
// real S3 zones.
func TestS3WriterRace(t *testing.T) {
	zones := startS3Zones(t, 3)
	for _, c := range []struct{ w, window int }{{2, 8}, {3, 4}} {
		t.Run(fmt.Sprintf("K=3,W=%d,window=%d", c.w, c.window), func(t *testing.T) {
			e := newEnvOn(t, zones.buckets(t, 3), c.w, c.window)
			raceWriter(t, e, e.view(nil), e.view(nil), uint64(c.window))
		})
	}
}

// TestS3StoppedZoneUndecided stops a zone's server process: the frontier
// slot holds a flight in a and poison in b, so c decides it either way.
// The fencer blocks, reports the slot in Undecided, and on its deadline
// returns ErrUndecided naming c; once c's process restarts, a fence
// repairs the flight into c and cuts the next slot.
func TestS3StoppedZoneUndecided(t *testing.T) {
	zones := startS3Zones(t, 3)
	e := newEnvOn(t, zones.buckets(t, 3), 2, 4)
	e.layout("F F F", "F P E")
	zones.servers[2].Stop()

	fc := clockFake()
	f := e.fencer(Options{Clock: fc})
	_, err := e.fenceUntilBlocked(f, fc)
	var ue *UndecidedError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, uint64(1), ue.Slot)
	require.Equal(t, []string{"c"}, ue.Waiting)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	u := f.Undecided()
	require.Len(t, u, 1)
	require.Equal(t, uint64(1), u[0].Slot)
	require.Equal(t, "open", string(e.record().State), "nothing published")
	require.Equal(t, "F P U", e.state(1))

	// Fence again; restart the zone while the fence is blocked on it.
	done := make(chan error, 1)
	go func() {
		_, err := f.Fence(context.Background(), star, e.rec.Epoch)
		done <- err
	}()
	require.NoError(t, driveFence(fc, done, func() { zones.servers[2].Restart() }))
	e.checkCut(2)
	require.Equal(t, "F P F", e.state(1))
	require.Equal(t, "P P E", e.state(2))
	require.Empty(t, f.Undecided())
}

// TestS3StoppedZoneMidAppend stops a zone's process while a pipelined
// writer appends (K=3, W=2: it goes on with two zones), fences the epoch
// with the zone still down, and restarts the zone if the fence blocks on
// it. The writer halts at the cut and every invariant holds.
func TestS3StoppedZoneMidAppend(t *testing.T) {
	zones := startS3Zones(t, 3)
	for _, window := range []int{4, 16} {
		t.Run(fmt.Sprint("window=", window), func(t *testing.T) {
			e := newEnvOn(t, zones.buckets(t, 3), 2, window)
			ctx, cancel := context.WithTimeout(context.Background(), 2*raceBound)
			defer cancel()
			w := e.writer(e.view(nil), chain.WriterOptions{Backoff: clock.Backoff{Min: time.Millisecond, Max: 20 * time.Millisecond}})
			startAfter := uint64(2 * window)
			p := startProducer(ctx, w, producerPlan{limit: ^uint64(0), holdAt: startAfter + 1 + uint64(window), marks: []uint64{startAfter}})
			p.acked(ctx, startAfter)
			zones.servers[2].Stop()
			t.Cleanup(zones.servers[2].Restart) // the next subtest needs the zone

			fc := clockFake()
			f := e.fencer(Options{Clock: fc, Identity: "fencer-s3"})
			done := make(chan error, 1)
			var cut uint64
			go func() {
				var err error
				cut, err = f.Fence(ctx, star, e.rec.Epoch)
				done <- err
			}()
			restarted := false
			require.NoError(t, driveFence(fc, done, func() {
				zones.servers[2].Restart()
				restarted = true
			}))
			close(p.resume)
			select {
			case <-w.Halted():
			case <-ctx.Done():
				t.Fatalf("the writer did not halt after the fence at %d", cut)
			}
			futures, refusal := p.outcomes()
			require.ErrorIs(t, refusal, chain.ErrFenced)
			if !restarted {
				zones.servers[2].Restart() // the writer drains only with every zone answering
			}
			require.NoError(t, w.Close(ctx))
			var fe *chain.FencedError
			require.ErrorAs(t, w.Err(), &fe)
			require.Equal(t, cut, fe.Slot)
			acked := checkOutcomes(t, futures, e.rec.Epoch, cut, false)
			require.Equal(t, cut, acked)
			e.checkCut(cut)
			e.checkReadable(cut)
			t.Logf("cut %d of %d submitted; the fence blocked on the stopped zone: %v", cut, len(futures), restarted)
		})
	}
}

// driveFence waits for a fence running on the fake clock fc to finish
// (done). Whenever it waits on the clock (blocked on an undecided slot, or
// backing off), onBlock runs once and the clock advances past any backoff.
// A step of the fence that neither ends nor waits within raceBound fails.
func driveFence(fc *clock.Fake, done <-chan error, onBlock func()) error {
	blockedOnce := false
	for {
		waiting := make(chan struct{})
		go func() { fc.BlockUntil(1); close(waiting) }()
		step, stop := context.WithTimeout(context.Background(), raceBound)
		select {
		case <-step.Done():
			stop()
			t := fc.NewTimer(time.Hour) // release the waiter
			<-waiting
			t.Stop()
			return fmt.Errorf("the fence neither ended nor waited on the clock within %v", raceBound)
		case err := <-done:
			stop()
			t := fc.NewTimer(time.Hour) // release the waiter
			<-waiting
			t.Stop()
			return err
		case <-waiting:
			stop()
			if !blockedOnce {
				blockedOnce = true
				onBlock()
			}
			fc.Advance(time.Minute)
		}
	}
}
