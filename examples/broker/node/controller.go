package node

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/metastore"
)

// ControllerConfig is what the domain's controller runs with.
type ControllerConfig struct {
	// Name is the process's name in the election record.
	Name, Domain string
	Store        metastore.Store
	// Lease is the grants' lease; SessionTTL the election session's TTL.
	Lease, SessionTTL time.Duration
	// Serve makes the controller reachable over the network (authhttp);
	// Operators are the identities that may request a handoff there.
	Serve     bool
	Operators []string
	Clock     clock.Clock
	Logger    *slog.Logger
}

// Controller campaigns for the domain's Controller election, drives the
// Controller while elected and campaigns again when deposed. Nodes in the
// process reach it through local (authority.Local), nodes elsewhere
// through srv (authhttp), when served.
type Controller struct {
	cfg   ControllerConfig
	clk   clock.Clock
	log   *slog.Logger
	Local *authority.Local
	srv   *authhttp.Server

	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	drv *authority.Driver // the driver of the current election, nil while none
}

// StartController starts campaigning; it does not wait to be elected.
func StartController(cfg ControllerConfig) (*Controller, error) {
	c := &Controller{cfg: cfg, clk: clock.Or(cfg.Clock), log: cfg.Logger.With("controller", cfg.Name), Local: authority.NewLocal()}
	if cfg.Serve {
		srv, err := authhttp.NewServer(authhttp.ServerOptions{Operators: cfg.Operators, Logger: c.log})
		if err != nil {
			return nil, err
		}
		c.srv = srv
	}
	c.cancel, c.done = goStop(func(ctx context.Context) {
		for {
			err := c.term(ctx)
			if ctx.Err() != nil {
				return
			}
			c.log.Warn("controller: out of office; campaigning again", "err", err)
			if clock.Sleep(ctx, c.clk, time.Second) != nil {
				return
			}
		}
	})
	return c, nil
}

// send delivers a controller message to the node wherever it is
// connected: in process or over the network. Neither blocks.
func (c *Controller) send(m authority.Msg) {
	c.Local.Send(m)
	if c.srv != nil {
		c.srv.Send(m)
	}
}

// term is one election: campaign, load the state, drive the controller
// until ctx ends or the election is lost.
func (c *Controller) term(ctx context.Context) error {
	sess, err := c.cfg.Store.NewSession(ctx, c.cfg.SessionTTL)
	if err != nil {
		return err
	}
	// later runs a clean-up once ctx ended, with 5 s of its own.
	later := func(f func(context.Context) error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = f(cctx)
	}
	defer later(sess.Close)
	el, err := authority.Campaign(ctx, c.cfg.Store, "", c.cfg.Domain, c.cfg.Name, sess)
	if err != nil {
		return err
	}
	defer later(el.Resign)
	st, err := el.Load(ctx)
	if err != nil {
		return err
	}
	now, fresh := c.clk.Now(), st.Phase == authority.Vacant && st.Token == 0
	if fresh {
		// No former holder may still write: nothing to wait out.
		now = now.Add(-c.cfg.Lease)
	}
	ctl, err := authority.NewController(authority.ControllerConfig{Domain: c.cfg.Domain, Lease: c.cfg.Lease}, st, now)
	if err != nil {
		return err
	}
	d, err := authority.NewDriver(el, ctl, c.send, authority.DriverOptions{Clock: c.clk, Logger: c.log})
	if err != nil {
		return err
	}
	c.setDriver(d)
	defer c.setDriver(nil)
	c.log.Info("controller elected", "domain", c.cfg.Domain, "state", st.String(), "term", st.Term)
	if !fresh {
		// A former holder may still be writing under a grant whose
		// deadline this controller cannot know: it grants nothing before
		// a whole lease has passed. Say so, or the wait looks like a hang.
		c.log.Info("waiting out the former grant before granting anew", "domain", c.cfg.Domain,
			"state", st.String(), "lease", c.cfg.Lease, "until", now.Add(c.cfg.Lease).Format(time.RFC3339))
	}
	return d.Run(ctx)
}

// setDriver attaches d to both transports (nil detaches).
func (c *Controller) setDriver(d *authority.Driver) {
	c.mu.Lock()
	c.drv = d
	c.mu.Unlock()
	c.Local.SetDriver(d)
	if c.srv != nil {
		c.srv.SetDriver(d)
	}
}

// Driver returns the Driver of the current election (nil while none):
// how an operator in the process requests a handoff.
func (c *Controller) Driver() *authority.Driver {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drv
}

// Stop ends the election and the controller.
func (c *Controller) Stop() {
	if c == nil {
		return
	}
	c.cancel()
	<-c.done
}
