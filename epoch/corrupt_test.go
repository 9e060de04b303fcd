package epoch_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

// validRecordJSON is a well-formed record of s1/1 as a JSON object to
// corrupt.
func validRecordJSON(t *testing.T) map[string]any {
	t.Helper()
	e := newEnv(t)
	e.mint(t, "s1", standard())
	v, _ := e.raw(t, e.m.RecordKey("s1", 1))
	return v
}

func TestCorruptRecords(t *testing.T) {
	ctx := context.Background()
	set := func(path ...any) func(v map[string]any) {
		return func(v map[string]any) {
			m := v
			for _, p := range path[:len(path)-2] {
				m = m[p.(string)].(map[string]any)
			}
			m[path[len(path)-2].(string)] = path[len(path)-1]
		}
	}
	for _, tc := range []struct {
		name   string
		raw    string               // used when mutate is nil
		mutate func(map[string]any) // applied to a valid record
		reason string
	}{
		{name: "not JSON", raw: `{"kind":"epoch",`, reason: "not JSON"},
		{name: "binary", raw: "\x00\xff\x10garbage", reason: "not UTF-8"},
		{name: "empty", raw: "", reason: "empty"},
		{name: "blank", raw: " \n\t", reason: "empty"},
		{name: "null", raw: "null", reason: "kind"},
		{name: "array", raw: "[1,2]", reason: "not JSON"},
		{name: "empty object", raw: "{}", reason: "kind"},
		{name: "another kind", mutate: set("kind", "chain"), reason: `kind is "chain"`},
		{name: "no kind", mutate: func(v map[string]any) { delete(v, "kind") }, reason: "kind"},
		{name: "newer format", mutate: set("format", 99), reason: "format 99"},
		{name: "format zero", mutate: set("format", 0), reason: "format 0"},
		{name: "no format", mutate: func(v map[string]any) { delete(v, "format") }, reason: "format 0"},
		{name: "format not a number", mutate: set("format", "1"), reason: "not JSON"},
		{name: "another star", mutate: set("star", "s2"), reason: "claims s2/1"},
		{name: "another epoch", mutate: set("epoch", 2), reason: "claims s1/2"},
		{name: "epoch of the wrong type", mutate: set("epoch", "one"), reason: "malformed"},
		{name: "negative epoch", mutate: set("epoch", -1), reason: "malformed"},
		{name: "unknown state", mutate: set("state", "zombie"), reason: "unknown state"},
		{name: "no state", mutate: func(v map[string]any) { delete(v, "state") }, reason: "unknown state"},
		{name: "trimmed past checkpoint", mutate: set("cursors", "trimmed", 1), reason: "cursors out of order"},
		{name: "rewritten past checkpoint", mutate: set("cursors", "rewritten", 1), reason: "cursors out of order"},
		{name: "checkpoint past cut", mutate: func(v map[string]any) {
			v["state"] = "fenced"
			v["cut"] = 3
			v["cursors"].(map[string]any)["checkpoint"] = 4
		}, reason: "checkpoint past the cut"},
		{name: "open with a cut", mutate: set("cut", 5), reason: "open but carries cut"},
		{name: "no constants", mutate: func(v map[string]any) { delete(v, "constants") }, reason: "class"},
		{name: "W past K", mutate: set("constants", "w", 4), reason: "W"},
		{name: "window zero", mutate: set("constants", "window", 0), reason: "window"},
		{name: "bad bucket", mutate: set("constants", "buckets", []any{"a/b"}), reason: "buckets[0]"},
		{name: "duplicate buckets", mutate: set("constants", "buckets", []any{"a", "a"}), reason: "duplicate"},
		{name: "bad class", mutate: set("constants", "class", ".."), reason: "class"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			value := []byte(tc.raw)
			if tc.mutate != nil {
				v := validRecordJSON(t)
				tc.mutate(v)
				value = mustJSON(t, v)
			}
			e := newEnv(t)
			e.mint(t, "s1", standard())
			e.mint(t, "s1", standard())
			key := e.m.RecordKey("s1", 1)
			e.overwrite(t, key, value)
			rev := e.mem.Revision()

			r, err := e.m.Get(ctx, "s1", 1)
			require.ErrorIs(t, err, metastore.ErrBadRecord)
			assert.Nil(t, r, "never a zero value taken as real")
			assert.NotErrorIs(t, err, epoch.ErrNoRecord)
			var re *metastore.RecordError
			require.True(t, errors.As(err, &re))
			assert.Equal(t, key, re.Key)
			assert.Equal(t, "epoch", re.Kind)
			assert.Contains(t, err.Error(), tc.reason)

			// Transitions refuse it and write nothing.
			_, err = e.m.Publish(ctx, "s1", 1, 0)
			assert.ErrorIs(t, err, metastore.ErrBadRecord)
			_, err = e.m.MarkSettled(ctx, "s1", 1)
			assert.ErrorIs(t, err, metastore.ErrBadRecord)
			_, err = e.m.Advance(ctx, "s1", 1, epoch.Cursors{Checkpoint: 100})
			assert.ErrorIs(t, err, metastore.ErrBadRecord)
			assert.Equal(t, rev, e.mem.Revision())

			// Epochs reports it in place and goes on.
			var got []string
			for r, err := range e.m.Epochs(ctx, "s1") {
				if err != nil {
					assert.ErrorIs(t, err, metastore.ErrBadRecord)
					assert.Nil(t, r)
					got = append(got, "bad")
					continue
				}
				got = append(got, r.String())
			}
			assert.Equal(t, []string{"bad", "s1/2 (standard, K=3 W=2 window=8) open"}, got)

			// The corrupt record is never overwritten by a mint.
			assert.Equal(t, uint64(3), e.mint(t, "s1", standard()).Epoch)
			kv, err := e.mem.Get(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, value, kv.Value)
		})
	}
}

