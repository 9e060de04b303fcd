package authority

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
)

// ConnectorConfig holds what a Connector requires.
type ConnectorConfig struct {
	// Runtime configures the runtime of every channel: the node's
	// identity, its domain and its capabilities.
	Runtime RuntimeConfig
	// Dial opens a control channel to the controller, declaring the
	// node, its capabilities and the token of the grant it holds (0:
	// none). Local.Dial (wrapped) and authhttp's Dialer.Dial fit. It must
	// honour ctx.
	Dial func(ctx context.Context, node string, caps Capabilities, token Token) (Conn, error)
	// Host is what every channel's Agent asks of the node.
	Host AgentHost
}

// ConnectorOptions tunes a Connector. The zero value works.
type ConnectorOptions struct {
	// Agent tunes every channel's Agent, within its bounds. Leave its
	// Clock nil: Clock drives the agents. A nil Logger there means
	// Logger.
	Agent AgentOptions
	// Redial is the backoff between dials. Zero fields mean Min 50 ms,
	// Max 2 s; it starts again from Min after a channel that ran.
	Redial clock.Backoff
	// Clock times the runtimes, their agents and the backoff. Nil means
	// the wall clock.
	Clock clock.Clock
	// Logger receives the channels' ends and the failed dials. Nil
	// discards.
	Logger *slog.Logger
}

// The defaults of ConnectorOptions.Redial.
const defaultRedialMin, defaultRedialMax = 50 * time.Millisecond, 2 * time.Second

// noDriverEvery is how many dials refused with ErrNoDriver in a row
// are logged once: while the process's own controller is not elected,
// that is no news.
const noDriverEvery = 30

// Connector keeps a node's control channel up: Run dials the controller,
// runs an Agent over the channel until it closes, and dials again with a
// backoff. Each channel gets a fresh Runtime that resumes the grant the
// last one held (Resume) while identity, token and deadline still
// validate, so that a dropped channel costs the holder nothing within its
// reconnect window. When Run's context ends, the channel is closed: the
// goodbye, which ends the node's grant at once.
//
// Admit, Grant, HealthPeers and Agent answer for the agent of the
// current channel, or of the last one until the next is up: a node whose
// channel dropped keeps admitting under its grant until its deadline.
// Its methods are safe for concurrent use.
//
//	local := authority.NewLocal()
//	c, err := authority.NewConnector(authority.ConnectorConfig{
//		Runtime: authority.RuntimeConfig{Node: "node-a", Domain: "orders", Caps: caps},
//		Dial: func(_ context.Context, node string, caps authority.Capabilities, token authority.Token) (authority.Conn, error) {
//			return local.Dial(node, caps, token)
//		},
//		Host: host,
//	}, authority.ConnectorOptions{})
//	go c.Run(ctx)
//	if err := c.Admit(); err == nil { /* write */ }
type Connector struct {
	cfg   ConnectorConfig
	opts  ConnectorOptions
	seed  uint64 // the redials' jitter, keyed on the node
	agent atomic.Pointer[Agent]
}

// NewConnector returns a connector; Run starts it.
func NewConnector(cfg ConnectorConfig, opts ConnectorOptions) (*Connector, error) {
	if err := required(arg{"Dial", cfg.Dial == nil}, arg{"Host", cfg.Host == nil}); err != nil {
		return nil, err
	}
	if opts.Agent.Clock != nil {
		return nil, &cutline.ConfigError{Field: "Agent.Clock", Value: opts.Agent.Clock, Reason: "must be nil: Clock drives the agents"}
	}
	if err := opts.Redial.Validate("Redial"); err != nil {
		return nil, err
	}
	opts.Redial = opts.Redial.Or(clock.Backoff{Min: defaultRedialMin, Max: defaultRedialMax})
	opts.Clock = clock.Or(opts.Clock)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Agent.Clock = opts.Clock
	if opts.Agent.Logger == nil {
		opts.Agent.Logger = opts.Logger
	}
	rt, err := NewRuntime(cfg.Runtime, opts.Clock.Now())
	if err != nil {
		return nil, err
	}
	// The agent's options are checked once, here, on a channel never used.
	if _, err := NewAgent(rt, noConn{}, cfg.Host, opts.Agent); err != nil {
		if ce, ok := errors.AsType[*cutline.ConfigError](err); ok {
			ce.Field = "Agent." + ce.Field
		}
		return nil, err
	}
	return &Connector{cfg: cfg, opts: opts, seed: seedOf(cfg.Runtime.Node)}, nil
}

