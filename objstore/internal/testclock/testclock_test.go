package testclock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/clock"
	"github.com/cutline/cutline/objstore/internal/testclock"
)

func TestInstant(t *testing.T) {
	var c testclock.Instant
	require.True(t, c.Now().IsZero())
	require.Empty(t, c.Waits())

	tm := c.NewTimer(time.Second)
	select {
	case at := <-tm.C():
		require.Equal(t, time.Time{}.Add(time.Second), at)
	default:
		t.Fatal("the timer has not fired")
	}
	require.False(t, tm.Stop(), "a fired timer cannot be stopped")

	require.NoError(t, clock.Sleep(context.Background(), &c, 2*time.Second), "a sleep returns at once")

	called := make(chan struct{})
	at := c.AfterFunc(3*time.Second, func() { close(called) })
	<-called
	require.Nil(t, at.C())
	require.False(t, at.Stop())

	waits := c.Waits()
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, waits)
	require.Equal(t, time.Time{}.Add(6*time.Second), c.Now())
	waits[0] = 0
	require.Equal(t, time.Second, c.Waits()[0], "Waits returns a copy")
}
