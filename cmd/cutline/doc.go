// Command cutline is the operator's tool for cutline chains: it shows a
// star's epochs, the slot map of an epoch across its zones, a stream's
// tenure records and a domain's authority state, and, when asked, fences,
// settles and trims epochs and verifies zones.
//
// It is a module of its own, so that the SDKs of its zones stay out of the
// library's module; it builds against the checkout it is in:
//
//	go -C cmd/cutline install .
//
// # Backends
//
// Global flags name the backends, before or after the command:
//
//	-etcd host:port,…       the metastore (etcd v3); -etcd-root is the etcd store's key root
//	-etcd-ca ca.pem         TLS to etcd, verified with this CA; -etcd-cert and -etcd-key
//	                        the client certificate; -etcd-user and -etcd-password the etcd user
//	-root prod/             the cutline root inside it (epoch.Options.Root, lease and authority roots)
//	-fs-zones a,b,c         filesystem zones: dir or name=dir (the name defaults to the base name)
//	-s3-endpoint URL,…      S3 zones: one endpoint, or one per bucket, with
//	-s3-buckets b1,b2,…     bucket or name=bucket; -s3-region, -s3-access-key,
//	                        -s3-secret-key (default $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY)
//	-prefix p               the key prefix the credentials reach: verify-zones probes under it
//	-timeout 30s            give up after this long
//	-json                   one JSON document on stdout instead of text; an error is
//	                        {"error": "...", "exit": N} on stderr
//	-yes                    do not ask before writing
//
// cutline help lists the commands and the global flags, cutline help
// <command> (or <command> -h) describes one command and its own flags,
// cutline version prints the tool's version and the commit it was built
// from.
//
// The model broker (examples/broker) keeps its state under the etcd key
// root /cutline-broker/: inspect it with -etcd-root /cutline-broker/
// (-root is the cutline root inside that key root, empty for the broker).
//
// Every global flag but -yes may be given as an environment variable
// instead, CUTLINE_ and its name in upper case with '_' for '-':
// CUTLINE_ETCD, CUTLINE_ETCD_PASSWORD, CUTLINE_S3_SECRET_KEY (better there
// than on a command line, where other users of the machine see it). A
// flag given beats its variable. No help text, error or output ever shows
// a credential: the help of a command shows each flag's own default, not
// the value given.
//
// Zone names must be the names the epochs recorded (see `cutline chain`):
// an epoch is read in its own zones, in its own order, under its own
// recorded key prefix, whatever -prefix says. An epoch naming a zone that
// is not configured is a usage error: a slot cannot be judged without
// every zone.
//
// # Inspecting (never writes)
//
//	cutline chain <star>                       epochs: number, class, state, cut, cursors, zones, minted-at, minted-by
//	cutline slots <star> <epoch> [-from N] [-to M]
//	cutline stream <id>                        holder, last-writer record, clean-release mark, token mode (never the token)
//	cutline grant <domain>                     phase, term, holder, grant token number, required position
//
// slots reads every slot object whole in every zone (wire.ObserveObject),
// adds them up (wire.TallySlot) and prints one row per slot, one column
// per zone: F flight, P poison, · empty, ? unreachable, X foreign. The
// verdict is one of
//
//	committed  W identical copies, or below the published cut
//	dead       B = K−W+1 poisons: it can never be committed
//	cut        the published cut of a fenced epoch
//	garbage    flight copies past the cut: never acknowledged, settle deletes them
//	undecided  an open epoch's slot neither committed nor dead (in flight, or zones did not answer)
//	empty      nothing in any zone
//	conflict   two different flights: two writers wrote the epoch
//	blocked    a foreign object keeps the slot from being decided
//	trimmed    below the trimmed cursor, deleted on purpose
//
// By default the map starts at the trimmed cursor and ends, for a fenced
// epoch, at the cut plus the window (the farthest a writer can have
// pipelined), for an open one once window+1 slots in a row hold nothing;
// trailing rows empty everywhere are left out and a footer says so. A long
// walk draws a progress line on stderr. Zones that did not answer are
// shown as ? and make the exit code 4, after the map is printed.
//
// A fenced epoch (K=3, W=2: slot 3 held one copy and was repaired, slot 4
// was empty and is the cut, slots 5 and 6 were pipelined past it):
//
//	$ cutline slots star-a 1
//	star-a/1 (standard, K=3 W=2 window=8) fenced cut=4
//	slot  zone-a  zone-b  zone-c  verdict
//	0     F       F       F       committed
//	1     F       ·       F       committed
//	2     F       F       ·       committed
//	3     F       F       F       committed
//	4     P       P       ·       cut
//	5     F       ·       F       garbage
//	6     ·       ·       F       garbage
//	(read slots 0–12; slots 7–12 hold nothing in any zone)
//	F flight  P poison  · empty  ? unreachable  X foreign
//
// # Acting (writes only when asked)
//
//	cutline fence <star> <epoch>               fence.Fencer: poison, publish the cut, print it and the report
//	cutline settle <star> <epoch>              fence if open, delete garbage past the cut, mark settled
//	cutline trim <star> <epoch> <upTo>         delete the slots below upTo (at most the checkpoint)
//	cutline verify-zones                       objstore.Verify on every zone, then objstore.VerifyDistinct
//	cutline index-migrate                      rewrite an index of the previous release (a key per span) into pages
//
// index-migrate runs settle.RefIndex.MigrateAll under -root: stop every
// star first. A migration cut short is finished by running it again.
// cutline index-find <stream> <offset> (read-only) shows the flight and
// bytes that hold an offset, the stream's retention point and where its
// coverage ends.
//
// Each of them says what it is about to do on stderr and asks "type yes to
// continue" on stdin, unless -yes is given; any other answer, or the end
// of input, refuses with exit code 3 and nothing written. Fencing an
// epoch that is already fenced only reads the published cut and asks
// nothing; so does settling a settled epoch.
//
// Settling by hand is limited on purpose. Settlement hands the committed
// flights the host has not indexed yet, [checkpoint, cut), to the host's
// index, and only the host knows its payload format and its index
// (settle.Coverage, or a settle.RefIndex with the host's Locator). This
// tool knows neither: its only locator, -locator none, covers nothing. So
// settle refuses (exit 3) an epoch whose checkpoint is below its cut,
// before writing anything when the epoch is fenced; an open epoch is
// fenced first (after confirmation) and then refused if it has uncovered
// slots, left fenced and not settled. Let the host settle such an epoch
// (its open gate, lease.Star.Open, or authority.RecoverChain). An epoch
// whose checkpoint reached the cut is settled completely: garbage deleted,
// state settled.
//
// # Exit codes
//
//	0  ok
//	1  the operation failed: unknown star or epoch, a refusal by the library (a cursor past its bound), a corrupt record, a zone that is not create-only
//	2  usage: bad flags or arguments, missing backends, a -fs-zones directory that does not exist, zones that do not match the epoch
//	3  refused: not confirmed, or settle would leave acknowledged records unindexed
//	4  a backend did not answer: the metastore, a zone, or -timeout ran out waiting (a fence waits while unreachable zones hold the deciding vote)
package main
