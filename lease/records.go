package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/internal/planted"
	"github.com/cutline/cutline/metastore"
)

// Record kinds and their major formats.
const (
	writerKind  = "stream-writer"
	releaseKind = "stream-release"
	leaseKind   = "stream-lease"
	tokenKind   = "stream-token"
	starKind    = "star"
	recFormat   = 1
)

// keys lays out the tenure keys under a metastore root.
type keys struct{ root string }

func newKeys(root string) (keys, error) {
	if root != "" && !strings.HasSuffix(root, "/") {
		return keys{}, &cutline.ConfigError{Field: "Root", Value: fmt.Sprintf("%q", root), Reason: "must be empty or end with '/'"}
	}
	if err := metastore.ValidatePrefix(root); err != nil {
		return keys{}, &cutline.ConfigError{Field: "Root", Value: fmt.Sprintf("%q", root), Reason: "not a valid key prefix", Err: err}
	}
	return keys{root: root}, nil
}

func (k keys) star(star string) string       { return k.root + "stars/" + star }
func (k keys) stream(id, leaf string) string { return k.root + "streams/" + id + "/" + leaf }
func (k keys) writer(id string) string       { return k.stream(id, "writer") }
func (k keys) release(id string) string      { return k.stream(id, "release") }
func (k keys) lease(id string) string        { return k.stream(id, "lease") }
func (k keys) token(id string) string        { return k.stream(id, "token") }

// WriterRecord is the last-writer record, streams/<id>/writer: the star that
// holds (or last held) the stream, the epoch it appends the stream's
// records in, and the tenure, a number that grows by one with every
// admitted open of the stream. It is written before the first
// acknowledgement of a tenure can exist, and moved to the star's new epoch
// by every roll before anything is placed there, so the epoch it names is
// always the last one that may hold the stream's acknowledged records.
type WriterRecord struct {
	metastore.RecordHeader
	Stream string `json:"stream"`
	Star   string `json:"star"`
	Epoch  uint64 `json:"epoch"`
	Class  string `json:"class"`
	Tenure uint64 `json:"tenure"`
	// Revision is the metastore revision the record was read at.
	Revision int64 `json:"-"`
}

// Mark is the clean-release mark, streams/<id>/release: the final write
// of a departure, certifying that every acknowledged record of the tenure
// it names is covered, up to offset Next. It is single-use: the next open
// consumes it (deletes it in the transaction that admits the next tenure),
// and it is evidence only for the tenure it names.
type Mark struct {
	metastore.RecordHeader
	Stream string `json:"stream"`
	Star   string `json:"star"`
	Epoch  uint64 `json:"epoch"`
	Tenure uint64 `json:"tenure"`
	// Next is the stream's first offset not covered when the mark landed.
	Next   uint64    `json:"next"`
	Reason Reason    `json:"reason"`
	At     time.Time `json:"at"`
	// Revision is the metastore revision the record was read at.
	Revision int64 `json:"-"`
}

// certifies reports whether m is evidence for the tenure w records.
func (m *Mark) certifies(w *WriterRecord) bool {
	return m != nil && w != nil && m.Stream == w.Stream && m.Star == w.Star &&
		(m.Tenure == w.Tenure || planted.On(planted.MarkAnyTenure)) && m.Epoch <= w.Epoch
}

// leaseRecord is the advisory writer lease, streams/<id>/lease, bound to
// the holder's session: it names the holder and nothing more.
type leaseRecord struct {
	metastore.RecordHeader
	Stream  string `json:"stream"`
	Star    string `json:"star"`
	Session int64  `json:"session"`
}

// starEntry is the registry entry, stars/<star>, bound to the star's
// session: the star is alive while it exists.
type starEntry struct {
	metastore.RecordHeader
	Star    string    `json:"star"`
	Session int64     `json:"session"`
	Since   time.Time `json:"since"`
}

// Mode says whether a stream requires a producer fencing token.
type Mode string

const (
	// Any: a request without a token passes; a request with one must
	// present the installed token exactly. The default of every stream.
	Any Mode = "any"
	// Fenced: every request must present the installed token exactly.
	Fenced Mode = "fenced"
)

