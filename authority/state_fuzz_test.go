package authority_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/memstore"
)

const (
	fuzzRoot   = "cl/"
	fuzzDomain = "orders"
	stateKey   = fuzzRoot + "authority/" + fuzzDomain + "/state"
	tokenKey   = fuzzRoot + "authority/" + fuzzDomain + "/token"
)

// stateRead is what reading a stored state gave: the revisions the state
// and the token record were stored at (0 for none), and Read's answer.
type stateRead struct {
	rev, tokenRev int64
	st            authority.StateRecord
	err           error
}

// readState stores the state value (and the token record's, when given)
// in a fresh store and reads the domain with Read, as a controller's Load
// and every runtime do.
func readState(t *testing.T, state, token []byte, withToken bool) stateRead {
	t.Helper()
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	var r stateRead
	var err error
	if r.rev, err = metastore.Put(ctx, store, stateKey, state, 0); err != nil {
		t.Fatalf("the store refuses the state value: %v", err)
	}
	if withToken {
		if r.tokenRev, err = metastore.Put(ctx, store, tokenKey, token, 0); err != nil {
			t.Fatalf("the store refuses the token value: %v", err)
		}
	}
	r.st, r.err = authority.Read(ctx, store, fuzzRoot, fuzzDomain)
	return r
}

// FuzzStateRecord stores arbitrary bytes as a domain's authority state
// (its phase, holder, token, required position, candidate and target)
// and, optionally, as its token record, which is never decoded: only its
// revision guards progress writes. A refusal is a *metastore.RecordError
// for the state; an accepted state is the domain's, in a known phase,
// carries the revisions it and the token record were read at whatever the
// token record holds, and re-encodes to a state read back identically.
func FuzzStateRecord(f *testing.F) {
	f.Add([]byte(`{"kind":"authority-state","format":1,"domain":"orders","term":3,"phase":"granted","holder":"node-a","token":7,"required":{"star":"star-a","pos":{"epoch":2,"slot":9}}}`),
		[]byte(`{"kind":"authority-token","format":1,"domain":"orders","token":7,"writer":"holder:node-a"}`), true)
	f.Add([]byte(`{"kind":"authority-state","format":1,"domain":"orders","term":1,"phase":"recovering","candidate":"node-b","token":7}`), []byte("garbage"), true)
	f.Add([]byte(`{"kind":"authority-state","format":1,"domain":"orders","phase":"handoff","holder":"node-a","target":"node-b","token":18446744073709551615}`), []byte{}, false)
	f.Add([]byte(`{"kind":"authority-state","format":1,"domain":"orders","phase":"vacant","ended":"expired"}`), []byte{}, false)
	f.Add([]byte(`{"kind":"authority-state","format":1,"domain":"orders","phase":"elected"}`), []byte{}, false)
	f.Add([]byte(`{"kind":"authority-state","format":1,"domain":"billing","phase":"vacant"}`), []byte{}, false)
	f.Add([]byte(`{"kind":"authority-state","format":2}`), []byte{}, false)
	f.Fuzz(func(t *testing.T, state, token []byte, withToken bool) {
		r := readState(t, state, token, withToken)
		st, err, rev, trev := r.st, r.err, r.rev, r.tokenRev
		if err != nil {
			var re *metastore.RecordError
			if !errors.As(err, &re) || !errors.Is(err, metastore.ErrBadRecord) {
				t.Fatalf("a bad state is not a *metastore.RecordError matching ErrBadRecord: %v", err)
			}
			if re.Key != stateKey || re.Kind != "authority-state" || re.Reason == "" {
				t.Fatalf("the refusal does not name the record or the reason: %+v", re)
			}
			return
		}
		switch st.Phase {
		case authority.Vacant, authority.Granted, authority.Recovering, authority.Handoff:
		default:
			t.Fatalf("accepted phase %q", st.Phase)
		}
		if st.Kind != "authority-state" || st.Format != 1 || st.Domain != fuzzDomain || st.Revision != rev || st.TokenRevision != trev {
			t.Fatalf("accepted state %+v (stored at %d, token at %d)", st, rev, trev)
		}
		if st.String() == "" {
			t.Fatalf("an accepted state does not describe itself")
		}
		enc, err := metastore.EncodeRecord(&st)
		if err != nil {
			t.Fatalf("an accepted state does not encode: %v", err)
		}
		back := readState(t, enc, nil, false)
		if back.err != nil {
			t.Fatalf("the encoding of an accepted state is refused: %v\n%s", back.err, enc)
		}
		enc2, err := metastore.EncodeRecord(&back.st)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the state (%v):\n%s\n%s", err, enc, enc2)
		}
	})
}
