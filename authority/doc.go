// Package authority separates evidence of failure from the authority to
// replace a writer. A holder (a star leading a domain: a set of streams)
// writes only under a grant issued by the domain's controller: holder,
// fencing token and absolute deadline. Tokens grow strictly; a former
// holder's token reopens nothing.
//
// # Shape
//
// Like etcd's raft, the controller (Controller) and a node's admission
// state (Runtime) are deterministic state machines without I/O, driven by
// events (connect, close, heartbeat, offer, recovered, handoff request,
// release) and ticks of an injected clock. A Controller's durable state
// lives in the metastore (authority/<domain>/state, and the token record
// authority/<domain>/token) and is written only by compare-and-set under
// the controller's election (authority/<domain>/controller, bound to its
// session): one controller acts at a time, and a deposed one's writes
// fail (ErrDeposed). Driver runs an elected controller (persist before
// send: nothing is promised that is not durable); Agent runs a node's
// runtime over a Conn; package authhttp is the reference transport
// (HTTP over mutual TLS). The host owns the network.
//
// # Messages
//
// Both directions have the same shape: a closed set of small structs,
// each holding only the fields its kind uses. A node sends the controller
// an Event (Connect, Disconnect, Heartbeat, Offer, Recovered,
// HandoffRequest, Released, Concern, ConcernCleared, Advisory,
// Challenge; the controller's own clock steps Tick), each naming its node
// and the token it speaks under. The controller sends a node a Msg
// (GrantMsg, RevokeMsg, RequiredMsg, RecoverMsg, ReleaseMsg, TopologyMsg,
// HeartbeatNowMsg, ConcernAnswerMsg), each addressed To one node and
// bound to a Token; Msg.Kind names it on the wire. A host switches on the
// type:
//
//	switch m := m.(type) {
//	case authority.GrantMsg:
//		log.Printf("granted token %d until %v", m.Token, m.Grant.Deadline)
//	case authority.RecoverMsg:
//		log.Printf("recover %s to %v", m.Required.Star, m.Required.Pos)
//	}
//
// # Driving a Runtime
//
// A Runtime has one input door and one output door, as a raft RawNode
// does. Step takes every input: the controller's messages and the host's
// reports (Tick, PingResult, FrontierReport, RecoverableReport,
// ReleaseDone, HeartbeatDue). Ready returns what the host is to do, and
// keeps returning it until Advance acknowledges that Ready: the events to
// send, the periodic heartbeat, a recovery or a release to start, and the
// admission state when it changed. Agent runs this loop; a host that runs
// its own does the same:
//
//	for {
//		select {
//		case m := <-conn.Msgs():
//			_ = rt.Step(authority.Tick{Now: clk.Now()})
//			_ = rt.Step(m) // a refused message changes nothing
//		case <-beat.C():
//			_ = rt.Step(authority.HeartbeatDue{Progress: host.Progress()})
//		case <-tick.C(): // at rt.NextTick()
//			_ = rt.Step(authority.Tick{Now: clk.Now()})
//		}
//		rd := rt.Ready()
//		if rd.State != nil {
//			guard.Set(rd.State.Revision)
//		}
//		for _, ev := range rd.Events {
//			_ = conn.Send(ctx, ev)
//		}
//		if rd.Heartbeat != nil {
//			_ = conn.Send(ctx, *rd.Heartbeat)
//		}
//		rt.Advance(rd)
//		if rd.Recover != nil { // recover, then report the frontier
//			pos, _ := host.Recover(ctx, *rd.Recover)
//			_ = rt.Step(authority.FrontierReport{Star: rd.Recover.Required.Star, Pos: pos, Usable: true})
//		}
//		if rd.Release { // drain, then report where the chain ends
//			pos, _ := host.Release(ctx)
//			_ = rt.Step(authority.ReleaseDone{Progress: pos})
//		}
//	}
//
// Admit, Grant, NextTick, Topology, HealthPeers, Awaiting and Fenced are
// queries: they change nothing, and a host may call them at any time.
//
// In this library the "primary" is the star that holds a domain, the
// "required transaction" a position on the last holder's chain (Required),
// and a candidate's "frontier" how far it has recovered that chain
// (RecoverChain: fence and settle every epoch).
//
// # The loops a host runs
//
// Elector and Connector are the two loops around these pieces that every
// host needs; the host owns only the transports. An Elector campaigns
// for the domain's election on a fresh session, drives a Controller
// through a Driver while elected (waiting out a whole lease first unless
// the domain was never granted), gives the election up and campaigns
// again; Driver returns the current term's, for an operator's handoff
// request. A Connector keeps a node's control channel up: it dials, runs
// an Agent until the channel closes, resumes the grant held on the next
// one (Resume), and dials again with a backoff; its Admit, Grant and
// HealthPeers answer for the current agent. In one process, over Local:
//
//	local := authority.NewLocal()
//	e, _ := authority.NewElector(authority.ElectorConfig{Store: store, Node: "ctl-1",
//		Controller: authority.ControllerConfig{Domain: "orders"}, Send: local.Send},
//		authority.ElectorOptions{Attach: local.SetDriver})
//	go e.Run(ctx)
//	c, _ := authority.NewConnector(authority.ConnectorConfig{Runtime: rtCfg, Dial: dial, Host: host},
//		authority.ConnectorOptions{Agent: authority.AgentOptions{Guard: guard}})
//	go c.Run(ctx)
//
// Over the network, Send and Attach reach authhttp's Server as well, and
// a remote node's Dial is authhttp's Dialer.Dial.
//
// # Rules and where they are enforced
//
//	rule                                                code                                      test (authoritytest unless named; NN-name
//	                                                                                                is a script in authoritytest/testdata)
//	only the controller issues grants and tokens        Controller, Election.Save                 TokenMonotonicAcrossControllers
//	each token is newer than every earlier one          Controller (token+1), Election.Save CAS    TokenMonotonicAcrossControllers, RacingCampaigns
//	one controller at a time; a deposed one writes      Campaign, Election.Save (compares the      RacingCampaigns, TokenMonotonicAcrossControllers
//	  nothing                                             election key and the state)
//	admit only while the local grant matches and its    Runtime.Admit, Agent.Admit                01-grant
//	  deadline is valid
//	a former holder's token cannot reopen admission:    Runtime.Step (see, end), TopologyMsg      FormerHolderReconnects (every order of the
//	  any message showing a newer token (topology,        (Ended), Runtime.Admit                    reconnect's answers, each one lost),
//	  grant, heartbeat answer, revocation) ends the                                                 authhttp TestFormerHolderReconnectsOverTheWire,
//	  older grant at once, for good, whatever their                                                 TokenMonotonicAcrossControllers,
//	  order or loss                                                                                 02/03-reconnect-*
//	... nor advance cursors, coverage, publication      Guard (the token record's revision in     StaleTokenOnEveryWritePath
//	  (the progress fence)                                every transaction)
//	tokens are compared whole: a truncated or extended  Controller, Runtime, Guard, authhttp      TestControllerTokenTruncatedOrExtended,
//	  token is another token                              (stream, Connect, health)                 TestRuntimeTokenTruncatedOrExtended,
//	                                                                                                TestConcernClearedUnderAnotherToken,
//	                                                                                                TestGuardRevisionTruncatedOrExtended, authhttp
//	                                                                                                TestStreamTokenTruncatedOrExtended,
//	                                                                                                TestHealthTokenTruncatedOrExtended
//	a controller starts only from a state some          NewController (StateError, ErrBadState),  TestNewControllerRefusesCorruptState,
//	  controller wrote; a token never issued is           Controller.connect                        TestConnectClaimingATokenNeverIssued, TestStepNil
//	  refused, not ignored
//	no roles: capabilities declared independently;      Capabilities, Controller.connect          CapabilitiesAndMisaddressed, 04-offers
//	  a zero-capability session is invisible
//	an unexpected close reserves the token for the      Controller.disconnect, Connect with the   02/03-reconnect-*, ProcessTakeover
//	  same node to resume                                 held token, ControllerConfig.Reconnect
//	a holder timeout ends the grant at once; a later    Controller.tick, Controller.heartbeat     01-grant
//	  heartbeat cannot revive it
//	no next token before the former holder's deadline   Controller (fenceUntil), NewController     05-recovery, TokenMonotonicAcrossControllers
//	  has passed                                          (assumes a fresh deadline at election)
//	the controller publishes the minimum required       State.Required, RequiredMsg               04-offers, 05-recovery
//	a runtime offers only for the matching token,       Runtime.Step (Tick, DecisionDelay),       04-offers, 06-covering-candidate,
//	  after the decision delay, when usable and what      RecoverableReport, RecoverableHost,       TestAgentOffersOnlyWhenItCanRecover
//	  it can recover (from its image and the object       Offer.Recoverable
//	  storage, not only what it has materialized)
//	  covers the requirement
//	the controller never selects an offer that does     Controller.offer                          04-offers, 06-covering-candidate
//	  not cover the requirement
//	duplicate or racing offers cannot bypass the        Controller.offer (one durable candidate,  04-offers
//	  durable state                                       one proposal in flight)
//	a covering candidate that has not materialized      RecoverMsg, RecoverChain, Guard with the  05-recovery, RecoveryWithTheLibrary,
//	  the requirement is placed in recovery,              placement's revision                      06-covering-candidate
//	  read-only until the next token is durable
//	a candidate that does not recover within            Controller.recoveryTimedOut, askAgain,    RecoveryTimeout
//	  RecoveryTimeout loses the selection (its guard      ControllerConfig.RecoveryTimeout
//	  goes stale, its offers wait as long again) and
//	  another can be chosen
//	process takeover keeps the grant only while         Resume                                    ProcessTakeover
//	  identity, token and deadline validate
//	planned handoff: reserve a target, drain and        Phase Handoff, ReleaseMsg, ReleaseDone,   PlannedHandoff, HandoffCrashBeforeTransition,
//	  release, holder and token change in one durable     Released                                  TestEtcdLeaderRestartDuringHandoff (integration)
//	  transition; never a state without a holder
//	the new holder admits only after its grant; the     Runtime                                   PlannedHandoff
//	  old one stays fenced
//	an impostor cannot speak for another node           authhttp (the authenticated identity is   authhttp tests
//	                                                      the node; events naming another are
//	                                                      refused)
//	a node takes orders only from the controller, in    authhttp.Dialer (Controller, Identity,    authhttp TestDialVerifiesTheController,
//	  messages of bounded size                            MaxMessage)                               TestStreamMessageBound
//
//	direct health: one link per holder–peer pair,     PingResult, Runtime.HealthPeers, Agent        TestAgentPingsAndConcerns, authhttp TestHealthLinks
//	  bound to both identities and the token; pings     (AgentOptions.Pinger), authhttp.Pinger and
//	  every PingEvery, unhealthy after HealthWindow      NewHealthHandler (its token: Agent.HealthPeers)
//	a voter reports a concern for the exact token and  Runtime.health, Concern, ConcernCleared        07-fast-fence-guards, TestAgentPingsAndConcerns
//	  topology it saw; cleared if health recovers
//	a concern counts only from a voter whose link      Controller.concern (RoundTrip, Vote)          07-fast-fence-guards, FastFenceArithmetic
//	  completed a round trip; a nonvoter's report is   Advisory, Controller.advisory
//	  advisory (a heartbeat prompt, never an incident)
//	the first concern opens an incident: the holder's  Controller.concern, HeartbeatNowMsg,          FastFenceArithmetic
//	  heartbeat is recorded, it is asked for one, the   ConcernAnswerMsg (RetryAfter)
//	  reporter retries after ChallengeWait
//	the grant ends only when 2(R+H) > C, counted from   Controller.counts                              FastFenceArithmetic (C, R, H edge cases, nonvoters,
//	  current connections; otherwise the remaining                                                      zero-capability sessions)
//	  window is returned
//	a topology change discards the incident            Controller.topologyChanged                    07-fast-fence-guards
//	once confirmed unhealthy, a later ping cannot       Controller.endGrant (the token is no longer   FastFenceArithmetic
//	  revive the grant                                   current)
//	the holder challenges when the unreachable voters   Runtime.health, Challenge                     08-self-fence, PartitionedHolder
//	  and itself are a strict majority; no
//	  confirmation within SelfFenceWait closes its
//	  admission; the grant stays allocated
//	a confirmation for the same token and topology      Runtime.Step (GrantMsg with the decision's    08-self-fence, FencedHolderTopologyChange
//	  restores writes; a topology or authority change   topology), TopologyMsg, Runtime.health
//	  starts a new decision from the fence: the fenced
//	  holder challenges under the new topology (again
//	  each PingEvery) and reopens only on its
//	  confirmation
//	topology versions grow across controllers           NewController (the term in the high bits)     TestTopologyAcrossControllers
//	after a fast-fence confirmation the next token      Controller.concern (fenceUntil)               PartitionedHolder
//	  waits for the holder's self-fence, not its lease
//	  deadline
//	a crashed holder (its channel closed, the            Controller.lateConcern, TopologyMsg naming    CrashedHolderConfirmedLate
//	  reservation ran out) confirmed unhealthy by a      the last holder
//	  majority after the fact: the same shortening
//
// # Scenario scripts
//
// Scenarios that read as a sequence of steps are scripts in
// authoritytest/testdata, embedded in the suite so that they run on every
// backend. A script is a list of commands, each a line with a name and
// arguments (a node name alone, key=value, key=(a,b)), followed by
// "----" and the output it must print, up to a blank line:
//
//	heartbeat node-a progress=1/5
//	----
//	node-a → ctl: heartbeat token=1 progress=1/5
//	ctl → node-a: grant token=1 topology=1.1 holder=node-a deadline=+29s
//
// The output is what moved: the states the controller persisted, its
// messages (ctl → node), the nodes' events (node → ctl), what a node's
// Ready asked of its host, and each refusal with its reason; times are
// relative to the start of the fake clock, so every run and every
// backend prints the same. The first script (01-grant.txt) lists the
// commands. To add a scenario, write its commands, each followed by an
// empty "----" block, run
//
//	go test ./authority -run TestScenariosMem/Script -rewrite
//
// and read the outputs written: they are the scenario's assertions. A
// change in the controller or the runtime that alters what any script
// prints fails the suite with a diff naming the script's file:line.
//
// Failover on the fake clock (PartitionedHolder): the holder's links go
// down; 5 s later (HealthWindow) the voters report; 250 ms later
// (ChallengeWait) the challenged holder has not answered and the grant
// ends; the holder has closed its own admission 300 ms after its own
// suspicion (SelfFenceWait); the candidate offers after its decision
// delay and gets the next token, then fences and settles the holder's
// epoch (RecoverChain) before its first write.
//
// # Limits
//
// Deadlines are absolute times: the controller's and the runtimes' clocks
// must agree to well within a Lease. The controller never issues a next
// token before the former holder's deadline has passed on its own clock,
// and a runtime stops admitting at the deadline on its clock; skew larger
// than the margin breaks the exclusivity of admission (never the data:
// the epoch fence keeps a stale writer's records out regardless).
//
// # Metastore keys
//
// Under the root given to Campaign, Read, Guard and NewGuarded ("" or
// ending in '/'), per domain:
//
//	authority/<domain>/state       the domain's state (State): term, phase, holder, token, requirement
//	authority/<domain>/token       who may write the domain's progress: token and writer; its revision guards it
//	authority/<domain>/controller  the elected controller, bound to its session (Election)
//
// The writes:
//
//   - Campaign creates the controller key bound to the controller's
//     session, and Resign deletes it;
//   - Election.Save (and Load, which writes the next term) writes the
//     state, and the token record in the same transaction when the token
//     or the writer changes, compared with the election and the state
//     (and the token record when it is written);
//   - Guard and Guarded write nothing here: they add a compare on the
//     token record's revision to every transaction made through them, on
//     any key.
package authority
