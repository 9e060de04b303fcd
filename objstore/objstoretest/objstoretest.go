package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cutline/cutline/objstore"
)

// Run runs the conformance suite against the buckets made by newBucket, one
// named subtest per property. newBucket is called once per subtest; it may
// return a fresh bucket every time or the same shared bucket: every subtest
// works under its own random key prefix and deletes what it created when it
// ends.
//
// Run a single property with go test -run 'TestX/ConcurrentCreators'.
func Run(t *testing.T, newBucket func(t *testing.T) objstore.Bucket) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBucket(t)
			require.NotNil(t, b, "newBucket returned nil")
			p := uniquePrefix(c.name)
			t.Cleanup(func() { removeAll(t, b, p) })
			c.run(t, b, p)
		})
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, b objstore.Bucket, p string)
}{
	{"CreateOnly", testCreateOnly},
	{"ConcurrentCreators", testConcurrentCreators},
	{"NotFound", testNotFound},
	{"Exists", testExists},
	{"GetRange", testGetRange},
	{"Delete", testDelete},
	{"List", testList},
	{"ListPaging", testListPaging},
	{"LargeObject", testLargeObject},
	{"EmptyObject", testEmptyObject},
	{"KeyCharacters", testKeyCharacters},
	{"InvalidKeys", testInvalidKeys},
	{"CanceledContext", testCanceledContext},
	{"DataOwnership", testDataOwnership},
}

// uniquePrefix returns a key prefix ending in '/' that no other run uses, so
// the suite can share a real bucket with other runs and other data.
func uniquePrefix(name string) string {
	return fmt.Sprintf("objstoretest/%016x/%s/", rand.Uint64(), name)
}

// removeAll deletes every object under p; failures are only logged because
// the property under test has already been judged.
func removeAll(t testing.TB, b objstore.Bucket, p string) {
	ctx := context.Background()
	var keys []string
	for o, err := range objstore.All(ctx, b, p) {
		if err != nil {
			t.Logf("cleanup: list %s: %v", p, err)
			return
		}
		keys = append(keys, o.Key)
	}
	for _, k := range keys {
		if err := b.Delete(ctx, k); err != nil {
			t.Logf("cleanup: delete %s: %v", k, err)
		}
	}
}

// payload returns n deterministic bytes that differ for different tags.
func payload(tag string, n int) []byte {
	var seed [32]byte
	copy(seed[:], fmt.Sprintf("%d/%s", n, tag))
	out := make([]byte, n)
	_, _ = rand.NewChaCha8(seed).Read(out)
	return out
}

func requireBytes(t *testing.T, want, got []byte, msgAndArgs ...any) {
	t.Helper()
	if !bytes.Equal(want, got) {
		require.Failf(t, "bytes differ", "want %d bytes %s, got %d bytes %s; %s",
			len(want), head(want), len(got), head(got), fmt.Sprint(msgAndArgs...))
	}
}

func head(b []byte) string {
	if len(b) > 16 {
		return fmt.Sprintf("%x…", b[:16])
	}
	return fmt.Sprintf("%x", b)
}

func testCreateOnly(t *testing.T, b objstore.Bucket, p string) {
	ctx := t.Context()
	k := p + "obj"
	first, second := payload("first", 300), payload("second", 300)

	require.NoError(t, b.Create(ctx, k, first))
	err := b.Create(ctx, k, second)
	require.ErrorIs(t, err, objstore.ErrExists, "second create must lose")

	got, err := b.Get(ctx, k)
	require.NoError(t, err)
	requireBytes(t, first, got, "the losing create must not touch the object")

	// A longer and a shorter loser must not leave a trace either.
	require.ErrorIs(t, b.Create(ctx, k, payload("long", 5000)), objstore.ErrExists)
	require.ErrorIs(t, b.Create(ctx, k, []byte("x")), objstore.ErrExists)
	got, err = b.Get(ctx, k)
	require.NoError(t, err)
	requireBytes(t, first, got)
}

