// Package authhttp is the reference transport of the authority layer
// (package authority): JSON over HTTP, over mutual TLS. A Server serves
// an authority.Driver to the nodes; a Dialer gives a node the
// authority.Conn its authority.Agent runs over, and sends an operator's
// handoff request (Post).
//
// # Identity
//
// Mutual TLS is mandatory. The host provides the CA: ServerTLS requires
// and verifies every client certificate (TLS 1.3 at least), so a request
// without a verified certificate never reaches a route; ClientTLS is the
// node's side. A node's certificate carries one URI SAN,
// cutline://node/<name> (NodeIdentity; ServerOptions.Identity replaces
// the rule). That authenticated identity is the only name the server
// steps the controller with: an event whose node field names anyone else
// is refused with 403, logged, and never stepped, so a node cannot speak
// for another. Handoff requests come only from the identities listed in
// ServerOptions.Operators, which in turn are not nodes: they open no
// stream and post no node's event.
//
// A node verifies the controller in turn: a Dialer naming the Controller
// refuses every answer (the stream's first among them) whose certificate
// names another identity (NodeIdentity, or Dialer.Identity), so a node
// certificate of the same CA served at the controller's address gives no
// orders; and any answer the client did not verify against its CA is
// refused. Each message of the stream is bounded (Dialer.MaxMessage): a
// longer one ends the stream before it is held in memory.
//
// # Routes
//
// Every route is under /v1; errors are answered as {"error": "..."}.
//
//	GET  /v1/stream?node=<name>&caps=<list>&token=<n>
//
// opens the node's control channel. caps lists the node's capabilities
// among vote, storage, promotable, contention and cleanup, comma-separated
// (none: the node is invisible to the topology); token is the grant the
// node holds (0 or absent: none); node, when given, must be the
// authenticated identity. The server steps Connect, answers 200 with the
// headers Cutline-Node (the identity) and Cutline-Stream (the stream's
// id), and writes the node's messages as newline-delimited JSON, one per
// line, flushed each:
//
//	{"to":"node-a","kind":"grant","token":1,"grant":{"domain":"orders","holder":"node-a","token":1,"deadline":"2026-01-01T00:00:21Z","revision":4}}
//	{"to":"node-b","kind":"required","token":1,"required":{"star":"node-a","pos":{"epoch":3,"slot":40}}}
//
// kind is grant, revoke, required, recover, release, topology,
// heartbeat-now or concern-answer (authority.MsgKind); a topology carries
// "ended" once its token's grant has ended.
// A second stream of the same node replaces the first, which is closed
// without a Disconnect. A stream that ends without a goodbye (the client
// went away, the connection broke, its queue overflowed) is stepped as
// Disconnect{Unexpected: true}: the controller holds the holder's grant
// for its reconnect reservation.
//
//	POST /v1/event
//
// takes one envelope, {"kind": ..., "event": {...}}, at most 64 KiB:
//
//	{"kind":"heartbeat","event":{"node":"node-a","token":1,"progress":{"epoch":3,"slot":40}}}
//	{"kind":"offer","event":{"node":"node-b","token":1,"star":"node-a","frontier":{"epoch":3,"slot":12},"recoverable":{"epoch":3,"slot":40},"usable":true}}
//	{"kind":"recovered","event":{"node":"node-b","token":1,"star":"node-a","frontier":{"epoch":3,"slot":40}}}
//	{"kind":"released","event":{"node":"node-a","token":1,"progress":{"epoch":3,"slot":41}}}
//	{"kind":"handoff","event":{"target":"node-b"}}
//
// Unknown kinds or fields and malformed JSON are 400, a larger body 413.
// The answer is 200 once the controller took the event and made what it
// decided durable and sent; 409 when the controller refused it, with
// {"error": ..., "refused": {"node", "event", "reason"}}, which the client
// turns back into the *authority.RefusedError (matching
// authority.ErrRefused); 403 for an event naming another node than the
// identity, or a handoff from a non-operator; 503 when the driver failed.
//
//	POST /v1/bye?stream=<id>
//
// says goodbye: the server steps Disconnect{Unexpected: false} (the
// holder's grant ends at once) and closes the stream. A goodbye naming a
// stream that is no longer the node's current one does nothing.
//
// The controller is stepped under a context the client cannot cancel: a
// client going away never abandons a durable decision half-way.
//
// # Why HTTP
//
// The protocol is a handful of small events one way and a stream of small
// messages the other: HTTP/1.1 or HTTP/2 carries both with the standard
// library alone, with no code generation and no dependency, and anyone
// can read the wire or speak it with curl:
//
//	curl --cert node-a.pem --key node-a.key --cacert ca.pem -N \
//	    'https://ctl:8443/v1/stream?node=node-a&caps=vote,promotable'
//
// gRPC would bring generated stubs, a dependency tree and a binary
// framing for no gain in safety: every guarantee lives in the controller
// and the runtimes, and the transport only authenticates and carries.
//
// # Liveness
//
// The server sends nothing on an idle stream. A peer that vanished
// without closing its connection is noticed by TCP keep-alive (on by
// default in net/http), and in any case a silent holder stops
// heartbeating: its grant ends at its deadline whatever the transport
// noticed.
package authhttp
