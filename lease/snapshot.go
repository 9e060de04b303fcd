package lease

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/errkind"
	"github.com/cutline/cutline/metastore"
)

// snapshotKind is the record kind of streams/<id>/snapshot.
const snapshotKind = "stream-snapshot"

// Bounds of a snapshot's host bytes (Options.MaxSnapshot).
const (
	// DefaultMaxSnapshot is what a zero Options.MaxSnapshot means.
	DefaultMaxSnapshot = 256 << 10
	// MaxSnapshotLimit bounds Options.MaxSnapshot: the record holds the
	// bytes in base64, and must stay within what a metastore request
	// carries (etcd's default is 1.5 MiB).
	MaxSnapshotLimit = 1 << 20
)

// Errors of snapshots. Each comes as a *SnapshotError.
var (
	// ErrSnapshotTooBig: the host bytes exceed Options.MaxSnapshot.
	ErrSnapshotTooBig = errkind.New(cutline.ErrInvalid, "lease: snapshot too big")
	// ErrSnapshotBackwards: the stream's stored snapshot is at a higher
	// offset than the one saved; snapshots never move backwards.
	ErrSnapshotBackwards = errkind.New(cutline.ErrConflict, "lease: snapshot would move backwards")
	// ErrSnapshotUncovered: the offset saved lies past the stream's
	// coverage in the Index: a snapshot may only claim durable records.
	ErrSnapshotUncovered = errkind.New(cutline.ErrInvalid, "lease: snapshot claims records not covered")
	// ErrBadSnapshot: the stored snapshot does not decode, fails its
	// checksum, or claims records past the stream's coverage.
	ErrBadSnapshot = errkind.New(cutline.ErrCorrupt, "lease: corrupt snapshot")
)

// SnapshotError is a refused save or a snapshot that does not load.
type SnapshotError struct {
	Stream string
	// Offset is the offset the save named or the stored record claims.
	Offset uint64
	// Reason says what was wrong, in words.
	Reason string
	// Err is one of the snapshot sentinels; Cause, when set, the error
	// underneath (a *metastore.RecordError for ErrBadSnapshot).
	Err   error
	Cause error
}