// testConcurrentCreators races 32 creators with distinct payloads on one key
// while readers poll it: exactly one creator wins, every other one gets
// ErrExists, and no reader ever sees bytes other than the winner's (a
// partial object or a loser's payload would show up here).
func testConcurrentCreators(t *testing.T, b objstore.Bucket, p string) {
	const creators, readers, rounds = 32, 2, 3
	ctx := t.Context()
	for round := range rounds {
		k := fmt.Sprintf("%srace-%d", p, round)
		payloads := make([][]byte, creators)
		for i := range payloads {
			// Sizes differ so that a torn or mixed object is detectable.
			payloads[i] = payload(fmt.Sprintf("creator-%d-%d", round, i), 2048+37*i)
		}

		start := make(chan struct{})
		done := make(chan struct{})
		errs := make([]error, creators)
		seen := make([][][]byte, readers)
		readErrs := make([]error, readers)
		var cw, rw sync.WaitGroup
		for i := range creators {
			cw.Go(func() {
				<-start
				errs[i] = b.Create(ctx, k, payloads[i])
			})
		}
		for r := range readers {
			rw.Go(func() {
				<-start
				for {
					select {
					case <-done:
						return
					default:
					}
					got, err := b.Get(ctx, k)
					switch {
					case errors.Is(err, objstore.ErrNotFound):
					case err != nil:
						readErrs[r] = err
						return
					default:
						seen[r] = append(seen[r], got)
					}
				}
			})
		}
		close(start)
		cw.Wait()
		close(done)
		rw.Wait()

		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: creators %d and %d both won", round, winner, i)
				}
				winner = i
			case errors.Is(err, objstore.ErrExists):
			default:
				t.Fatalf("round %d: creator %d: want nil or ErrExists, got %v", round, i, err)
			}
		}
		require.GreaterOrEqual(t, winner, 0, "round %d: no creator won", round)
		for r, err := range readErrs {
			require.NoError(t, err, "round %d: reader %d", round, r)
		}
		for r := range seen {
			for _, got := range seen[r] {
				requireBytes(t, payloads[winner], got, "round ", round, ": reader ", r, " saw bytes that are not the winner's")
			}
		}

		// Every reader afterwards sees the winner's bytes.
		var gw sync.WaitGroup
		after := make([][]byte, 8)
		afterErrs := make([]error, len(after))
		for i := range after {
			gw.Go(func() { after[i], afterErrs[i] = b.Get(ctx, k) })
		}
		gw.Wait()
		for i := range after {
			require.NoError(t, afterErrs[i])
			requireBytes(t, payloads[winner], after[i], "round ", round, ": reader after the race")
		}
	}
}

func testNotFound(t *testing.T, b objstore.Bucket, p string) {
	ctx := t.Context()
	check := func(k string) {
		t.Helper()
		_, err := b.Get(ctx, k)
		require.ErrorIs(t, err, objstore.ErrNotFound, "get %s", k)
		assert.NotErrorIs(t, err, objstore.ErrUnavailable, "get %s: not found must be a definite answer", k)
		_, err = b.GetRange(ctx, k, 0, 10)
		require.ErrorIs(t, err, objstore.ErrNotFound, "getrange %s", k)
		assert.NotErrorIs(t, err, objstore.ErrUnavailable, "getrange %s", k)
		_, err = b.GetRange(ctx, k, 100, 10)
		require.ErrorIs(t, err, objstore.ErrNotFound, "getrange past the end of %s", k)
	}
	check(p + "missing")
	check(p + "deep/missing/key")

	// A key that is only a prefix of other keys holds no object, and nothing
	// exists below an object's key.
	require.NoError(t, b.Create(ctx, p+"dir/leaf", []byte("leaf")))
	check(p + "dir")
	require.NoError(t, b.Create(ctx, p+"file", []byte("file")))
	check(p + "file/below")
	check(p + "fil")
	check(p + "file2")
}

func testExists(t *testing.T, b objstore.Bucket, p string) {
	ctx := t.Context()
	for _, tc := range []struct {
		name          string
		first, second []byte
	}{
		{"different-bytes", []byte("one"), []byte("two")},
		{"identical-bytes", []byte("same"), []byte("same")},
		{"empty-then-data", nil, []byte("data")},
		{"data-then-empty", []byte("data"), nil},
	} {
		k := p + tc.name
		require.NoError(t, b.Create(ctx, k, tc.first), tc.name)
		err := b.Create(ctx, k, tc.second)
		require.ErrorIs(t, err, objstore.ErrExists, tc.name)
		assert.NotErrorIs(t, err, objstore.ErrUnavailable, "%s: exists must be a definite answer", tc.name)
		assert.NotErrorIs(t, err, objstore.ErrNotFound, tc.name)
		got, err := b.Get(ctx, k)
		require.NoError(t, err)
		requireBytes(t, tc.first, got, tc.name)
	}
}

