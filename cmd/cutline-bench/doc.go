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
//
// It starts the servers it needs itself, as the tests do: three versitygw
// processes (S3; scripts/install-servers.sh installs the binary) and one
// embedded etcd member. Without versitygw the S3 figures are skipped,
// unless CI=true, which makes them fail.
//
// The figures (-only takes these names; "appends" selects all three
// appends figures):
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
//	mint      epoch.Minter.Mint on embedded etcd ÷ a raw clientv3 transaction
//	heap      peak live heap over 10⁶ appends ÷ window × payload
//	idle      object and metastore requests of a Writer and a Roller left
//	          idle for 60 s
//
// -quick shrinks every figure (20,000 appends for the heap, 1 s of idleness,
// 1 ms per request for the fence) so that a test can check that every row
// is there; its times and rates are rough.
//
// Request and round-trip counts do not depend on the machine; times and
// rates do, which is why each is shown beside its reference.
package main
