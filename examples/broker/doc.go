// Command broker is the model host: a small log broker with an HTTP API,
// built on package lease (stream tenure) under the authority layer
// (package authority), the way a team would build its own. It is
// meant to be copied and changed; every part of it is in this directory,
// in files worth reading in order: format.go (the payload), node.go
// (leadership: the grant and the star), holding.go (the streams a star
// leads), produce.go and read.go, producers.go and snapshots.go (producer
// de-duplication and its snapshots), lifecycle.go (compaction, retention
// and trim), server.go (the HTTP API), listener.go (its connection
// bounds), fencing.go (the producers' fencing tokens), metrics.go
// (Prometheus), and main.go and flags.go (wiring and flags; with
// backends.go, localetcd.go (the embedded etcd), etcd.go, zonemodes.go,
// security.go, tryit.go and controller.go). The demonstration is in the
// files named demo*.go; a broker needs none of them.
//
// It is its own Go module, so that its dependencies on the Prometheus
// client and on the etcd server it embeds never reach the library's
// module.
//
// # The demonstration
//
// The subcommand demo runs a takeover with a zombie writer on this
// broker, with nothing to install, in ten to fifteen seconds:
//
//	go -C examples/broker run . demo
//
// It runs the controller and three broker nodes in one process, connected
// with authority.Local, each node with its HTTP API (TLS, a bearer
// token) and its direct health links, on an in-memory metastore and three
// filesystem zones (K=3, W=2). A producer drives load through the API.
// Then the holder fails: it loses all zones but W−1, where its PUTs are
// held back in the network, with appends in flight, and it is cut off
// from the controller, its peers and the metastore. The other nodes'
// health links detect it, the controller's fast fence ends its grant, a
// successor fences and settles its epoch (authority.RecoverChain) and is
// granted, its open gate admits the stream, and the producer goes on
// there, retrying what was not acknowledged with the same sequences.
// Then the old holder comes back as a zombie: its held-back PUTs land, it
// learns that its grant is gone, and it never acknowledges. Last, an
// operator hands the grant to the third broker, whose -producer-window is
// another (the brokers run different ones, as in the middle of a rolling
// change of configuration), and the producer sends every record again, as
// a client that lost its answers would: each is answered as a duplicate
// with its first acknowledgement, or refused as too old to judge (409);
// none is appended again. Then the new holder runs its lifecycle passes
// (see Compaction and retention) every 250 ms while a consumer reads the
// stream whole through its API, again and again: they settle the epoch
// the handoff left open, rewrite every flight into segments and trim
// them, and each read must hold every acknowledged record once; the
// zones' objects and the index's refs are counted before and after. The
// stream is read back through the API and
// checked against every acknowledgement, and cutlinetest.Check checks
// cutline's six guarantees over the zones and the store. It prints the
// timeline as it happens, taken from the nodes' logs and the grant's
// changes, with times from the start (and, on stderr, what it waits for): the gate's decisions, the grant changes, the fence's
// cut, what settlement deleted and covered; then the nodes' object
// requests by kind, and, last, the verdict: "acknowledged N, readable N,
// lost 0, duplicated 0". Among the findings before it: how many records
// the successor read back to rebuild its producers, past the snapshot its
// predecessor saved. It exits with status 1 if anything did not hold, 2
// for a bad flag. A position E/S in its output is slot S of epoch E.
//
// Its flags: -records, -crash-after, -inflight, -snapshot-every (records
// between the holder's producer snapshots, 50), -k, -w, -window, -latency,
// -seed, -session-ttl, -timeout, -logs (the brokers' logs on stderr), and
// -etcd and the S3 flags, which run it against real servers (each run
// keeps its metadata under /cutline-demo/<run>/ and its objects under
// demo-<run>/); -h lists them with their ranges.
//
// # Trying it
//
// With no flags it runs everything in one process, and keeps it: the
// authority controller and one broker node connected to it in process
// (authority.Local), an etcd server embedded in the process as the
// metastore, and three filesystem zones (K=3, W=2), all in its data
// directory, -dir (./cutline-data, made absolute: see The data directory
// and the embedded etcd). It makes itself a TLS certificate for
// localhost and a bearer token, writes them to ca.pem and token in that
// directory (readable by the owner only, made anew at every start), and
// logs their paths, never the token, and, once its API listens, the
// commands to paste, with those paths:
//
//	go -C examples/broker build . && cd examples/broker && ./broker
//	# ... msg="data directory: ..." dir=/home/me/cutline/examples/broker/cutline-data
//	# ... msg="metastore: embedded etcd" data=/home/me/.../cutline-data/etcd endpoint=127.0.0.1:2479 root=/cutline-broker/ ...
//	# ... msg="made credentials for this run: ..." ca=/home/me/.../cutline-data/ca.pem token_file=/home/me/.../cutline-data/token
//	# ... msg="paste to produce" cmd="curl -s --cacert /home/me/.../cutline-data/ca.pem --oauth2-bearer $(cat /home/me/.../cutline-data/token) --data-binary hello https://127.0.0.1:8080/v1/streams/orders/records"
//	# ... msg="paste to consume" cmd="curl -s ... 'https://127.0.0.1:8080/v1/streams/orders/records?offset=0&limit=10'"
//	# ... msg="paste to read the metrics" cmd="curl -s ... https://127.0.0.1:8080/metrics"
//	# ... msg="paste to inspect the metastore" cmd="cutline -etcd 127.0.0.1:2479 -etcd-root /cutline-broker/ chain broker-1"
//
// The commands hold no double quote, which a text log line would
// escape: the token goes to curl's --oauth2-bearer. Or, in another shell:
//
//	D=$PWD/cutline-data
//	c() { curl -s --cacert "$D/ca.pem" --oauth2-bearer "$(cat "$D/token")" "$@"; }
//	c --data-binary 'hello' https://127.0.0.1:8080/v1/streams/orders/records
//	# {"offset":0,"epoch":1,"slot":0}
//	c --data-binary 'again' -H 'Cutline-Producer: p1' -H 'Cutline-Sequence: 1' https://127.0.0.1:8080/v1/streams/orders/records
//	c 'https://127.0.0.1:8080/v1/streams/orders/records?offset=0&limit=10'
//	# [{"offset":0,"data":"aGVsbG8="},{"offset":1,"data":"YWdhaW4="}]
//	c https://127.0.0.1:8080/v1/streams
//	c https://127.0.0.1:8080/metrics          # the token, here too
//	cutline -etcd 127.0.0.1:2479 -etcd-root /cutline-broker/ chain broker-1
//
// SIGTERM or SIGINT shuts it down cleanly (exit status 0): every stream
// leaves with its clean-release mark and its producer snapshot. Started
// again on the same directory, it goes on where it stopped: every record
// acknowledged is there, once, and a producer's retry is still answered
// as a duplicate. After a kill -9 too: the new star fences and settles
// what the dead one left, and rebuilds the producers from the last
// snapshot and the records after it. Either way the restarted broker
// first waits out its former grant (-lease, 10 s; its log says so, and
// the API answers 503 with Retry-After meanwhile), and after a kill also
// the dead process's metastore sessions (-session-ttl, 5 s).
//
// -ephemeral runs on an in-memory metastore and zones in a temporary
// directory instead, everything gone at exit (-dir and -etcd are refused
// with it: zones kept without their metastore could not be read again).
//
// # The data directory and the embedded etcd
//
// Without -etcd, a -role all broker runs etcd in its own process
// (go.etcd.io/etcd/server/v3/embed): one member, its data in -dir/etcd,
// its clients served on -etcd-listen (127.0.0.1:2479), which must be a
// loopback address. It is plain text without authentication, so that
// cutline reaches it with -etcd 127.0.0.1:2479 -etcd-root /cutline-broker/:
// every user of the machine can, and could rewrite who holds what. On a
// machine shared with users you do not trust, run an etcd with TLS and
// users, and give -etcd. Its bounds, set by the broker:
//
//   - a quota of 1 GiB for its database: past it etcd raises its NOSPACE
//     alarm and refuses writes, and so produces fail; the next start
//     disarms the alarm (etcd raises it again if the data still does not
//     fit);
//   - 10 minutes of history: it compacts every older revision (periodic
//     compaction), so that the index pages the broker rewrites do not
//     pile up;
//   - at start-up it defragments its database when that frees 64 MiB or
//     more: a file compaction emptied shrinks;
//   - a snapshot every 10,000 writes, at most 5 snapshots and 5
//     write-ahead log files of 64 MB, preallocated: the directory takes
//     about 130 MB from the first start.
//
// Its warnings and errors go to the broker's log, prefixed "etcd:". Its
// writes are fsynced, as the filesystem zones' are: an acknowledged
// record survives a crash of the machine, not only of the process (the
// three zones share one disk, though). A second broker on the same data
// directory (its etcd.lock), or the same -etcd-listen, does not start,
// and says why.
// With -etcd, -dir holds the filesystem zones and the credentials made for
// the run; with S3 or Azure zones, only the credentials.
//
// # The API
//
// Every route under /v1, and /metrics, requires the header
// "Authorization: Bearer <token>" (401 otherwise, and the connection is
// closed; the token is compared in constant time). Errors are {"error":
// "..."}, a route that does not exist (404) and a method a route does not
// take (405, with Allow) too; a path that is not clean (//records) is a
// 404, never a redirect. Every 503 carries Retry-After. A 500 says only that it happened: {"error": "...", "request_id":
// "<id>"}, also in the header Cutline-Request-Id, under which the broker
// logs its cause.
//
//	POST /v1/streams/{stream}/records
//
// appends the body, one record of at most -max-record bytes (1 MiB; 413
// above), to the stream, whose name is 1 to 64 bytes of [A-Za-z0-9._-].
// It answers 200 {"offset": N, "epoch": E, "slot": S} only once the
// record is durable: its flight holds W copies and every earlier slot is
// committed (the lease.Future acknowledged it). Optional headers:
//
//   - Cutline-Producer and Cutline-Sequence (together): the record is
//     producer's record number seq. A retry of a record the stream holds
//     already is not appended again: it gets the first answer, with
//     "duplicate": true. Retrying with the same pair is safe, also after a
//     takeover (see Producers and snapshots), while seq is within
//     -producer-window of the producer's highest sequence; a sequence
//     below that window whose answer is no longer kept (or below what a
//     holder with a narrower window kept) is refused with 409, never
//     appended twice. The same pair with another payload is a client's
//     mistake: 409, not appended. Sequences need not be contiguous: a gap
//     is accepted, and a sequence inside it sent later is a new record;
//     the broker judges a sequence only by whether the stream holds it.
//   - Cutline-Fencing-Token: the producer's fencing token (installed with
//     PUT .../token, below), judged with lease.Star.CheckToken by exact
//     equality: 409 when it is not the stream's installed one (a
//     truncated or extended form of it included; also one presented on
//     a stream with none installed, and none on a fenced stream); 400
//     when it is not a token at all (lease.ValidateToken: more than 256
//     bytes, not UTF-8, a control character). A produce judged before
//     an install is judged again after it, never appended on the old
//     judgement.
//
// 503 when this broker cannot take the record now, with Retry-After: 1
// and, when known, {"holder": "<node>"}, the broker holding the grant,
// which a client sends the record to instead. A 503 after the record was
// submitted means its outcome is unknown: retry with the same producer
// sequence. 429 when the stream would be one more than the holder may
// lead (-max-streams, 1024): each costs a producer table in memory.
//
//	GET /v1/streams/{stream}/records?offset=N&limit=M
//
// reads up to M (1 to 1000, default 100) records from offset N (default
// 0) through the coverage index (settle.RefIndex) and a
// settle.StreamReader, from segments and flights alike:
// [{"offset": N, "data": "<base64>"}, ...]. An offset below the stream's
// retention point (see Compaction and retention) is answered 410 Gone,
// {"error": "...", "start": S}, and the header Cutline-Start-Offset: S,
// where S is the stream's first offset still served: a consumer that fell
// behind retention resumes from S. A stream that holds no
// records (unknown, or not covered yet) is a 404; a read at or past the
// end of one that does is 200 with an empty list, and
// Cutline-Next-Offset says where it ends. The answer stops early, before
// the record that would take it past -max-read-bytes (8 MiB; one record
// at least, whatever its size): the header Cutline-Continue-Offset says
// where to read on (one past its last record), and Cutline-Next-Offset
// where the stream's coverage ends. It is written record by record as
// each is read, so a read holds about one record in memory; a record that
// cannot be read once the answer has begun cuts the connection, so that
// the client sees a failed read, never a short one. At most -max-reads
// (16) reads are served at once; more are answered 503 with
// Retry-After: 1. Any broker serves reads; the holder covers what it
// acknowledged before it reads (Star.Absorb), so that it reads its own
// writes, while another broker sees what the holder has covered so far.
//
//	GET /v1/streams?after=NAME&limit=N
//
// lists the streams whose names follow NAME (from the first by default),
// N at most (1 to 1000, default 100), in name order: {"holder": "<node
// holding the grant>", "streams": [{"stream", "holder" (the star holding
// its lease), "writer", "epoch", "tenure", "epoch_state", "cut" (once
// fenced), "start" (its retention point), "next", "released" (the reason
// of a standing clean-release mark)}], "next": "<the after of the next
// page, when there is one>"},
// from lease.Inspect and RefIndex.Next (the holder covers what it
// acknowledged first, so next is where the stream ends).
//
//	PUT /v1/streams/{stream}/token?mode=fenced|any
//
// installs the body as the stream's producer fencing token
// (lease.Star.Fence), one trailing newline aside, and answers 200 with
// the token installed: {"stream": "orders", "mode": "fenced", "token":
// "<the token>"}. From then on a produce passes only with that token in
// Cutline-Fencing-Token; in mode any (?mode=any; fenced is the default)
// a produce without one passes too, and an empty body removes the token.
// The previous token is fenced: a producer that still presents it gets
// 409. If the holder has the stream open, it leaves it and opens it again
// under the new token, with no produce in between. A body that is not a
// token, an unknown mode or a fenced stream without a token is 400; a
// broker that does not hold the grant answers 503 with Retry-After and
// {"holder": "<node>"}, as a produce does; 409 when another install
// changed the token meanwhile. The token is a coordination between
// producers, not a credential of the API (the bearer token is), and the
// broker never logs it.
//
//	POST /v1/health?token=N
//
// is a peer's ping on a direct health link (authhttp.NewHealthHandler):
// no bearer token, but the client certificate of a node (its URI SAN
// cutline://node/<name>, verified against -tls-ca), and 200 only when N
// is the token this broker's links are bound to (the holder's grant, as
// its last topology from the controller says), 409 otherwise, 403
// without a node certificate.
//
//	GET /metrics
//
// is the Prometheus page, behind the token like /v1 (Prometheus sends one
// with its authorization settings); -metrics-listen serves it without the
// token on a plain-HTTP listener of its own, which serves nothing else,
// for a scraper on a private network. The registry is the node's own:
//
//	cutline_broker_append_seconds              histogram: Submit to acknowledgement
//	cutline_broker_slots_in_flight             gauge: slots the current writer has in flight
//	cutline_broker_absorb_backlog_flights      gauge: acknowledged flights not yet covered in the index
//	cutline_broker_http_requests_total         counter: API requests by route (the pattern matched) and code
//	cutline_broker_http_request_seconds        histogram: time to answer an API request, by route
//	go_*, process_*                            the Go runtime's and the process's own (goroutines, heap, fds)
//	cutline_broker_fence_seconds               histogram: fences run by the open gate and by recoveries
//	cutline_broker_fence_rounds                histogram: their sequential round trips
//	cutline_broker_undecided_slot_age_seconds  gauge: age of the oldest slot the fencer is blocked on (fence.Fencer.Undecided); alert on it
//	cutline_broker_settles_total               counter by source (gate, recovery, lifecycle) and result (settled, already_settled)
//	cutline_broker_snapshot_saves_total        counter by result (saved, refused: too big, failed): producer snapshots
//	cutline_broker_replayed_records_total      counter: records read back to rebuild producers, past their snapshot
//	cutline_broker_gate_decisions_total        counter by decision (fresh, mark_consumed, settled_inline, settled_after_death, already_settled)
//	cutline_broker_grant_changes_total         counter by change (gained, lost)
//	cutline_broker_object_requests_total       counter by zone, op (create, get, get_range, delete, list) and result (ok, not_found, exists, canceled, error)
//	cutline_broker_health_pings_total          counter by result (ok, failed): pings of the node's direct health links
//	cutline_broker_health_links_up             gauge: links of the current topology whose last ping completed
//	cutline_broker_api_connections             gauge: connections the API keeps open
//	cutline_broker_api_connections_closed_total counter by reason: closed on accept (total, per_address), or silent, to make room (evicted)
//	cutline_broker_compacted_bytes_total       counter: bytes of records rewritten from flights into segments
//	cutline_broker_segments_written_total      counter: segments written and referenced
//	cutline_broker_lifecycle_deleted_objects_total counter by kind (flight: trimmed; segment: collected): object copies deleted
//	cutline_broker_retention_expired_records_total counter by limit (age, bytes, records): records retention dropped
//	cutline_broker_retention_ref_pages_deleted_total counter: ref pages retention deleted
//	cutline_broker_compaction_backlog_flights  gauge: flights below their epoch's checkpoint, neither rewritten nor trimmed
//	cutline_broker_oldest_uncompacted_seconds  gauge: how long the oldest of them has waited at its epoch's rewritten cursor
//	cutline_broker_lifecycle_passes_total      counter by result (ok, error)
//	cutline_broker_lifecycle_errors_total      counter by stage (absorb, retain, list, settle, compact, trim, collect, budget)
//	cutline_broker_lifecycle_pass_seconds      histogram: duration of a pass
//
// The lifecycle's gauges are the holder's, as its last pass left them (0
// on the other nodes); the retention point of each stream is in the
// listing rather than a metric, whose series would grow with the streams.
//
// # Producers and snapshots
//
// The holder keeps each stream's producer table (producers.go) bounded,
// as a Kafka broker bounds its producer state: per producer, the answers
// of its sequences within -producer-window (128) of its highest, and at
// most -producers (1024) producers, the least recently active expiring
// first (their product is at most 4194304). A snapshot is at most
// lease.MaxSnapshotLimit bytes: a table too big for one is not saved
// (cutline_broker_snapshot_saves_total{result="refused"}), and a new
// holder replays from the last one that was. An expired producer is new
// again: its retries are no longer recognized.
//
// The holder saves the table, with the offset it is applied up to, as
// the stream's snapshot (lease.Star.SaveSnapshot, fenced by its tenure)
// every -snapshot-every records (1000) and every -snapshot-interval (30s)
// when records came, and in the release flush of every departure
// (lease.Options.Flush), before the clean-release mark. A new holder loads
// it (lease.Star.LoadSnapshot) and reads back only the records from its
// offset on: nothing after a planned handoff, the records since the last
// snapshot after a crash. A snapshot that does not load is set aside and
// the whole stream is read. The log line "stream ready" says how many
// records were read back (replayed) and from which snapshot offset.
//
// The window travels with the snapshot: each producer's entry keeps the
// lowest sequence it can still judge, and a sequence below it that it does
// not keep is refused with 409 whatever the window of the broker judging
// it. So a change of -producer-window (a rolling restart with another
// value) takes effect as the table goes on: a narrower window lets go of
// the excess when the next holder loads the snapshot; a wider one does not
// bring back what the narrower one let go of, and those sequences stay
// refused until the producer's sequences have moved the wider window past
// them. The table is thus a function of the stream's records and of the
// windows of the holders that applied them. A whole replay (no snapshot,
// or one that does not load) saw every record, and judges with the loading
// broker's window alone.
//
// # The payload
//
// Each flight carries one record of one stream, in the broker's own
// binary-safe format (format.go): a magic "cbr1", the stream's name and
// the record's offset (what the Locator hands the index), the producer
// and its sequence number (what a new holder rebuilds deduplication
// from), then the data, opaque.
//
// # Compaction and retention
//
// Every flight holds one record and stays in K zones, and every ref stays
// in the index, until something deletes them. The node holding the grant
// runs a pass every -compact-interval (1m; 0 turns the passes off, and
// the broker keeps everything) that, in this order:
//
//  1. applies each stream's retention (RefIndex.RetainPolicy): the
//     stream's retention point moves up as far as -retention-age (a ref
//     page, 64 records, at a time, by when its newest record joined the
//     index), -retention-bytes (the records' bytes as stored, the newest
//     kept) and -retention-records allow, and the ref pages wholly below
//     it go. All three are 0 by default: nothing expires;
//  2. settles the epochs earlier holders left open (a planned handoff
//     leaves its holder's epoch open), but only those minted before its
//     grant, so that a pass that outlives its grant never fences its
//     successor's epoch: an open epoch's last ref page of each stream
//     stays with its writer and holds back the compaction of everything
//     after it;
//  3. compacts every epoch below its checkpoint (settle.Compactor): each
//     stream's records are rewritten into a segment per run of its ref
//     pages, and the pages moved onto it; what retention dropped is not
//     rewritten;
//  4. trims each epoch below its rewritten cursor (TrimRewritten);
//  5. collects the segments no ref page names any more (Collect).
//
// Only the holder runs passes: the epochs' cursors then have one writer,
// and no two compactors rewrite the same flights only for one to lose
// every compare-and-set. The library would tolerate both (segments never
// share a key; pages and cursors move by compare-and-set; a crash leaves
// garbage that Collect deletes), and the holder's metastore writes go
// through its Guarded store: a node whose grant ended has its cursor
// moves refused before it deletes anything. A pass takes at most 64
// epochs to compact and trim, 16 to collect and 1024 streams to retain,
// in turn across passes, and gives up after the interval (30 s at least,
// 10 min at most), the next going on where it stopped; every step is
// idempotent. It logs one line, "lifecycle pass" (info when it did
// something, warn when a step failed, debug otherwise).
//
// Reads serve segments and flights alike, during a pass too: a flight
// trimmed after its ref moved is read from its segment. A record below
// its stream's retention point is gone (410 on a read); a new holder
// rebuilding producers skips what retention dropped past the last
// producer snapshot, so retries of those records are no longer
// recognized, and a retry of a record the holder still remembers but
// retention dropped gets its first acknowledgement unchecked.
//
// # Leadership
//
// The whole broker cluster is one authority domain (-domain): one grant,
// one holder, every stream. Each broker runs an authority.Agent over its
// control channel to the controller, with the node as its Host:
//
//   - on a grant, it starts a lease.Star (a new metastore session) whose
//     minter, index and settler write through an authority.Guarded store
//     that follows the grant, and whose Options.Admit is the agent's
//     Admit: it writes only while its grant is current, and a stale
//     grant's progress writes fail;
//   - it opens a stream on its first produce, with OpenWait (a deferred
//     open, a predecessor that may still be alive, is retried for up to
//     10 s, then answered 503);
//   - Progress is its chain's last acknowledged position, sent with every
//     heartbeat: what the next holder must recover;
//   - Release (a planned handoff) drains every stream through Finish, so
//     that each gets its clean-release mark and the new holder's open
//     consumes it;
//   - Recover (an unplanned takeover) fences and settles the last
//     holder's chain with authority.RecoverChain over the Guarded store;
//     the node admits nothing until the controller's next token;
//   - when its grant ends (revoked, expired, handed off) it aborts its
//     star (Star.Abort): it writes nothing more, and its successor settles
//     what it left;
//   - on SIGTERM it closes its star (Star.Close: every held stream leaves
//     through Finish and gets its mark), then says goodbye to the
//     controller, which ends the grant at once, and exits 0.
//
// A broken control channel is dialed again with a fresh runtime that
// resumes the grant (authority.Resume) while it validates. The brokers
// declare the storage and promotable capabilities, and, given -peers,
// the vote: they then run direct health links (the agent's Pinger,
// authhttp.Pinger over mutual TLS to each peer's POST /v1/health). Every
// second the holder pings every other voter and every other broker pings
// the holder, each ping bound to the holder's token. The controller's
// fast fence counts the voters' reports:
//
//   - a holder that stops answering while its control channel stays
//     open (a stopped process, a partition) loses its grant once its
//     links have been down for the health window (5 s) and a majority
//     agrees; the next token waits only for its self-fence (300 ms),
//     not for its deadline;
//   - a holder whose control channel closes (a crashed process) keeps
//     its grant for its reconnect reservation (2 s), and the next token
//     waits for its deadline (-lease after its last heartbeat): the
//     controller cannot tell a dead process from a cut connection;
//   - a holder that cannot reach a majority of the voters asks the
//     controller to confirm its heartbeat, and stops admitting writes if
//     no confirmation comes within 300 ms.
//
// Without -peers a broker runs no links and does not vote (a vote is a
// report on the links), and a holder that stops answering loses its grant
// at its deadline. Whatever admission says, a former holder's writes
// fail by the epoch fence: its successor fences its epochs before its
// first write, so nothing it writes later is acknowledged.
//
// A handoff is an operator's request to the controller: an identity named
// in -operators posts it with authhttp.Post (a HandoffRequest naming the
// target broker); a process embedding the controller steps it on its
// driver.
//
// # Running a cluster
//
// Roles (-role):
//
//	all         the controller and one broker in this process (the default);
//	            with -controller-listen, other brokers can join it
//	controller  only the controller, serving its nodes on -controller-listen
//	broker      a broker of the controller at -controller
//
// Anything but the embedded default needs -etcd (every process of the
// cluster shares one metastore), and the control plane is mutual TLS:
// -tls-cert and -tls-key are the process's certificate, whose single URI
// SAN cutline://node/<name> names the node (authhttp.NodeIdentity; it
// must be -node), and -tls-ca verifies the peers. The API uses the same
// certificate as its server certificate, and -auth-token-file the bearer
// token. Without -insecure the API needs both TLS and a token: a -role
// all process given neither makes them for the run, on -etcd as on its
// embedded etcd, and logs where ("made credentials for this run"); a
// -role broker needs its own. -insecure serves it with whatever of the
// two is given, and logs a warning.
//
// -peers lists every broker of the cluster as name=https://host:port, the
// base URL of its API (the same list for every broker: a broker skips
// itself). The health links run on the API's listener, under the same
// certificate, so a broker's certificate given with -peers or -role
// broker must carry, besides the names its API is reached by (DNS or IP
// SANs), exactly one URI SAN, cutline://node/<-node>, and the extended
// key usages serverAuth and clientAuth (it is presented on both ends of a
// ping); a broker whose certificate names another node refuses to start.
// The API then asks its clients for a certificate and verifies one given
// against -tls-ca; clients without one are served as before. A broker
// takes orders (revocations, releases, recoveries) only from the
// controller whose certificate names -controller-identity: every node's
// certificate chains to the same CA, so the CA alone cannot tell the
// controller from a node posing as it. The controller's certificate
// carries its identity like a node's (cutline://node/<-node>).
//
//	export CUTLINE_ETCD_PASSWORD=...
//	broker -role controller -node ctl -etcd https://10.0.0.5:2379 -etcd-ca etcd-ca.pem -etcd-user cutline \
//	    -tls-cert ctl.pem -tls-key ctl.key -tls-ca ca.pem -controller-listen :8443 -operators ops
//	broker -role broker -node broker-1 -listen :8080 -controller https://ctl:8443 -controller-identity ctl \
//	    -etcd https://10.0.0.5:2379 -etcd-ca etcd-ca.pem -etcd-user cutline \
//	    -tls-cert broker-1.pem -tls-key broker-1.key -tls-ca ca.pem -auth-token-file token \
//	    -peers broker-1=https://b1:8080,broker-2=https://b2:8080,broker-3=https://b3:8080 \
//	    -s3-endpoint http://s3:7070 -s3-buckets zone-a,zone-b,zone-c -s3-access-key KEY
//
// The zones are filesystem directories under -dir (K of them, -k), or S3
// buckets (-s3-endpoint, one URL or one per bucket, -s3-buckets,
// -s3-region, -s3-access-key, -s3-secret-key), verified at start-up
// (create-only, K distinct stores). GCS zones are not supported by this
// example (package objstore/gcs is a module of its own). -w is the copy
// quorum, -window the pipeline window. -latency (20ms, say) delays every
// zone request by that much (objstore/latency): a model of remote zones on
// local ones. -producers, -producer-window, -snapshot-every and
// -snapshot-interval bound the producer tables and time their snapshots
// (0 turns a snapshot trigger off). The filesystem zones' objects and
// directories are the owner's only, -zone-file-mode (0600) and
// -zone-dir-mode (0700).
//
// etcd holds the grants, the epochs and the index: anyone who can write
// to it can rewrite who holds what. -etcd-ca makes the connections to it
// TLS, verified with that CA (https:// endpoints do too, with the system's
// CAs; an http:// endpoint with -etcd-ca is refused, since the etcd client
// would talk plain text to it); -etcd-cert and -etcd-key are the client
// certificate etcd's --client-cert-auth asks for, -etcd-user and
// -etcd-password (better CUTLINE_ETCD_PASSWORD) an etcd user of a role
// that may read and write under -etcd-root.
//
// The API bounds what one client can take: at most -max-conns
// connections in all (1024) and -max-conns-per-addr (64) from one IP
// address. A connection past its address's bound is closed as soon as it
// is accepted; past the bound in all, the oldest connection that has not
// begun a request yet is closed to make room (the new one, when every
// connection has), so that a flood of silent connections cannot keep a
// client out. Together with the controller's listener the API takes at
// most a half of the file descriptor limit (a larger -max-conns is
// refused, the default lowered), so that the zones and etcd always have
// descriptors left. A connection gets 5 s to send a request's headers and
// is closed after 5 s idle.
// -max-read-bytes, -max-reads and -max-streams bound the reads and the
// streams (see The API). -compact-interval, -retention-age,
// -retention-bytes and -retention-records time the holder's passes and
// set every stream's retention (see Compaction and retention); retention
// without passes is refused.
//
// Every flag can be given as an environment variable instead, CUTLINE_
// and its name in upper case with '_' for '-': CUTLINE_ETCD,
// CUTLINE_S3_SECRET_KEY (better there than on a command line),
// CUTLINE_AUTH_TOKEN_FILE, CUTLINE_PEERS. A flag given beats its variable.
// With S3 zones, the standard AWS environment gives what neither does:
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (static keys: the example's
// client takes no session token) and AWS_REGION. -log-json logs JSON
// lines; no log line, metric label or error answer ever holds a token or
// a secret.
//
// # Limits
//
//   - One record per flight: simple, and one round of PUTs per record.
//     A host that batches puts several records (and streams) in one
//     flight; settle.Span supports it.
//   - A broker opening a stream reads back the records past the stream's
//     producer snapshot, one chain read each; after a crash that is up to
//     -snapshot-every records (or -snapshot-interval's worth).
//   - Reads from flights cost an object read per record; from segments,
//     one ranged read serves the records of 4 MiB.
//   - A pass lists every epoch record and every stream's keys, which grow
//     with the grants and the streams, and reads each epoch's segments.
//   - The holder's open epoch keeps each stream's last, unsealed ref page
//     (up to 63 records) in flights, and with it every flight of the epoch
//     after the oldest of them: a stream that rarely gets a record holds
//     back the compaction and the trim of the whole epoch (a pass then
//     reads the same 1024 flights again) until its page fills or the
//     epoch ends (a handoff, a restart).
//   - A zombie's PUTs that land past its epoch's cut after the epoch was
//     settled are never deleted (nothing ever reads them).
//   - One retention policy for every stream.
//   - The listing reads the keys of every stream from the metastore at
//     once (metastore.Store.List has no range); its page bounds the reads
//     of each stream's state.
//   - The controller's requirement is as recent as the holder's last
//     heartbeat; a successor that recovered less is still safe, since its
//     open gate settles the rest.
//   - One bearer token for every client, which may produce to and read
//     every stream: a deployment that needs identities or per-stream
//     rights puts a proxy in front that has them.
//   - -ephemeral's in-memory metastore loses everything at exit.
//   - The embedded etcd serves every user of the machine, without TLS or
//     authentication (see The data directory and the embedded etcd).
package main
