package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/mem"
)

// A held PUT gets no answer until its caller's context ends, reaches the
// zone only when landed, and is kept once: nothing answered means nothing
// retried.
func TestLinkHoldsPUTsUntilTheCallerDies(t *testing.T) {
	ctx := t.Context()
	zone := mem.New("zone-a")
	l := newLink(ctx, zone)
	require.NoError(t, l.Create(ctx, "held/1", []byte("first"))) // before hold: passed through
	gone, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, l.Create(gone, "sent/1", nil), "a PUT passed on is not recalled with its caller")
	l.hold(func(key string) bool { return strings.HasPrefix(key, "held/") })

	dying, die := context.WithCancel(ctx)
	answers := make(chan error, 2)
	go func() { answers <- l.Create(dying, "held/1", []byte("again")) }()
	go func() { answers <- l.Create(dying, "held/2", []byte("second")) }()
	require.NoError(t, l.waitKept(ctx, []string{"held/2", "held/1"}))
	require.NoError(t, l.Create(ctx, "other/1", nil), "a key the link does not hold passes")
	select {
	case err := <-answers:
		t.Fatalf("a held PUT was answered: %v", err)
	default:
	}
	_, err := zone.Get(ctx, "held/2")
	require.ErrorIs(t, err, objstore.ErrNotFound, "a held PUT reached the zone before it landed")

	die()
	for range 2 {
		require.ErrorIs(t, <-answers, context.Canceled)
	}
	require.Equal(t, 2, l.keptCount())

	created, err := l.land(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, created, "held/1 was taken, held/2 was not")
	got, err := zone.Get(ctx, "held/2")
	require.NoError(t, err)
	require.Equal(t, "second", string(got))
	require.Zero(t, l.keptCount())
}
