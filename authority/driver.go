package authority

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
)

// DriverOptions tunes a Driver. The zero value works.
type DriverOptions struct {
	// TickEvery is how often the controller's clock ticks. 0 means
	// 100 ms; between 1 ms and 1 s.
	TickEvery time.Duration
	// Clock drives the ticks. Nil means the wall clock.
	Clock clock.Clock
	// Logger receives durable transitions (info). Nil discards.
	Logger *slog.Logger
}

// Driver runs a Controller for an elected controller: it steps it with
// the events nodes send and the ticks of its clock, persists what it
// proposes through the Election before any message that depends on it is
// sent, and stops when the election is lost. Its methods are safe for
// concurrent use.
type Driver struct {
	el    *Election
	send  func(Msg)
	opts  DriverOptions
	mu    sync.Mutex // guards ctl, conns and stale
	ctl   *Controller
	conns map[string]Connect // the connections the controller knows of
	// stale: a write's outcome is unknown and the state could not be read
	// back yet; nothing is decided until it is.
	stale bool
}

// NewDriver returns a driver of ctl under el that sends its messages
// through send. send delivers a message to its node; delivery is best
// effort: a node that misses one learns the state on its next event. It
// is called with the driver's lock held: it must not block and must not
// call the driver (Local.Send and authhttp's Server.Send do neither).
func NewDriver(el *Election, ctl *Controller, send func(Msg), opts DriverOptions) (*Driver, error) {
	if err := required(arg{"el", el == nil}, arg{"ctl", ctl == nil}, arg{"send", send == nil}); err != nil {
		return nil, err
	}
	if opts.TickEvery == 0 {
		opts.TickEvery = 100 * time.Millisecond
	}
	if opts.TickEvery < time.Millisecond || opts.TickEvery > time.Second {
		return nil, &cutline.ConfigError{Field: "TickEvery", Value: opts.TickEvery, Reason: "must lie in [1ms, 1s]"}
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Driver{el: el, ctl: ctl, send: send, opts: opts, conns: map[string]Connect{}}, nil
}

// Step applies an event now and returns the controller's answer (a
// *RefusedError for a refused one). What the event decided is persisted
// and sent before Step returns.
func (d *Driver) Step(ctx context.Context, ev Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch e := ev.(type) {
	case Connect:
		d.conns[e.Node] = e
	case Disconnect:
		delete(d.conns, e.Node)
	}
	err := d.ctl.Step(ev)
	if perr := d.flushLocked(ctx); perr != nil {
		return perr
	}
	return err
}

// State returns the last persisted state.
func (d *Driver) State() StateRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ctl.State()
}

// Run ticks the controller until ctx ends (nil) or the election is lost
// (an error matching ErrDeposed).
func (d *Driver) Run(ctx context.Context) error {
	for {
		t := d.opts.Clock.NewTimer(d.opts.TickEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-d.el.Done():
			t.Stop()
			return fmt.Errorf("%w: the controller's session ended", ErrDeposed)
		case <-t.C():
		}
		if err := d.Step(ctx, Tick{Now: d.opts.Clock.Now()}); err != nil {
			if errors.Is(err, ErrDeposed) {
				return err
			}
			if ctx.Err() != nil {
				return nil
			}
			d.opts.Logger.Warn("controller tick", "err", err)
		}
	}
}

// flushLocked sends and persists what the controller has ready, until
// nothing is left. Messages in a Ready never depend on its Persist (those
// wait in the controller until Persisted).
func (d *Driver) flushLocked(ctx context.Context) error {
	if d.stale {
		if err := d.reloadLocked(ctx); err != nil {
			return err
		}
	}
	for range 16 {
		rd := d.ctl.Ready()
		for _, m := range rd.Msgs {
			d.send(m)
		}
		if rd.Persist == nil {
			if len(rd.Msgs) == 0 {
				return nil
			}
			continue
		}
		st, err := d.el.Save(ctx, d.ctl.State(), *rd.Persist)
		if errors.Is(err, ErrDeposed) {
			return err
		}
		if err != nil {
			// The outcome is unknown: go on only from what the store
			// says now, with a fresh state machine that assumes the
			// worst about deadlines.
			d.opts.Logger.Warn("authority: persist failed; reloading", "err", err)
			d.stale = true
			if rerr := d.reloadLocked(ctx); rerr != nil {
				return fmt.Errorf("authority: persist %s: %w (reload: %w)", rd.Persist, err, rerr)
			}
			continue
		}
		d.opts.Logger.Info("authority", "state", st.String(), "term", st.Term)
		d.ctl.Persisted(st)
	}
	return nil
}

// reloadLocked replaces the controller with one started from the stored
// state, and replays the connections it knew.
func (d *Driver) reloadLocked(ctx context.Context) error {
	loaded, err := d.el.Load(ctx)
	if err != nil {
		return err
	}
	ctl, err := NewController(d.ctl.cfg, loaded, d.opts.Clock.Now())
	if err != nil {
		return err
	}
	d.ctl, d.stale = ctl, false
	for _, c := range d.conns {
		_ = d.ctl.Step(c)
	}
	return nil
}