func (m Mode) valid() bool { return m == Any || m == Fenced }

// MaxTokenLen bounds a producer fencing token.
const MaxTokenLen = 256

// TokenRecord is a stream's producer fencing token and mode,
// streams/<id>/token. A stream without one is in mode Any with no token.
type TokenRecord struct {
	metastore.RecordHeader
	Stream string `json:"stream"`
	Mode   Mode   `json:"mode"`
	Token  string `json:"token"`
	// Revision is the metastore revision the record was read at (0 when
	// none is installed).
	Revision int64 `json:"-"`
}

// ValidateToken checks a token: at most MaxTokenLen bytes of UTF-8 without
// control characters. The empty token means "none presented".
func ValidateToken(token string) error {
	if len(token) > MaxTokenLen {
		return &cutline.ConfigError{Field: "token", Value: fmt.Sprintf("%d bytes", len(token)), Reason: fmt.Sprintf("longer than %d bytes", MaxTokenLen)}
	}
	if !utf8.ValidString(token) {
		return &cutline.ConfigError{Field: "token", Value: "(not shown)", Reason: "not UTF-8"}
	}
	for _, r := range token {
		if r < 0x20 || r == 0x7f {
			return &cutline.ConfigError{Field: "token", Value: "(not shown)", Reason: fmt.Sprintf("control character %U", r)}
		}
	}
	return nil
}

// judge applies the token rule to a presented token.
func (t *TokenRecord) judge(presented string) error {
	switch {
	case presented == t.Token && (presented != "" || t.Mode != Fenced):
		return nil
	case presented == "" && t.Mode == Any:
		return nil
	case planted.On(planted.TokenTruncated) && presented != "" && strings.HasPrefix(t.Token, presented),
		planted.On(planted.TokenExtended) && t.Token != "" && strings.HasPrefix(presented, t.Token):
		return nil // planted: compared by prefix
	}
	return &TokenError{Stream: t.Stream, Mode: t.Mode, Presented: presented != ""}
}

func encode(v any) ([]byte, error) { return metastore.EncodeRecord(v) }

// bad returns a *metastore.RecordError for a record that decoded but does
// not belong at its key.
func bad(key, kind, format string, args ...any) error {
	return &metastore.RecordError{Key: key, Kind: kind, Reason: fmt.Sprintf(format, args...)}
}

func decodeWriter(kv metastore.KV, stream string) (*WriterRecord, error) {
	var w WriterRecord
	if err := metastore.DecodeRecord(kv.Key, kv.Value, writerKind, recFormat, &w); err != nil {
		return nil, err
	}
	switch {
	case w.Stream != stream:
		return nil, bad(kv.Key, writerKind, "claims stream %q", w.Stream)
	case epoch.ValidateName("star", w.Star) != nil:
		return nil, bad(kv.Key, writerKind, "names no valid star: %q", w.Star)
	case w.Epoch == 0:
		return nil, bad(kv.Key, writerKind, "epoch numbers start at 1")
	case epoch.ValidateName("class", w.Class) != nil:
		return nil, bad(kv.Key, writerKind, "names no valid class: %q", w.Class)
	case w.Tenure == 0:
		return nil, bad(kv.Key, writerKind, "tenures start at 1")
	}
	w.Revision = kv.Revision
	return &w, nil
}

func decodeMark(kv metastore.KV, stream string) (*Mark, error) {
	var m Mark
	if err := metastore.DecodeRecord(kv.Key, kv.Value, releaseKind, recFormat, &m); err != nil {
		return nil, err
	}
	switch {
	case m.Stream != stream:
		return nil, bad(kv.Key, releaseKind, "claims stream %q", m.Stream)
	case epoch.ValidateName("star", m.Star) != nil:
		return nil, bad(kv.Key, releaseKind, "names no valid star: %q", m.Star)
	case m.Epoch == 0 || m.Tenure == 0:
		return nil, bad(kv.Key, releaseKind, "epoch %d, tenure %d: both start at 1", m.Epoch, m.Tenure)
	}
	m.Revision = kv.Revision
	return &m, nil
}

