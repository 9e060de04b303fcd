package main

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every bad flag is refused before anything starts, with an error that
// names the flag, the value and what the flag allows.
func TestFlags(t *testing.T) {
	const s3 = "http://127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-k", "0"}, "-k 0: want 1 to 26 zones"},
		{[]string{"-k", "27"}, "-k 27: want 1 to 26 zones"},
		{[]string{"-w", "0"}, "-w 0: want 1 ≤ W ≤ K=3"},
		{[]string{"-w", "4"}, "-w 4: want 1 ≤ W ≤ K=3"},
		{[]string{"-window", "0"}, "-window 0: want 1 to 65536"},
		{[]string{"-window", "65537"}, "-window 65537: want 1 to 65536"},
		{[]string{"-window", "1000000000000"}, "-window 1000000000000: want 1 to 65536"},
		{[]string{"-inflight", "0"}, "-inflight 0: want 1 to 64, at most -window 64"},
		{[]string{"-inflight", "65"}, "-inflight 65: want 1 to 64, at most -window 64"},
		{[]string{"-window", "8", "-inflight", "10"}, "-inflight 10: want 1 to 8, at most -window 8"},
		{[]string{"-records", "0"}, "-records 0: want 1 to 1000000"},
		{[]string{"-records", "10000000"}, "-records 10000000: want 1 to 1000000"},
		{[]string{"-records", "10"}, "-records 10: want at least -crash-after + -inflight = 224"},
		{[]string{"-crash-after", "-1"}, "-crash-after -1: want 0 to 1000000"},
		{[]string{"-crash-after", "5000000"}, "-crash-after 5000000: want 0 to 1000000"},
		{[]string{"-absorb-every", "0"}, "-absorb-every 0: want 1 to 65536"},
		{[]string{"-absorb-every", "65537"}, "-absorb-every 65537: want 1 to 65536"},
		{[]string{"-session-ttl", "500ms"}, "-session-ttl 500ms: want 1s to 1m0s"},
		{[]string{"-session-ttl", "2m"}, "-session-ttl 2m0s: want 1s to 1m0s"},
		{[]string{"-latency", "-1ms"}, "-latency -1ms: want 0 to 1s"},
		{[]string{"-latency", "1h"}, "-latency 1h0m0s: want 0 to 1s"},
		{[]string{"-timeout", "0"}, "-timeout 0s: want more than 0, at most 24h0m0s"},
		{[]string{"-timeout", "-1s"}, "-timeout -1s: want more than 0, at most 24h0m0s"},
		{[]string{"-timeout", "1000h"}, "-timeout 1000h0m0s: want more than 0, at most 24h0m0s"},
		{[]string{"-etcd", "127.0.0.1:2379,,127.0.0.1:2380"}, "-etcd 127.0.0.1:2379,,127.0.0.1:2380: want endpoints separated by single commas"},
		{[]string{"-s3-buckets", "a,b,c"}, "need -s3-endpoint"},
		{[]string{"-s3-endpoint", s3}, "needs -s3-buckets"},
		{[]string{"-s3-endpoint", s3, "-s3-buckets", "a,b", "-k", "3"}, "-k 3: want 2, the number of buckets in -s3-buckets"},
		{[]string{"-s3-endpoint", s3 + ",http://127.0.0.1:2", "-s3-buckets", "a,b,c"}, "give one endpoint, or one per bucket"},
		{[]string{"-s3-endpoint", "127.0.0.1:7070", "-s3-buckets", "a"}, `-s3-endpoint 127.0.0.1:7070: want http or https URLs, comma-separated; "127.0.0.1:7070" is not one`},
		{[]string{"-s3-endpoint", s3, "-s3-buckets", "a,,c"}, "-s3-buckets a,,c: want one bucket name per zone, none empty"},
		{[]string{"-s3-endpoint", s3, "-s3-buckets", strings.Repeat("b,", 26) + "b"}, "want 1 to 26 buckets, one per zone"},
		// One store named twice would count one physical copy as two.
		{[]string{"-s3-endpoint", s3, "-s3-buckets", "b1,b1,b3"},
			`-s3-buckets b1,b1,b3: want one distinct store per zone: bucket "b1" is given for zone-a and zone-b`},
		{[]string{"-s3-endpoint", s3, "-s3-buckets", "b1,b2,b3,b2"}, `bucket "b2" is given for zone-b and zone-d`},
		{[]string{"-s3-endpoint", "http://h1:1,http://h2:1,HTTP://H1:1/", "-s3-buckets", "b,b,b"},
			`-s3-buckets b,b,b: want one distinct store per zone: bucket "b" at HTTP://H1:1/ is given for zone-a and zone-c`},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-nonsense"}, "flag provided but not defined"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := run(t.Context(), tc.args, &out)
			require.Error(t, err)
			require.Contains(t, err.Error()+out.String(), tc.want)
		})
	}
	var out bytes.Buffer
	require.ErrorIs(t, run(t.Context(), []string{"-h"}, &out), flag.ErrHelp)
	require.Contains(t, out.String(), "-s3-endpoint")
	require.Contains(t, out.String(), "seed of the injected latency, and of nothing else")
}

// Values at the edges of their ranges are taken as given, never adjusted.
func TestFlagsAccepted(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		check func(t *testing.T, c *config)
	}{
		{[]string{"-inflight", "64"}, func(t *testing.T, c *config) { require.Equal(t, 64, c.inflight) }},
		{[]string{"-window", "65536", "-inflight", "65536", "-records", "1000000", "-crash-after", "0"}, func(t *testing.T, c *config) {
			require.Equal(t, 65536, c.window)
			require.Equal(t, 65536, c.inflight)
		}},
		{[]string{"-crash-after", "0", "-inflight", "1", "-records", "1", "-absorb-every", "65536", "-latency", "0", "-timeout", "24h"}, func(t *testing.T, c *config) {
			require.Equal(t, 1, c.records)
			require.Equal(t, 65536, c.absorbEvery)
		}},
		{[]string{"-session-ttl", "1s"}, func(t *testing.T, c *config) { require.Equal(t, time.Second, c.sessionTTL) }},
		{[]string{"-session-ttl", "1m"}, func(t *testing.T, c *config) { require.Equal(t, time.Minute, c.sessionTTL) }},
		{nil, func(t *testing.T, c *config) { require.Equal(t, 2*time.Second, c.sessionTTL) }},
		// One bucket name on distinct servers is distinct stores.
		{[]string{"-s3-endpoint", "http://h1:1,http://h2:1,http://h3:1", "-s3-buckets", "b,b,b"}, func(t *testing.T, c *config) {
			require.Equal(t, 3, c.k)
			require.Zero(t, c.latency, "no injected latency on real services unless asked for")
		}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			c, err := parseFlags(tc.args, io.Discard)
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}
