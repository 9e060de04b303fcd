package node

import (
	"context"
	"log/slog"
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

// Controller runs the domain's Controller election (authority.Elector).
// Nodes in the process reach the elected controller through Local
// (authority.Local), nodes elsewhere through srv (authhttp), when served.
type Controller struct {
	el    *authority.Elector
	Local *authority.Local
	srv   *authhttp.Server

	cancel context.CancelFunc
	done   chan struct{}
}

// StartController starts campaigning; it does not wait to be elected.
func StartController(cfg ControllerConfig) (*Controller, error) {
	log := cfg.Logger.With("controller", cfg.Name)
	c := &Controller{Local: authority.NewLocal()}
	if cfg.Serve {
		srv, err := authhttp.NewServer(authhttp.ServerOptions{Operators: cfg.Operators, Logger: log})
		if err != nil {
			return nil, err
		}
		c.srv = srv
	}
	var err error
	c.el, err = authority.NewElector(authority.ElectorConfig{
		Store: cfg.Store, Node: cfg.Name, Controller: authority.ControllerConfig{Domain: cfg.Domain, Lease: cfg.Lease}, Send: c.send,
	}, authority.ElectorOptions{Attach: c.attach, SessionTTL: cfg.SessionTTL, Clock: cfg.Clock, Logger: log})
	if err != nil {
		return nil, err
	}
	c.cancel, c.done = goStop(c.el.Run)
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

// attach points both transports at the driver of the election (nil
// detaches them).
func (c *Controller) attach(d *authority.Driver) {
	c.Local.SetDriver(d)
	if c.srv != nil {
		c.srv.SetDriver(d)
	}
}

// Driver returns the Driver of the current election (nil while none):
// how an operator in the process requests a handoff.
func (c *Controller) Driver() *authority.Driver { return c.el.Driver() }

// Stop ends the election and the controller.
func (c *Controller) Stop() {
	if c == nil {
		return
	}
	c.cancel()
	<-c.done
}