func TestUnknownFieldsAreIgnored(t *testing.T) {
	// Minor format additions are new optional fields that older readers
	// ignore.
	v := validRecordJSON(t)
	v["added_later"] = map[string]any{"x": 1}
	e := newEnv(t)
	e.overwrite(t, e.m.RecordKey("s1", 1), mustJSON(t, v))
	r := e.get(t, "s1", 1)
	assert.Equal(t, epoch.StateOpen, r.State)
	assert.Equal(t, standard(), r.Constants)
}

func TestMisplacedKeysInEpochs(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.mint(t, "s1", standard())
	rec, _ := e.raw(t, e.m.RecordKey("s1", 1))
	// A valid record of epoch 1 at a non-canonical key, and a stray key.
	e.overwrite(t, "chains/s1/1", mustJSON(t, rec))
	e.overwrite(t, "chains/s1/notes", []byte("x"))

	var good []uint64
	var bad []string
	for r, err := range e.m.Epochs(ctx, "s1") {
		if err != nil {
			var re *metastore.RecordError
			require.True(t, errors.As(err, &re))
			assert.ErrorIs(t, err, metastore.ErrBadRecord)
			bad = append(bad, re.Key)
			continue
		}
		good = append(good, r.Epoch)
	}
	assert.Equal(t, []uint64{1}, good)
	assert.ElementsMatch(t, []string{"chains/s1/1", "chains/s1/notes"}, bad)
}

func TestEpochsStopsWhenAsked(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	for range 5 {
		e.mint(t, "s1", standard())
	}
	var got []uint64
	for r, err := range e.m.Epochs(ctx, "s1") {
		require.NoError(t, err)
		got = append(got, r.Epoch)
		if r.Epoch == 2 {
			break
		}
	}
	assert.Equal(t, []uint64{1, 2}, got)
}

func TestCorruptCounter(t *testing.T) {
	ctx := context.Background()
	chainJSON := func(v map[string]any) string { return string(mustJSON(t, v)) }
	for _, tc := range []struct {
		name, raw, reason string
	}{
		{"not JSON", "{{", "not JSON"},
		{"empty", "", "empty"},
		{"another kind", chainJSON(map[string]any{"kind": "epoch", "format": 1, "star": "s1", "next": 2}), "kind"},
		{"newer format", chainJSON(map[string]any{"kind": "chain", "format": 99, "star": "s1", "next": 2}), "format 99"},
		{"another star", chainJSON(map[string]any{"kind": "chain", "format": 1, "star": "s2", "next": 2}), "claims star"},
		{"next zero", chainJSON(map[string]any{"kind": "chain", "format": 1, "star": "s1", "next": 0}), "next 0"},
		{"next missing", chainJSON(map[string]any{"kind": "chain", "format": 1, "star": "s1"}), "next 0"},
		{"head at next", chainJSON(map[string]any{"kind": "chain", "format": 1, "star": "s1", "next": 3, "heads": map[string]any{"standard": 3}}), "head 3"},
		{"heads wrong type", chainJSON(map[string]any{"kind": "chain", "format": 1, "star": "s1", "next": 3, "heads": []any{1}}), "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.mint(t, "s1", standard())
			key := e.m.ChainKey("s1")
			e.overwrite(t, key, []byte(tc.raw))
			rev := e.mem.Revision()

			ch, err := e.m.Chain(ctx, "s1")
			require.ErrorIs(t, err, metastore.ErrBadRecord)
			assert.Nil(t, ch)
			var re *metastore.RecordError
			require.True(t, errors.As(err, &re))
			assert.Equal(t, key, re.Key)
			assert.Equal(t, "chain", re.Kind)
			assert.Contains(t, err.Error(), tc.reason)

			r, err := e.m.Mint(ctx, "s1", standard())
			assert.ErrorIs(t, err, metastore.ErrBadRecord)
			assert.Nil(t, r)
			_, err = e.m.Superseded(ctx, e.get(t, "s1", 1))
			assert.ErrorIs(t, err, metastore.ErrBadRecord)
			assert.Equal(t, rev, e.mem.Revision(), "nothing written over a corrupt counter")
		})
	}
}

