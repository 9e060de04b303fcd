package objstore_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/memblob"
)

func TestRemoteOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts  objstore.RemoteOptions
		field string // "": valid
	}{
		{objstore.RemoteOptions{}, ""},
		{objstore.RemoteOptions{Retries: objstore.MaxRetries}, ""},
		{objstore.RemoteOptions{Retries: -1}, "Retries"},
		{objstore.RemoteOptions{Retries: objstore.MaxRetries + 1}, "Retries"},
		{objstore.RemoteOptions{Backoff: clock.Backoff{Min: -1}}, "Backoff.Min"},
		{objstore.RemoteOptions{Backoff: clock.Backoff{Min: time.Second, Max: time.Millisecond}}, "Backoff.Max"},
	} {
		err := tc.opts.Validate()
		if tc.field == "" {
			require.NoError(t, err, "%+v", tc.opts)
			continue
		}
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce, "%+v", tc.opts)
		require.Equal(t, tc.field, ce.Field)
	}
}

func TestRemoteOptionsWithDefaults(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	fake := clock.NewFake(time.Unix(0, 0))
	def := objstore.RemoteOptions{Name: "bkt", Retries: 3, Backoff: clock.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}}

	got := objstore.RemoteOptions{}.WithDefaults(def)
	require.Equal(t, "bkt", got.Name)
	require.Equal(t, 3, got.Retries)
	require.Equal(t, def.Backoff, got.Backoff)
	require.NotNil(t, got.Logger, "nil in both: discard")
	require.NotNil(t, got.Clock, "nil in both: the wall clock")

	set := objstore.RemoteOptions{Name: "zone-a", Logger: logger, Clock: fake, Retries: 7,
		Backoff: clock.Backoff{Max: 50 * time.Millisecond}}
	got = set.WithDefaults(def)
	require.Equal(t, "zone-a", got.Name)
	require.Same(t, logger, got.Logger)
	require.Same(t, fake, got.Clock)
	require.Equal(t, 7, got.Retries)
	require.Equal(t, clock.Backoff{Min: 50 * time.Millisecond, Max: 50 * time.Millisecond}, got.Backoff,
		"a zero Min takes the default, lowered to the Max that is set")

	got = objstore.RemoteOptions{}.WithDefaults(objstore.RemoteOptions{Logger: logger, Clock: fake})
	require.Same(t, logger, got.Logger)
	require.Same(t, fake, got.Clock)
}

type fakeClient struct{}

func TestNewRemote(t *testing.T) {
	classified := errors.New("classified")
	store := objstore.RemoteStore{
		Kind:      "test",
		NameField: "container",
		ValidName: func(name string) bool { return !strings.Contains(name, "/") },
		NameRule:  "no slash",
		Defaults:  objstore.RemoteOptions{Name: "ignored", Retries: 4, Backoff: clock.Backoff{Min: time.Millisecond, Max: time.Second}},
		Classify:  func(error) error { return classified },
	}
	for _, tc := range []struct {
		name   string
		client *fakeClient
		bucket string
		opts   objstore.RemoteOptions
		field  string
		value  any
	}{
		{"nil client", nil, "b", objstore.RemoteOptions{}, "client", nil},
		{"empty name", &fakeClient{}, "", objstore.RemoteOptions{}, "container", nil},
		{"invalid name", &fakeClient{}, "a/b", objstore.RemoteOptions{}, "container", `"a/b"`},
		{"bad options", &fakeClient{}, "b", objstore.RemoteOptions{Retries: -1}, "Retries", -1},
	} {
		_, err := objstore.NewRemote(tc.client, tc.bucket, tc.opts, store)
		require.ErrorIs(t, err, cutline.ErrInvalid, tc.name)
		var ce *cutline.ConfigError
		require.ErrorAs(t, err, &ce, tc.name)
		require.Equal(t, tc.field, ce.Field, tc.name)
		require.Equal(t, tc.value, ce.Value, tc.name)
	}
	_, err := objstore.NewRemote(&fakeClient{}, "a/b", objstore.RemoteOptions{}, store)
	require.ErrorContains(t, err, "no slash")

	r, err := objstore.NewRemote(&fakeClient{}, "bkt", objstore.RemoteOptions{}, store)
	require.NoError(t, err)
	require.Equal(t, "bkt", r.Name, "named by the store's name, not Defaults.Name")
	require.Equal(t, "test", r.Kind)
	require.Equal(t, 4, r.Retries)
	require.Equal(t, store.Defaults.Backoff, r.Backoff)
	require.Same(t, classified, r.Classify(errors.New("x")))

	r, err = objstore.NewRemote(&fakeClient{}, "bkt", objstore.RemoteOptions{Name: "zone-a", Retries: 1}, store)
	require.NoError(t, err)
	require.Equal(t, "zone-a", r.Name)
	require.Equal(t, 1, r.Retries)

	// The Resender re-sends as the options say, under the bucket's name.
	b := memblob.New("zone-a")
	rs := r.Resender(b)
	require.Equal(t, objstore.Resender{Bucket: b, Kind: "test", Retries: 1, Backoff: r.Backoff, Clock: r.Clock, Logger: r.Logger}, rs)
}
