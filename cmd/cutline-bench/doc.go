// Command cutline-bench measures cutline's performance figures and prints
// them as one Markdown table (or JSON with -json), each figure beside the
// reference it was measured against in the same run, so that runs on
// different machines, or on one machine under different load, can be
// compared by their ratios:
//
//	go -C cmd/cutline-bench run .                 # everything, a few minutes on 2 cores
//	go -C cmd/cutline-bench run . -json           # the same as JSON
//	go -C cmd/cutline-bench run . -only fence,mint
//	go -C cmd/cutline-bench run . -quick          # a small run: every row, rough figures
//	go -C cmd/cutline-bench run . -price-standard-put 0.0055   # the cost model at other prices
//	go -C cmd/cutline-bench run . -only streams -streams-rate 20000 -streams-load 60s
//	go -C cmd/cutline-bench run . -only streams -cpuprofile streams.prof   # go tool pprof reads it
//	go -C cmd/cutline-bench run . -only retention,catchup   # lifecycle: retention, compaction, catch-up
//
// It starts the servers it needs itself, as the tests do: three versitygw
// processes (S3; scripts/install-servers.sh installs the binary) and one
// embedded etcd member. Without versitygw the S3 figures are skipped,
// unless CI=true, which makes them fail; the table's first line names the
// figures skipped. Each row's note is a number, [1], with the notes
// below the table, so that rows fit a terminal. It exits with status 0
// (also for -h and skipped figures), 1 when a figure failed, 2 for a bad
// flag.
//
// The figures (-only takes these names; a name also selects the figures
// it prefixes with a dash: "appends" all three appends figures, "takeover"
// the takeover-stream and takeover-history figures too):
//
//	appends-mem, appends-fs, appends-s3
//	          appends/s of a chain.Writer (K=3, W=2, 1 KiB, window 64) ÷
//	          a sequential raw create loop of the same flights (on S3 also ÷
//	          raw create-only PUTs at the writer's concurrency, 64 per zone);
//	          the two alternate in short rounds
//	pipeline  appends/s with 5 ms and 20 ms per create ÷ window ÷ latency
//	latency   append latency p50 and p99, under fixed and lognormal
//	          (p50 8 ms, p99 40 ms, independent per zone) create latency, ÷
//	          the W-th fastest of the K creates of the same slots
//	allocs    ns and allocations per append ÷ the raw loop's per slot
//	fence     round trips, requests and time to fence a synthetic epoch of
//	          10, 10³ and 10⁶ slots (20 ms per request) ÷ the literal walk
//	takeover  fence + settle of a dead writer's epoch, and a planned roll,
//	          at 20 ms per request: time (÷ one request's latency) and requests
//	takeover-stream
//	          a takeover (fence + settle, then RefIndex.Next) of an epoch of
//	          10³, 10⁴, 10⁵ and 10⁶ records, 16 of them not covered, with a
//	          ragged tail of a full window: time at 20 ms per request,
//	          metastore keys read, object requests, each ÷ the same at 10³
//	          (goal: flat). The checkpointed prefix is synthetic
//	          (internal/synth buckets answer for any number of slots without
//	          storing them; its refs are written as 1,000 spans, which the
//	          takeover never reads); the rest is laid out for real
//	takeover-history
//	          the same takeover (1,000 records) after 10, 10³ and 10⁴ past
//	          epochs of the star (minted, published empty, settled), ÷ the
//	          same after 10
//	mint      epoch.Minter.Mint on embedded etcd ÷ a raw clientv3 transaction
//	heap      peak live heap over 10⁶ appends ÷ window × payload
//	idle      object and metastore requests of a Writer, a Roller and a
//	          lease.Star holding 3 open streams (its metastore on embedded
//	          etcd) left idle for 60 s; the Star's session keep-alives
//	          apart (counted on the wire, beside one per TTL/3); and the
//	          authority controller and holder over the same period of
//	          simulated time (heartbeats every second, ticks every 100 ms)
//	batch     records/s of 100-byte records through batch.Producer
//	          on a star, on mem, fs and versitygw ÷ raw create-only PUTs
//	          of the producer's mean flight at the writer's concurrency
//	cost      object requests per append (writer on counted zones) ÷ K
//	streams   10, 100, 1,000 and 10,000 streams on one lease.Star (embedded
//	          etcd; three in-memory zones at 20 ms per request; K=3, W=2,
//	          window 64, the Star's defaults): 100-byte records offered
//	          round robin at 5,000 records/s for 5 s through batch.Producer
//	          (Linger 5 ms); metastore transactions, reads and keys created
//	          per record, live bytes and bytes put in etcd per record, the
//	          largest absorb backlog ÷ AbsorbEvery + window, the time and
//	          transactions of a fresh OpenMany of every stream, and of a
//	          successor's OpenMany of every stream after the star was killed
//	          under load (Abort, session revoked); each count ÷ the same at
//	          10 streams. -streams-rate, -streams-load and -streams-counts
//	          change the load and the counts (the first is the reference).
//	          A compact table of it follows the main one
//	retention a simulated day (fake clock, in-memory stores) of steady
//	          appends over 10 streams with one hour of retention, compacted,
//	          trimmed and collected every ten minutes: the peak objects,
//	          bytes and metastore keys stored in each later hour ÷ the
//	          second hour's (flat is a ratio near 1); the bytes and objects
//	          held all month at that load ÷ a month of appends kept whole;
//	          the object requests maintenance (compaction, trim, collection)
//	          spends per record, by kind, ÷ K creates per append
//	catchup   a consumer catching up on one stream of 1,000 interleaved
//	          ones (100-byte records appended round robin through
//	          batch.Producer on a lease.Star, a flight holding about one
//	          record of each stream; embedded etcd; three in-memory zones at
//	          20 ms per request), from offset 0 through settle.StreamReader:
//	          bytes/s and object GETs per record from flights, before
//	          compaction, and from segments, after it, each ÷ plain ranged
//	          GETs of the same bytes from the same segment objects (targets:
//	          ≥ 0.8 of the raw rate, ≤ 0.01 GETs per record); and the
//	          compaction's records/s and bytes/s (one settle.Compactor, its
//	          defaults) ÷ the appends' in the same run (target ≥ 1)
//
// After the table comes the cost model: the object-store request cost of
// a million appends (at K creates per flight, the writer's most, and as
// measured: a zone whose turn comes after the slot was decided is
// skipped), of a takeover (each takeover figure's largest size
// too), of a planned roll, and of each idle component per chain per month
// (the idle period's requests scaled to 30 days), and of a month of
// retention maintenance at the retention figure's load, at S3 Standard
// and S3 Express One Zone prices, from the request counts measured in the same
// run (lines whose figure did not run are left out). PUT-class requests
// are creates and lists, GET-class requests reads; deletes are counted and
// priced at 0 (S3 does not bill them). The default prices, in US dollars
// per 1,000 requests, are list prices (us-east-1) when this was written:
//
//	S3 Standard           PUT 0.005     GET 0.0004     -price-standard-put, -price-standard-get
//	S3 Express One Zone   PUT 0.00113   GET 0.00003    -price-express-put, -price-express-get
//
// Prices change: check them and pass the current ones with the flags. The
// model leaves out bytes stored, charges per GB transferred, uploaded or
// retrieved (S3 Express One Zone has some), and the metastore's own cost;
// a session's keep-alives are stated, not priced.
//
// -quick shrinks every figure (20,000 appends for the heap, 1 s of idleness
// on a 2 s session, 1 ms per request for the fence and the takeover
// sizes, 10, 100 and 1,000 past epochs, 10 and 100 streams at 1,000
// records/s for 300 ms at 1 ms per request, a catch-up on one of 50
// streams of 64 records at 1 ms per request) so that a test can check that
// every row is there; its times and rates are rough.
//
// Request and round-trip counts do not depend on the machine; times and
// rates do, which is why each is shown beside its reference.
package main