func FuzzDecodeRecord(f *testing.F) {
	e := newEnv(f)
	ctx := context.Background()
	if _, err := e.m.Mint(ctx, "s1", standard()); err != nil {
		f.Fatal(err)
	}
	kv, err := e.mem.Get(ctx, e.m.RecordKey("s1", 1))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(kv.Value)
	if _, err := e.m.Publish(ctx, "s1", 1, 7); err != nil {
		f.Fatal(err)
	}
	kv, _ = e.mem.Get(ctx, e.m.RecordKey("s1", 1))
	f.Add(kv.Value)
	f.Add([]byte(`{"kind":"epoch","format":99}`))
	f.Add([]byte(`{"kind":"epoch","format":1,"star":"s1","epoch":1,"state":"settled","cut":2,"cursors":{"checkpoint":3}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
	f.Add([]byte("\xff\xfe"))

	f.Fuzz(func(t *testing.T, data []byte) {
		ms := memstore.New(memstore.Options{})
		m, err := epoch.NewMinter(ms, epoch.Options{})
		if err != nil {
			t.Fatal(err)
		}
		key := m.RecordKey("s1", 1)
		if _, err := metastore.Put(ctx, ms, key, data, 0); err != nil {
			t.Fatal(err)
		}
		r, err := m.Get(ctx, "s1", 1)
		if err != nil {
			if r != nil {
				t.Fatalf("record %v returned with error %v", r, err)
			}
			if !errors.Is(err, metastore.ErrBadRecord) {
				t.Fatalf("error %v is not ErrBadRecord", err)
			}
			return
		}
		// Accepted: the record must be internally consistent.
		if r.Star != "s1" || r.Epoch != 1 {
			t.Fatalf("accepted a record claiming %s/%d", r.Star, r.Epoch)
		}
		if err := r.Constants.Validate(); err != nil {
			t.Fatalf("accepted invalid constants: %v", err)
		}
		switch r.State {
		case epoch.StateOpen:
			if r.Cut != 0 {
				t.Fatalf("accepted an open record with cut %d", r.Cut)
			}
		case epoch.StateFenced, epoch.StateSettled:
			if r.Cursors.Checkpoint > r.Cut {
				t.Fatalf("accepted checkpoint %d past cut %d", r.Cursors.Checkpoint, r.Cut)
			}
		default:
			t.Fatalf("accepted state %q", r.State)
		}
		if r.Cursors.Trimmed > r.Cursors.Checkpoint || r.Cursors.Rewritten > r.Cursors.Checkpoint {
			t.Fatalf("accepted cursors %+v", r.Cursors)
		}
		// An accepted record round-trips and transitions work on it.
		var back map[string]any
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Publish(ctx, "s1", 1, r.Cut); err != nil && !errors.Is(err, epoch.ErrCursorRegression) {
			t.Fatalf("publish of an accepted record: %v", err)
		}
	})
}

func FuzzDecodeChain(f *testing.F) {
	f.Add([]byte(`{"kind":"chain","format":1,"star":"s1","next":3,"heads":{"standard":2}}`))
	f.Add([]byte(`{"kind":"chain","format":1,"star":"s1","next":1}`))
	f.Add([]byte(`{"kind":"chain","format":2}`))
	f.Add([]byte(`{"kind":"chain","format":1,"star":"s1","next":18446744073709551615}`))
	f.Add([]byte(`[]`))
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		ms := memstore.New(memstore.Options{})
		m, err := epoch.NewMinter(ms, epoch.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := metastore.Put(ctx, ms, m.ChainKey("s1"), data, 0); err != nil {
			t.Fatal(err)
		}
		ch, err := m.Chain(ctx, "s1")
		if err != nil {
			if ch != nil || !errors.Is(err, metastore.ErrBadRecord) {
				t.Fatalf("chain %v, error %v", ch, err)
			}
			return
		}
		if ch.Star != "s1" || ch.Next < 1 {
			t.Fatalf("accepted %+v", ch)
		}
		for class, head := range ch.Heads {
			if head >= ch.Next {
				t.Fatalf("accepted head %d of %q at or past next %d", head, class, ch.Next)
			}
		}
		// Minting over an accepted counter either succeeds above it or
		// fails cleanly; it never panics.
		r, err := m.Mint(ctx, "s1", express())
		if err != nil {
			if !errors.Is(err, metastore.ErrBadRecord) {
				t.Fatalf("mint over %+v: %v", ch, err)
			}
			return
		}
		if r.Epoch < ch.Next {
			t.Fatalf("minted %d below next %d", r.Epoch, ch.Next)
		}
		after, err := m.Chain(ctx, "s1")
		if err != nil || after.Next != r.Epoch+1 || after.Heads["express"] != r.Epoch {
			t.Fatalf("counter after minting %d: %+v, %v", r.Epoch, after, err)
		}
	})
}