func testGetRange(t *testing.T, b objstore.Bucket, p string) {
	ctx := t.Context()
	k := p + "ranged"
	data := payload("ranged", 100)
	require.NoError(t, b.Create(ctx, k, data))

	for _, tc := range []struct {
		name           string
		offset, length int64
		want           []byte
	}{
		{"prefix", 0, 10, data[:10]},
		{"whole", 0, 100, data},
		{"middle", 40, 20, data[40:60]},
		{"one-byte", 99, 1, data[99:]},
		{"runs-past-end", 90, 50, data[90:]},
		{"huge-length", 1, math.MaxInt64, data[1:]},
		{"offset-at-end", 100, 5, nil},
		{"offset-past-end", 500, 5, nil},
		{"offset-far-past-end", math.MaxInt64 - 1, 1, nil},
	} {
		got, err := b.GetRange(ctx, k, tc.offset, tc.length)
		require.NoError(t, err, tc.name)
		requireBytes(t, tc.want, got, tc.name)
	}

	for _, tc := range []struct {
		name           string
		offset, length int64
	}{
		{"negative-offset", -1, 5},
		{"zero-length", 0, 0},
		{"negative-length", 0, -1},
		{"both-negative", -5, -5},
	} {
		_, err := b.GetRange(ctx, k, tc.offset, tc.length)
		require.ErrorIs(t, err, objstore.ErrInvalidRange, tc.name)
	}

	empty := p + "ranged-empty"
	require.NoError(t, b.Create(ctx, empty, nil))
	got, err := b.GetRange(ctx, empty, 0, 1)
	require.NoError(t, err)
	require.Empty(t, got)
}

func testDelete(t *testing.T, b objstore.Bucket, p string) {
	ctx := t.Context()
	k := p + "a/b/victim"
	require.NoError(t, b.Delete(ctx, k), "deleting a missing object succeeds")
	require.NoError(t, b.Delete(ctx, p+"never/existed"), "deleting under a missing prefix succeeds")

	require.NoError(t, b.Create(ctx, k, []byte("old")))
	require.NoError(t, b.Create(ctx, p+"a/b/neighbour", []byte("n")))
	require.NoError(t, b.Delete(ctx, k))
	_, err := b.Get(ctx, k)
	require.ErrorIs(t, err, objstore.ErrNotFound)
	require.NoError(t, b.Delete(ctx, k), "second delete succeeds")

	// The key is free again, and neighbours are untouched.
	require.NoError(t, b.Create(ctx, k, []byte("new")))
	got, err := b.Get(ctx, k)
	require.NoError(t, err)
	requireBytes(t, []byte("new"), got)
	got, err = b.Get(ctx, p+"a/b/neighbour")
	require.NoError(t, err)
	requireBytes(t, []byte("n"), got)

	// Deleting the only object below a prefix and creating there again works
	// (backends that keep directories must not trip over their removal).
	solo := p + "x/y/z/solo"
	for i := range 3 {
		require.NoError(t, b.Create(ctx, solo, []byte{byte(i)}), "round %d", i)
		require.NoError(t, b.Delete(ctx, solo), "round %d", i)
	}
	_, err = b.Get(ctx, solo)
	require.ErrorIs(t, err, objstore.ErrNotFound)

	// A key that is only a prefix of other keys: deleting it deletes nothing.
	require.NoError(t, b.Delete(ctx, p+"a/b"))
	got, err = b.Get(ctx, k)
	require.NoError(t, err)
	requireBytes(t, []byte("new"), got)

	keys := listKeys(t, b, p, "", 0)
	require.Equal(t, []string{p + "a/b/neighbour", p + "a/b/victim"}, keys)
}

