package authority

import (
	"context"
	"fmt"
	"sync"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/errkind"
)

// LocalBuffer is how many messages a node's connection over a Local
// transport queues for its reader.
const LocalBuffer = 64

// Errors of the in-process transport.
var (
	// ErrConnClosed: the connection is closed: by Close, by an overflow of
	// its queue, by a newer Dial of the same node, or because the Local's
	// driver was replaced.
	ErrConnClosed = errkind.New(cutline.ErrClosed, "authority: connection closed")
	// ErrNoDriver: the Local transport has no driver attached (SetDriver).
	ErrNoDriver = errkind.New(cutline.ErrUnavailable, "authority: no driver attached to the local transport")
)

// Local is the in-process transport: a controller's Driver and the
// Agents of nodes running in the same process, connected without a
// network. It is what an embedded deployment (one process running the
// controller and its brokers) or a test wires, where package authhttp
// would carry the same events and messages between processes.
//
// The driver is built after the transport, because the driver sends
// through the transport's Send:
//
//	local := authority.NewLocal()
//	d, err := authority.NewDriver(el, ctl, local.Send, authority.DriverOptions{})
//	local.SetDriver(d)
//	go d.Run(ctx)
//	conn, err := local.Dial("node-a", caps, 0)
//	agent, err := authority.NewAgent(rt, conn, host, opts)
//
// Every node has at most one connection; a node's name is trusted as
// given, since nothing crosses a process boundary. Its methods are safe
// for concurrent use.
type Local struct {
	// connMu orders every Connect and Disconnect step with the table of
	// connections, so that the controller sees a node's connections in
	// the order the table holds them. It is taken before mu, and never by
	// Send (which the driver calls holding its own lock).
	connMu sync.Mutex
	mu     sync.Mutex // guards drv, conns and every connection's state
	drv    *Driver
	conns  map[string]*localConn // the current connection of each node
}

// NewLocal returns a transport without a driver; attach it with
// SetDriver.
func NewLocal() *Local {
	return &Local{conns: map[string]*localConn{}}
}

// SetDriver attaches the driver that Dial and the connections step. A
// different driver than the one attached (a new election) closes every
// connection without stepping anything: the nodes dial again and declare
// themselves to the new controller. A nil d detaches the driver: Dial
// fails with ErrNoDriver until the next SetDriver.
func (l *Local) SetDriver(d *Driver) {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.drv != nil && l.drv != d {
		for n, c := range l.conns {
			c.endLocked()
			delete(l.conns, n)
		}
	}
	l.drv = d
}

// Send delivers a controller message to its node's connection: pass it
// as NewDriver's send. It never blocks and never calls the driver. A
// message for a node without a connection is dropped (the node learns the
// state when it connects). When a connection's queue (LocalBuffer
// messages) is full, the connection is closed rather than a message
// dropped: its Msgs channel ends after the messages queued, its Send
// refuses with ErrConnClosed, and the node's Agent returns from Run. The
// node then closes it and dials again, and the Connect makes the
// controller send what the node must know (its grant, the requirement to
// recover), so a node never acts on a state with a hole in it. Closing a
// connection closed this way tells the controller of an unexpected
// disconnect (Disconnect{Unexpected: true}), not a goodbye: a holder's
// grant is reserved for it to come back.
func (l *Local) Send(m Msg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.conns[m.Recipient()]
	if c == nil || c.ended {
		return
	}
	select {
	case c.msgs <- m:
	default:
		c.broken = true
		c.endLocked()
	}
}