func (e *SnapshotError) Error() string {
	s := fmt.Sprintf("%v: stream %s at offset %d: %s", e.Err, e.Stream, e.Offset, e.Reason)
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

func (e *SnapshotError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

// Snapshot is a stream's state snapshot, streams/<id>/snapshot: opaque
// host bytes (a table of producers' last sequences, say) that hold the
// state after applying every record of the stream below Offset. A new
// holder loads it and replays only the records from Offset on, instead of
// the whole stream. It survives tenures: only the stream's current holder
// saves one, fenced by its tenure, and never at a lower offset than the
// stored one.
type Snapshot struct {
	metastore.RecordHeader
	Stream string `json:"stream"`
	// Star and Tenure are the tenure that saved it.
	Star   string `json:"star"`
	Tenure uint64 `json:"tenure"`
	// Offset is the stream's first offset the state does not reflect.
	Offset uint64 `json:"offset"`
	// Size and Sum (CRC-32C) guard Data.
	Size int       `json:"size"`
	Sum  uint32    `json:"crc32c"`
	Data []byte    `json:"data"`
	At   time.Time `json:"at"`
	// Revision is the metastore revision the record was read at (0 when
	// the stream has none: Offset 0 and no Data, the empty state).
	Revision int64 `json:"-"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (k keys) snapshot(id string) string { return k.stream(id, "snapshot") }

// validateSnapshot checks Options.MaxSnapshot and fills in its default.
func (o *Options) validateSnapshot() error {
	if o.MaxSnapshot < 0 || o.MaxSnapshot > MaxSnapshotLimit {
		return &cutline.ConfigError{Field: "MaxSnapshot", Value: o.MaxSnapshot, Reason: fmt.Sprintf("must satisfy 0 ≤ MaxSnapshot ≤ %d (0 means %d)", MaxSnapshotLimit, DefaultMaxSnapshot)}
	}
	if o.MaxSnapshot == 0 {
		o.MaxSnapshot = DefaultMaxSnapshot
	}
	return nil
}

// decodeSnapshot decodes and checks the record at kv. Any failure is a
// *SnapshotError for ErrBadSnapshot.
func decodeSnapshot(kv metastore.KV, stream string) (*Snapshot, error) {
	var sn Snapshot
	bad := func(reason string, cause error) error {
		return &SnapshotError{Stream: stream, Offset: sn.Offset, Reason: reason, Err: ErrBadSnapshot, Cause: cause}
	}
	if err := metastore.DecodeRecord(kv.Key, kv.Value, snapshotKind, recFormat, &sn); err != nil {
		return nil, bad("the record does not decode", err)
	}
	switch {
	case sn.Stream != stream:
		return nil, bad(fmt.Sprintf("the record claims stream %q", sn.Stream), nil)
	case epoch.ValidateName("star", sn.Star) != nil:
		return nil, bad(fmt.Sprintf("the record names no valid star: %q", sn.Star), nil)
	case sn.Tenure == 0:
		return nil, bad("tenures start at 1", nil)
	case sn.Size != len(sn.Data) || sn.Size > MaxSnapshotLimit:
		return nil, bad(fmt.Sprintf("%d bytes of data, the record says %d (at most %d)", len(sn.Data), sn.Size, MaxSnapshotLimit), nil)
	case crc32.Checksum(sn.Data, castagnoli) != sn.Sum:
		return nil, bad("the data fails its checksum", nil)
	}
	sn.Revision = kv.Revision
	return &sn, nil
}

// ReadSnapshot reads a stream's snapshot under root, for operators, tools
// and tests. A stream without one reads as the empty state: Offset 0, no
// Data, Revision 0. A record that does not decode is a *SnapshotError
// for ErrBadSnapshot.
func ReadSnapshot(ctx context.Context, store metastore.Store, root, stream string) (Snapshot, error) {
	if err := epoch.ValidateName("stream", stream); err != nil {
		return Snapshot{}, err
	}
	k, err := newKeys(root)
	if err != nil {
		return Snapshot{}, err
	}
	sn, err := readSnapshot(ctx, store, k, stream)
	if err != nil || sn == nil {
		return Snapshot{RecordHeader: hdr(snapshotKind), Stream: stream}, err
	}
	return *sn, nil
}

// readSnapshot reads the stored snapshot; nil when there is none.
func readSnapshot(ctx context.Context, store metastore.Store, k keys, stream string) (*Snapshot, error) {
	kv, ok, err := getOptional(ctx, store, k.snapshot(stream))
	if err != nil {
		return nil, fmt.Errorf("lease: read the snapshot of %s: %w", stream, err)
	}
	if !ok {
		return nil, nil
	}
	return decodeSnapshot(kv, stream)
}

// LoadSnapshot reads the held stream's snapshot, or any stream's: a new
// holder loads it after Open and replays the records from its Offset up
// to Tenure.Next. A stream without one loads as the empty state (Offset
// 0, no Data). A snapshot that does not decode, or that claims records
// past the stream's coverage in the Index, is a *SnapshotError for
// ErrBadSnapshot: the host then rebuilds from offset 0.
func (s *Star) LoadSnapshot(ctx context.Context, stream string) (Snapshot, error) {
	sn, err := ReadSnapshot(ctx, s.cfg.Store, s.cfg.Root, stream)
	if err != nil || sn.Revision == 0 {
		return sn, err
	}
	covered, err := s.cfg.Index.Next(ctx, stream)
	if err != nil {
		return Snapshot{}, fmt.Errorf("lease: where %s is covered: %w", stream, err)
	}
	if sn.Offset > covered {
		return Snapshot{}, &SnapshotError{Stream: stream, Offset: sn.Offset, Err: ErrBadSnapshot,
			Reason: fmt.Sprintf("it claims records up to %d, the index covers %d", sn.Offset, covered)}
	}
	return sn, nil
}

// maxSnapshotRounds bounds how often one save re-reads the stored
// snapshot after losing a compare-and-set on it to a concurrent save.
const maxSnapshotRounds = 8

// SaveSnapshot stores data as the held stream's state after applying every
// record below offset. Only the stream's current holder saves: the write
// compares the tenure's last-writer record and lease in the same
// transaction, so a holder whose tenure was taken over (or whose lease
// went with its session) is refused with ErrTenureLost, and one that no
// longer holds the stream with ErrNotHeld. It is allowed while the stream
// departs (from Options.Flush, say) until the clean-release mark lands.
// Like a departure's writes it does not ask Options.Admit: the tenure's
// compare fences it (and, under the authority layer, the Guarded store).
//
// offset must be covered in the Index (Absorb first: the star covers what
// it acknowledged in batches), or the save is a *SnapshotError for
// ErrSnapshotUncovered; a save below the stored snapshot's offset is one
// for ErrSnapshotBackwards (an equal offset replaces it); data longer than
// Options.MaxSnapshot one for ErrSnapshotTooBig.
func (s *Star) SaveSnapshot(ctx context.Context, stream string, offset uint64, data []byte) error {
	if err := epoch.ValidateName("stream", stream); err != nil {
		return err
	}
	if len(data) > s.opts.MaxSnapshot {
		return &SnapshotError{Stream: stream, Offset: offset, Err: ErrSnapshotTooBig,
			Reason: fmt.Sprintf("%d bytes, at most %d (Options.MaxSnapshot)", len(data), s.opts.MaxSnapshot)}
	}
	if _, err := s.snapshotTenure(stream, offset); err != nil {
		return err
	}
	covered, err := s.cfg.Index.Next(ctx, stream)
	if err != nil {
		return fmt.Errorf("lease: where %s is covered: %w", stream, err)
	}
	if offset > covered {
		return &SnapshotError{Stream: stream, Offset: offset, Err: ErrSnapshotUncovered,
			Reason: fmt.Sprintf("the index covers the stream up to %d", covered)}
	}
	// The writer record moves with every roll: serialize with them, so
	// that the revision compared is the tenure's current one.
	s.tenMu.Lock()
	defer s.tenMu.Unlock()
	t, err := s.snapshotTenure(stream, offset)
	if err != nil {
		return err
	}
	s.mu.Lock()
	wrev, lrev, tenure := t.writerRev, t.leaseRev, t.info.Tenure
	s.mu.Unlock()
	sn := &Snapshot{RecordHeader: hdr(snapshotKind), Stream: stream, Star: s.cfg.Star, Tenure: tenure, Offset: offset,
		Size: len(data), Sum: crc32.Checksum(data, castagnoli), Data: data, At: s.clock.Now().UTC()}
	v, err := encode(sn)
	if err != nil {
		return err
	}
	key := s.keys.snapshot(stream)
	for range maxSnapshotRounds {
		snapRev := int64(0)
		if kv, ok, err := getOptional(ctx, s.cfg.Store, key); err != nil {
			return fmt.Errorf("lease: read the snapshot of %s: %w", stream, err)
		} else if ok {
			snapRev = kv.Revision
			old, derr := decodeSnapshot(kv, stream)
			switch {
			case derr != nil:
				// A record that does not decode holds nothing: replace it.
				s.log.Warn("replacing a corrupt snapshot", "stream", stream, "err", derr)
			case old.Offset > offset:
				return &SnapshotError{Stream: stream, Offset: offset, Err: ErrSnapshotBackwards,
					Reason: fmt.Sprintf("the stored snapshot is at offset %d", old.Offset)}
			}
		}
		_, err := s.cfg.Store.Txn(ctx, metastore.Txn{
			If: []metastore.Compare{
				{Key: s.keys.writer(stream), Revision: wrev},
				{Key: s.keys.lease(stream), Revision: lrev},
				{Key: key, Revision: snapRev},
			},
			Then: []metastore.Op{{Key: key, Value: v}},
		})
		var ce *metastore.ConflictError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ce) && ce.Key == key:
			continue // a concurrent save: judge the new one
		case errors.Is(err, metastore.ErrConflict):
			// The tenure's record or lease changed: taken over, or the
			// lease went with the session.
			return &StreamError{Stream: stream, Err: ErrTenureLost}
		default:
			return fmt.Errorf("lease: save the snapshot of %s: %w", stream, err)
		}
	}
	return fmt.Errorf("lease: the snapshot of %s kept changing during the save", stream)
}

// snapshotTenure returns the tenure a snapshot of stream at offset may be
// saved under.
func (s *Star) snapshotTenure(stream string, offset uint64) (*tenure, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return nil, err
	}
	t := s.held[stream]
	switch {
	case t == nil:
		return nil, &StreamError{Stream: stream, Err: ErrNotHeld}
	case t.lostErr != nil:
		return nil, &StreamError{Stream: stream, Err: t.lostErr}
	case offset > t.next:
		return nil, &SnapshotError{Stream: stream, Offset: offset, Err: ErrSnapshotUncovered,
			Reason: fmt.Sprintf("the tenure has appended up to %d", t.next)}
	}
	return t, nil
}