// listKeys pages through List with the given page size and returns the keys.
func listKeys(t *testing.T, b objstore.Bucket, prefix, startAfter string, limit int) []string {
	t.Helper()
	var keys []string
	after := startAfter
	for range 10000 {
		page, err := b.List(t.Context(), prefix, after, limit)
		require.NoError(t, err, "list %q after %q limit %d", prefix, after, limit)
		if len(page) == 0 {
			return keys
		}
		if limit > 0 {
			require.LessOrEqual(t, len(page), limit, "list returned more than limit")
		}
		for _, o := range page {
			require.True(t, strings.HasPrefix(o.Key, prefix), "listed %q outside prefix %q", o.Key, prefix)
			require.Greater(t, o.Key, after, "listed %q not after %q", o.Key, after)
			after = o.Key
			keys = append(keys, o.Key)
		}
	}
	t.Fatalf("list %q never returned an empty page", prefix)
	return nil
}

// listKeyNames are chosen so that a backend walking directories ('-' and '.'
// sort before '/', '0' after it) must still produce lexical key order. No
// name is both an object and a prefix of another ("a" and "a/b"): a file
// system layout cannot hold both.
var listKeyNames = []string{
	"a-b", "a.b", "a/b-c", "a/b.d", "a/b/c", "a/b/d/e", "a/b0", "a0", "aa",
	"b", "c-", "c/d", "z",
}

func testList(t *testing.T, b objstore.Bucket, p string) {
	ctx := t.Context()
	shuffled := slices.Clone(listKeyNames)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	sizes := map[string]int64{}
	for i, n := range shuffled {
		data := payload(n, i*3)
		require.NoError(t, b.Create(ctx, p+n, data))
		sizes[p+n] = int64(len(data))
	}
	all := make([]string, len(listKeyNames))
	for i, n := range listKeyNames {
		all[i] = p + n
	}
	require.True(t, slices.IsSorted(all))

	page, err := b.List(ctx, p, "", 1000)
	require.NoError(t, err)
	var got []string
	for _, o := range page {
		got = append(got, o.Key)
		require.Equal(t, sizes[o.Key], o.Size, "size of %s", o.Key)
	}
	require.Equal(t, all, got, "one page, lexical order")

	filter := func(prefix, after string) []string {
		var out []string
		for _, k := range all {
			if strings.HasPrefix(k, prefix) && k > after {
				out = append(out, k)
			}
		}
		return out
	}
	for _, tc := range []struct{ prefix, after string }{
		{p, ""},
		{p + "a", ""},
		{p + "a/", ""},
		{p + "a/b", ""},
		{p + "a/b/", ""},
		{p + "a/c", ""},
		{p + "c", ""},
		{p + "nothing", ""},
		{p + "a/b/c/d", ""},
		{p, p + "a"},
		{p, p + "a/"},
		{p, p + "a/b"},
		{p, p + "a/b/c"},
		{p, p + "a/b/d"},
		{p, p + "a/b/d/"},
		{p, p + "a/b/d/e"},
		{p, p + "a/b/d/f"},
		{p, p + "a/bz"},
		{p, p + "a0"},
		{p, p + "aa"},
		{p, p + "b/"},
		{p, p + "zz"},
		{p, p},
		{p, "objstoretest"},
		{p + "a", p + "a.b"},
		{p + "a/", p + "a/b0"},
		{p, p + "a/c/d/e"},
		{p, p + "\u00ff"},
	} {
		want := filter(tc.prefix, tc.after)
		for _, limit := range []int{1, 2, 3, 1000} {
			require.Equal(t, want, listKeys(t, b, tc.prefix, tc.after, limit),
				"prefix %q after %q limit %d", tc.prefix, tc.after, limit)
		}
	}

	// limit ≤ 0: a backend-chosen page of at least one object.
	for _, limit := range []int{0, -1} {
		page, err := b.List(ctx, p, "", limit)
		require.NoError(t, err)
		require.NotEmpty(t, page, "limit %d", limit)
		require.Equal(t, all[:len(page)], keysOf(page))
	}

	// All pages through everything in order and stops when asked.
	var viaAll []string
	for o, err := range objstore.All(ctx, b, p) {
		require.NoError(t, err)
		viaAll = append(viaAll, o.Key)
	}
	require.Equal(t, all, viaAll)
	n := 0
	for _, err := range objstore.All(ctx, b, p) {
		require.NoError(t, err)
		n++
		if n == 3 {
			break
		}
	}
	require.Equal(t, 3, n)
}

func keysOf(infos []objstore.ObjectInfo) []string {
	out := make([]string, len(infos))
	for i, o := range infos {
		out[i] = o.Key
	}
	return out
}

