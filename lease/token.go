package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/metastore"
)

// ReadToken returns the stream's installed fencing token (mode Any with no
// token when none is installed).
func (s *Star) ReadToken(ctx context.Context, stream string) (*TokenRecord, error) {
	if err := epoch.ValidateName("stream", stream); err != nil {
		return nil, err
	}
	kv, ok, err := getOptional(ctx, s.cfg.Store, s.keys.token(stream))
	if err != nil {
		return nil, fmt.Errorf("lease: read the token of %s: %w", stream, err)
	}
	if !ok {
		return &TokenRecord{RecordHeader: hdr(tokenKind), Stream: stream, Mode: Any}, nil
	}
	return decodeToken(kv, stream)
}

// CheckToken judges a producer's token for a one-shot append to stream by
// exact equality with the installed one: on an Any stream a request
// without a token passes, on a Fenced stream none does. A stale token is a
// *TokenError. It reads the installed token from the metastore, so it
// sees a Fence made through any star.
//
// This is coordination between producers, not data safety: a stale
// writer's records are kept out by the epoch fence, whatever the token.
func (s *Star) CheckToken(ctx context.Context, stream, token string) error {
	if err := ValidateToken(token); err != nil {
		return err
	}
	t, err := s.ReadToken(ctx, stream)
	if err != nil {
		return err
	}
	return t.judge(token)
}

// Fence is the Fence verb: it installs token (and mode) on stream, by
// compare-and-set on the installed one, so that only requests presenting
// it pass from now on. When this star holds the stream, the tenure opened
// under the old token is superseded: the star leaves through Finish
// (ReasonSupersede) and reopens the stream under the new token, and the
// new tenure is returned; otherwise the returned tenure is nil.
func (s *Star) Fence(ctx context.Context, stream string, mode Mode, token string) (*Tenure, error) {
	if err := epoch.ValidateName("stream", stream); err != nil {
		return nil, err
	}
	if err := ValidateToken(token); err != nil {
		return nil, err
	}
	if !mode.valid() {
		return nil, &cutline.ConfigError{Field: "mode", Value: string(mode), Reason: "must be any or fenced"}
	}
	if mode == Fenced && token == "" {
		return nil, &cutline.ConfigError{Field: "token", Value: "", Reason: "a fenced stream needs a token"}
	}
	cur, err := s.ReadToken(ctx, stream)
	if err != nil {
		return nil, err
	}
	v, err := encode(&TokenRecord{RecordHeader: hdr(tokenKind), Stream: stream, Mode: mode, Token: token})
	if err != nil {
		return nil, err
	}
	if _, err := metastore.Put(ctx, s.cfg.Store, s.keys.token(stream), v, cur.Revision); err != nil {
		return nil, fmt.Errorf("lease: install the token of %s: %w", stream, err)
	}
	s.mu.Lock()
	t := s.held[stream]
	s.mu.Unlock()
	if t == nil {
		return nil, nil
	}
	if err := s.Finish(ctx, stream, ReasonSupersede); err != nil && !errors.Is(err, ErrNotHeld) {
		return nil, err
	}
	ten, err := s.Open(ctx, stream, OpenOptions{Token: token})
	if err != nil {
		return nil, err
	}
	return &ten, nil
}