// Dial connects node: it steps Connect{Node: node, Caps: caps, Token:
// token} on the driver and returns the node's Conn, whose Msgs yields the
// controller's messages from that Connect on. A connection of the node
// made earlier is closed without stepping anything (the controller sees
// the new Connect instead). The Conn's Send steps the driver: a Connect
// equal to the dialed one (the one an Agent sends first) does nothing,
// any other Connect, a Disconnect or a Tick is refused with a
// *cutline.ConfigError (dial anew to declare other capabilities or another
// token; Close says goodbye; the driver ticks itself), an event naming
// another node is refused with a *RefusedError, and so is a
// HandoffRequest, which an operator steps on the driver directly. Close
// steps Disconnect{Node: node, Unexpected: false}, the goodbye: a
// holder's grant ends at once.
//
// The steps are not cancelled by anyone: a durable decision is never
// abandoned half-way. A step the driver fails is returned as is; when
// the Connect itself fails, the connection is dropped and an unexpected
// Disconnect is stepped, as if it had broken at once.
func (l *Local) Dial(node string, caps Capabilities, token Token) (Conn, error) {
	if err := epoch.ValidateName("node", node); err != nil {
		return nil, err
	}
	l.connMu.Lock()
	defer l.connMu.Unlock()
	l.mu.Lock()
	d := l.drv
	if d == nil {
		l.mu.Unlock()
		return nil, ErrNoDriver
	}
	c := &localConn{l: l, node: node, caps: caps, token: token, drv: d, msgs: make(chan Msg, LocalBuffer)}
	if old := l.conns[node]; old != nil {
		old.endLocked()
	}
	l.conns[node] = c
	l.mu.Unlock()
	ctx := context.Background()
	if err := d.Step(ctx, Connect{Node: node, Caps: caps, Token: token}); err != nil {
		l.mu.Lock()
		current := l.conns[node] == c
		if current {
			delete(l.conns, node)
		}
		c.endLocked()
		l.mu.Unlock()
		if current {
			_ = d.Step(ctx, Disconnect{Node: node, Unexpected: true})
		}
		return nil, err
	}
	return c, nil
}

// localConn is one node's connection over a Local.
type localConn struct {
	l     *Local
	node  string
	caps  Capabilities
	token Token
	drv   *Driver // the driver it connected to
	msgs  chan Msg

	// Guarded by l.mu.
	ended  bool // msgs is closed
	broken bool // ended by an overflow of msgs

	once sync.Once
	err  error
}

var _ Conn = (*localConn)(nil)

// endLocked closes msgs once; l.mu is held.
func (c *localConn) endLocked() {
	if !c.ended {
		c.ended = true
		close(c.msgs)
	}
}

// Send steps ev on the driver and returns its answer (see Dial for what
// is refused).
func (c *localConn) Send(ctx context.Context, ev Event) error {
	c.l.mu.Lock()
	ended := c.ended
	c.l.mu.Unlock()
	if ended {
		return ErrConnClosed
	}
	switch e := ev.(type) {
	case Connect:
		if e == (Connect{Node: c.node, Caps: c.caps, Token: c.token}) {
			return nil
		}
		return &cutline.ConfigError{Field: "Connect", Value: fmt.Sprintf("%s token %d", e.Node, e.Token),
			Reason: fmt.Sprintf("the connection declared %s token %d: Dial anew to declare otherwise", c.node, c.token)}
	case Disconnect, Tick:
		return &cutline.ConfigError{Field: "event", Value: ev.event(), Reason: "not sent: Close says goodbye, and the driver ticks itself"}
	case HandoffRequest:
		return &RefusedError{Node: c.node, Event: ev.event(), Reason: "a node does not request handoffs: an operator steps the driver"}
	}
	if n := eventNode(ev); n != c.node {
		return &RefusedError{Node: c.node, Event: ev.event(), Reason: fmt.Sprintf("the event names %q, not the connection's node", n)}
	}
	return c.drv.Step(context.WithoutCancel(ctx), ev)
}

// eventNode is the node an event speaks for.
func eventNode(ev Event) string {
	switch e := ev.(type) {
	case Heartbeat:
		return e.Node
	case Offer:
		return e.Node
	case Recovered:
		return e.Node
	case Released:
		return e.Node
	case Concern:
		return e.Node
	case ConcernCleared:
		return e.Node
	case Advisory:
		return e.Node
	case Challenge:
		return e.Node
	}
	return ""
}

// Msgs yields the controller's messages to the node; it is closed when
// the connection closes.
func (c *localConn) Msgs() <-chan Msg { return c.msgs }

// Close says goodbye and closes the connection: while it is the node's
// current one, the driver steps Disconnect{Unexpected: false}, or
// Disconnect{Unexpected: true} when an overflow had closed it. A
// connection replaced by a newer Dial, or closed by a change of driver,
// steps nothing. It returns the step's error; later calls return the
// same.
func (c *localConn) Close() error {
	c.once.Do(func() {
		l := c.l
		l.connMu.Lock()
		defer l.connMu.Unlock()
		l.mu.Lock()
		current := l.conns[c.node] == c
		if current {
			delete(l.conns, c.node)
		}
		broken := c.broken
		c.endLocked()
		l.mu.Unlock()
		if current {
			c.err = c.drv.Step(context.Background(), Disconnect{Node: c.node, Unexpected: broken})
		}
	})
	return c.err
}
