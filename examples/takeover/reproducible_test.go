package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// What the wall clock decides in a run's output: durations (the elapsed
// time that starts each timeline line, phase and request times), and what
// each run makes unique (its run ID and temporary directory).
var (
	durationRE = regexp.MustCompile(`\d+(\.\d+)?(ns|µs|ms|s|m|h)(\d+(\.\d+)?(ns|µs|ms|s|m|h))*`)
	runIDRE    = regexp.MustCompile(`run-[0-9a-f]{8}`)
	tempDirRE  = regexp.MustCompile(`cutline-takeover-\d+`)
	spacesRE   = regexp.MustCompile(` +`)
)

// reproducible is a run's output without what the wall clock decides: the
// part a run with the same flags must print again.
func reproducible(s string) string {
	s = durationRE.ReplaceAllString(s, "T")
	s = runIDRE.ReplaceAllString(s, "RUN")
	s = tempDirRE.ReplaceAllString(s, "DIR")
	return spacesRE.ReplaceAllString(s, " ") // columns widen with the times
}

// The same flags print the same lines and counts every time: which PUTs are
// held up and become the zombie's, what the host absorbed before star-a
// died, how many requests each party sent. The shape is one where timing
// used to show: star-a dies right after acknowledging a full absorb batch
// (60 = 3 × 20), with its held-up PUTs waiting long enough for retries.
// The seed changes the injected latency only, so another seed prints the
// same counts too.
func TestTakeoverReproducible(t *testing.T) {
	args := []string{"-records", "120", "-crash-after", "60", "-inflight", "16", "-absorb-every", "20", "-latency", "2ms"}
	first := runDemo(t, 120, append(args, "-seed", "7")...)
	// K=3, W=2: star-a loses zone-a and zone-b, where all 16 in-flight
	// PUTs are held up, and zone-c, where the hole slot's PUT is.
	for _, want := range []string{
		"the host absorbed 60 of them (refs written, checkpoint 60); 0 acknowledged records are not absorbed yet",
		"33 of its PUTs are still in the network: a zombie",
		"star-a's 33 held-back PUTs land now: 19 created, 14 refused",
		"9 slots past the cut (67–75) now hold the zombie's flight",
	} {
		require.Contains(t, first, want)
	}
	// star-a sends one PUT per zone and slot: 3 × (60 + 16).
	require.Regexp(t, `star-a \(writer; PUTs sent\) +228 ×`, first)

	for _, seed := range []string{"7", "8"} {
		again := runDemo(t, 120, append(args, "-seed", seed)...)
		require.Equal(t, lines(reproducible(first)), lines(reproducible(again)), "-seed %s", seed)
	}
}

// lines splits s for a readable diff.
func lines(s string) []string { return strings.Split(s, "\n") }