// testListPaging lists more objects than one page of objstore.All.
func testListPaging(t *testing.T, b objstore.Bucket, p string) {
	ctx := t.Context()
	const n = 1050
	want := make([]string, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		want[i] = fmt.Sprintf("%s%03d/%05d", p, i%7, i)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = b.Create(ctx, want[i], []byte{byte(i)})
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, want[i])
	}
	slices.Sort(want)
	var got []string
	for o, err := range objstore.All(ctx, b, p) {
		require.NoError(t, err)
		require.EqualValues(t, 1, o.Size)
		got = append(got, o.Key)
	}
	require.Equal(t, want, got)
	require.Equal(t, want[500:], listKeys(t, b, p, want[499], 250))
}

func testLargeObject(t *testing.T, b objstore.Bucket, p string) {
	ctx := t.Context()
	k := p + "large"
	data := payload("large", 8<<20)
	require.NoError(t, b.Create(ctx, k, data))
	got, err := b.Get(ctx, k)
	require.NoError(t, err)
	requireBytes(t, data, got)
	part, err := b.GetRange(ctx, k, 3<<20+17, 1<<20)
	require.NoError(t, err)
	requireBytes(t, data[3<<20+17:4<<20+17], part)
	tail, err := b.GetRange(ctx, k, 8<<20-5, 1<<20)
	require.NoError(t, err)
	requireBytes(t, data[8<<20-5:], tail)
	page, err := b.List(ctx, p, "", 10)
	require.NoError(t, err)
	require.Equal(t, []objstore.ObjectInfo{{Key: k, Size: 8 << 20}}, page)
	require.ErrorIs(t, b.Create(ctx, k, payload("other", 8<<20)), objstore.ErrExists)
}

func testEmptyObject(t *testing.T, b objstore.Bucket, p string) {
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		data []byte
	}{{"nil", nil}, {"empty", []byte{}}} {
		k := p + tc.name
		require.NoError(t, b.Create(ctx, k, tc.data), tc.name)
		got, err := b.Get(ctx, k)
		require.NoError(t, err, "an empty object exists")
		require.Empty(t, got)
		r, err := b.GetRange(ctx, k, 0, 10)
		require.NoError(t, err)
		require.Empty(t, r)
		require.ErrorIs(t, b.Create(ctx, k, []byte("late")), objstore.ErrExists, tc.name)
		require.ErrorIs(t, b.Create(ctx, k, nil), objstore.ErrExists, tc.name)
	}
	page, err := b.List(ctx, p, "", 10)
	require.NoError(t, err)
	require.Equal(t, []objstore.ObjectInfo{{Key: p + "empty", Size: 0}, {Key: p + "nil", Size: 0}}, page)
}

// testKeyCharacters round-trips keys with characters that need escaping in
// URLs or are special to shells and file systems.
func testKeyCharacters(t *testing.T, b objstore.Bucket, p string) {
	ctx := t.Context()
	names := []string{
		"with space", "plus+equals=", "percent%20x", "query?x#frag", "tilde~",
		"ünïcödé/ключ/鍵", "quote'dq\"", "amp&semi;", "colon:at@", "star*[x]",
		"dot.leading/.hidden", "dots.../x", "-dash", "_under",
	}
	for _, n := range names {
		require.NoError(t, objstore.ValidateKey(p+n), n)
		require.NoError(t, b.Create(ctx, p+n, []byte(n)), n)
	}
	for _, n := range names {
		got, err := b.Get(ctx, p+n)
		require.NoError(t, err, n)
		requireBytes(t, []byte(n), got, n)
		require.ErrorIs(t, b.Create(ctx, p+n, []byte("again")), objstore.ErrExists, n)
	}
	want := make([]string, len(names))
	for i, n := range names {
		want[i] = p + n
	}
	slices.Sort(want)
	require.Equal(t, want, listKeys(t, b, p, "", 4))
}