func decodeLease(kv metastore.KV, stream string) (*leaseRecord, error) {
	var l leaseRecord
	if err := metastore.DecodeRecord(kv.Key, kv.Value, leaseKind, recFormat, &l); err != nil {
		return nil, err
	}
	if l.Stream != stream || epoch.ValidateName("star", l.Star) != nil {
		return nil, bad(kv.Key, leaseKind, "claims stream %q star %q", l.Stream, l.Star)
	}
	return &l, nil
}

func decodeToken(kv metastore.KV, stream string) (*TokenRecord, error) {
	var t TokenRecord
	if err := metastore.DecodeRecord(kv.Key, kv.Value, tokenKind, recFormat, &t); err != nil {
		return nil, err
	}
	if t.Stream != stream || !t.Mode.valid() || ValidateToken(t.Token) != nil {
		return nil, bad(kv.Key, tokenKind, "claims stream %q mode %q or holds an invalid token", t.Stream, t.Mode)
	}
	if t.Mode == Fenced && t.Token == "" {
		return nil, bad(kv.Key, tokenKind, "a fenced stream without a token")
	}
	t.Revision = kv.Revision
	return &t, nil
}

// getOptional reads key; a missing key is (zero KV, false, nil).
func getOptional(ctx context.Context, s metastore.Store, key string) (metastore.KV, bool, error) {
	kv, err := s.Get(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		return metastore.KV{}, false, nil
	}
	if err != nil {
		return metastore.KV{}, false, err
	}
	return kv, true, nil
}

// StreamState is what the metastore says about a stream's tenure: for
// operators, tools and tests.
type StreamState struct {
	Stream string
	// Writer is the last-writer record, nil for a stream never opened.
	Writer *WriterRecord
	// Mark is the clean-release mark, nil when none is standing.
	Mark *Mark
	// Holder is the star named by the advisory lease, "" when none.
	Holder string
	// Token is the installed producer fencing token (mode Any with no
	// token when none is).
	Token *TokenRecord
}

// Inspect reads a stream's tenure records under root. A record that does
// not decode is a *metastore.RecordError.
func Inspect(ctx context.Context, store metastore.Store, root, stream string) (StreamState, error) {
	st := StreamState{Stream: stream, Token: &TokenRecord{RecordHeader: metastore.RecordHeader{Kind: tokenKind, Format: recFormat}, Stream: stream, Mode: Any}}
	if err := epoch.ValidateName("stream", stream); err != nil {
		return st, err
	}
	k, err := newKeys(root)
	if err != nil {
		return st, err
	}
	read := func(key string, decode func(metastore.KV) error) error {
		kv, ok, err := getOptional(ctx, store, key)
		if err != nil || !ok {
			return err
		}
		return decode(kv)
	}
	err = errors.Join(
		read(k.writer(stream), func(kv metastore.KV) (err error) { st.Writer, err = decodeWriter(kv, stream); return }),
		read(k.release(stream), func(kv metastore.KV) (err error) { st.Mark, err = decodeMark(kv, stream); return }),
		read(k.lease(stream), func(kv metastore.KV) error {
			l, err := decodeLease(kv, stream)
			if err == nil {
				st.Holder = l.Star
			}
			return err
		}),
		read(k.token(stream), func(kv metastore.KV) (err error) { st.Token, err = decodeToken(kv, stream); return }),
	)
	return st, err
}

// Streams returns the names of the streams with any record under root
// whose names sort after after ("" from the first), in name order. It
// lists every stream's keys in one request (metastore.ListKeys: without
// their values, snapshots included, on a store that can): a tool's or a
// maintenance pass's call, not one to make per request.
func Streams(ctx context.Context, store metastore.Store, root, after string) ([]string, error) {
	k, err := newKeys(root)
	if err != nil {
		return nil, err
	}
	prefix := k.root + "streams/"
	kvs, _, err := metastore.ListKeys(ctx, store, prefix)
	if err != nil {
		return nil, fmt.Errorf("lease: list the streams: %w", err)
	}
	var ids []string
	for _, kv := range kvs {
		id, leaf, ok := strings.Cut(kv.Key[len(prefix):], "/")
		if ok && leaf != "" && id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}