// Run keeps the control channel up until ctx ends, and closes it then
// (the goodbye). Run is not to be called again before it returned.
func (c *Connector) Run(ctx context.Context) {
	var g Grant // the grant the last channel held, for the next to resume
	node, caps, log := c.cfg.Runtime.Node, c.cfg.Runtime.Caps, c.opts.Logger
	for attempt := 0; ; attempt++ {
		if attempt > 0 && c.opts.Redial.Sleep(ctx, c.opts.Clock, attempt-1, c.seed) != nil {
			return
		}
		rt, err := Resume(c.cfg.Runtime, g, c.opts.Clock.Now())
		if err != nil {
			rt, _ = NewRuntime(c.cfg.Runtime, c.opts.Clock.Now()) // NewConnector checked the config
		}
		conn, err := c.cfg.Dial(ctx, node, caps, rt.Grant().Token)
		switch {
		case ctx.Err() != nil:
			if err == nil && conn != nil {
				_ = conn.Close()
			}
			return
		case errors.Is(err, ErrNoDriver):
			if attempt%noDriverEvery == 0 {
				log.Info("authority: this process's controller is not elected yet; dialing again")
			}
			continue
		case err != nil:
			log.Warn("authority: dial failed; dialing again", "err", err)
			continue
		}
		a, err := NewAgent(rt, conn, c.cfg.Host, c.opts.Agent)
		if err != nil { // conn is nil: NewConnector checked the rest
			log.Error("authority: the dial returned no channel; dialing again", "err", err)
			continue
		}
		c.agent.Store(a)
		attempt = 0
		err = a.Run(ctx)
		g = a.Grant()
		cerr := conn.Close() // the goodbye, once ctx ended
		if ctx.Err() != nil {
			if cerr != nil {
				log.Warn("authority: goodbye", "err", cerr)
			}
			return
		}
		log.Warn("authority: control channel closed; dialing again", "err", err)
	}
}

// Agent returns the agent of the current channel, or of the last one
// until the next is up; nil before the first.
func (c *Connector) Agent() *Agent { return c.agent.Load() }

// Admit is nil when the node may admit a write now (Agent.Admit); before
// the first channel it is a *NotAdmittedError.
func (c *Connector) Admit() error {
	if a := c.agent.Load(); a != nil {
		return a.Admit()
	}
	return &NotAdmittedError{Node: c.cfg.Runtime.Node, Reason: "not connected to the controller yet"}
}

// Grant returns the grant held (Agent.Grant); zero before the first
// channel.
func (c *Connector) Grant() Grant {
	if a := c.agent.Load(); a != nil {
		return a.Grant()
	}
	return Grant{}
}

// HealthPeers returns the node's health peers and the token their links
// are bound to (Agent.HealthPeers); (nil, 0) before the first channel.
func (c *Connector) HealthPeers() ([]string, Token) {
	if a := c.agent.Load(); a != nil {
		return a.HealthPeers()
	}
	return nil, 0
}

// HealthyPeers returns how many of the node's health links are up
// (Agent.HealthyPeers); 0 before the first channel.
func (c *Connector) HealthyPeers() int {
	if a := c.agent.Load(); a != nil {
		return a.HealthyPeers()
	}
	return 0
}

// noConn is a channel never used: NewConnector checks the agent's
// options with it.
type noConn struct{}

func (noConn) Send(context.Context, Event) error { return ErrConnClosed }
func (noConn) Msgs() <-chan Msg                  { return nil }
func (noConn) Close() error                      { return nil }