// badKeys returns keys under p that ValidateKey refuses, with the reason
// each one is bad, plus a few bad keys that cannot carry a prefix.
func badKeys(p string) map[string]string {
	return map[string]string{
		"":                 "empty",
		"/abs":             "leading slash",
		"/" + p + "x":      "leading slash before prefix",
		"..":               "dot-dot",
		".":                "dot",
		"../escape":        "dot-dot first",
		p + "../../escape": "dot-dot inside",
		p + "a/../b":       "dot-dot middle",
		p + "a/./b":        "dot middle",
		p + "a//b":         "empty segment",
		p + "trailing/":    "trailing slash",
		p + "nul\x00byte":  "NUL",
		p + "new\nline":    "newline",
		p + "tab\tx":       "tab",
		p + "del\x7f":      "DEL",
		p + "c1\u0085":     "C1 control",
		p + "back\\slash":  "backslash",
		p + "bad\xffutf8":  "invalid UTF-8",
		p + strings.Repeat("k", objstore.MaxKeyLen): "over-long",
	}
}

func testInvalidKeys(t *testing.T, b objstore.Bucket, p string) {
	ctx := t.Context()
	for k, why := range badKeys(p) {
		require.Error(t, objstore.ValidateKey(k), why)
		require.ErrorIs(t, b.Create(ctx, k, []byte("x")), objstore.ErrInvalidKey, "create: %s", why)
		_, err := b.Get(ctx, k)
		require.ErrorIs(t, err, objstore.ErrInvalidKey, "get: %s", why)
		_, err = b.GetRange(ctx, k, 0, 1)
		require.ErrorIs(t, err, objstore.ErrInvalidKey, "getrange: %s", why)
		require.ErrorIs(t, b.Delete(ctx, k), objstore.ErrInvalidKey, "delete: %s", why)
	}
	for _, prefix := range []string{"/", "/abs", "..", "../x", p + "a//", p + "a/../", p + "nul\x00", p + "back\\"} {
		_, err := b.List(ctx, prefix, "", 10)
		require.ErrorIs(t, err, objstore.ErrInvalidKey, "list prefix %q", prefix)
	}
	page, err := b.List(ctx, p, "", 10)
	require.NoError(t, err)
	require.Empty(t, page, "an invalid key created something")
}

func testCanceledContext(t *testing.T, b objstore.Bucket, p string) {
	ctx := t.Context()
	k := p + "obj"
	require.NoError(t, b.Create(ctx, k, []byte("present")))

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(ctx, time.Unix(1, 0))
	defer cancel2()

	for _, tc := range []struct {
		name string
		ctx  context.Context
		want error
	}{{"canceled", canceled, context.Canceled}, {"deadline", expired, context.DeadlineExceeded}} {
		fresh := p + "fresh-" + tc.name
		err := b.Create(tc.ctx, fresh, []byte("x"))
		require.ErrorIs(t, err, tc.want, "create with a %s context must not report success", tc.name)
		if _, err := b.Get(ctx, fresh); err == nil {
			t.Logf("note: a create with a %s context landed (allowed, reported as an error)", tc.name)
		}
		_, err = b.Get(tc.ctx, k)
		require.ErrorIs(t, err, tc.want, "get")
		_, err = b.GetRange(tc.ctx, k, 0, 1)
		require.ErrorIs(t, err, tc.want, "getrange")
		_, err = b.List(tc.ctx, p, "", 10)
		require.ErrorIs(t, err, tc.want, "list")
		require.ErrorIs(t, b.Delete(tc.ctx, k), tc.want, "delete")
	}
	if _, err := b.Get(ctx, k); err != nil {
		t.Logf("note: a delete with a done context landed (allowed, reported as an error): %v", err)
	}
}

// testDataOwnership checks that Create does not keep the caller's slice and
// that Get hands out a slice the caller owns.
func testDataOwnership(t *testing.T, b objstore.Bucket, p string) {
	ctx := t.Context()
	k := p + "owned"
	data := []byte("original")
	require.NoError(t, b.Create(ctx, k, data))
	copy(data, "mutated!")
	got, err := b.Get(ctx, k)
	require.NoError(t, err)
	requireBytes(t, []byte("original"), got)
	copy(got, "changed!")
	again, err := b.Get(ctx, k)
	require.NoError(t, err)
	requireBytes(t, []byte("original"), again)
	r, err := b.GetRange(ctx, k, 0, 4)
	require.NoError(t, err)
	copy(r, "XXXX")
	again, err = b.Get(ctx, k)
	require.NoError(t, err)
	requireBytes(t, []byte("original"), again)
}
