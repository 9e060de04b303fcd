//go:build unix

package fs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fs"
	"github.com/cutline/cutline/objstore/objstoretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newBucket(t testing.TB, opts fs.Options) *fs.Bucket {
	t.Helper()
	b, err := fs.New(t.TempDir(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return newBucket(t, fs.Options{}) })
}

func BenchmarkBucket(b *testing.B) {
	objstoretest.RunBenchmarks(b, func(b *testing.B) objstore.Bucket { return newBucket(b, fs.Options{}) })
}

func BenchmarkBucketNoSync(b *testing.B) {
	objstoretest.RunBenchmarks(b, func(b *testing.B) objstore.Bucket { return newBucket(b, fs.Options{NoSync: true}) })
}

// entries lists what is on disk under dir, relative, directories with a
// trailing slash.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	require.NoError(t, err)
	return out
}

func TestLayoutAndTempFiles(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t, fs.Options{})
	require.NoError(t, b.Create(ctx, "p/star/00000001/00000000", []byte("flight")))
	require.ErrorIs(t, b.Create(ctx, "p/star/00000001/00000000", []byte("poison")), objstore.ErrExists)

	// One file per object at the key's path; no temporary file is left.
	require.Equal(t, []string{
		fs.TempDir + "/", "p/", "p/star/", "p/star/00000001/", "p/star/00000001/00000000",
	}, entries(t, b.Root()))
	raw, err := os.ReadFile(filepath.Join(b.Root(), "p/star/00000001/00000000"))
	require.NoError(t, err)
	require.Equal(t, "flight", string(raw), "the losing create did not touch the file")

	// A temporary file, even a leftover from a crash, is never an object.
	require.NoError(t, os.WriteFile(filepath.Join(b.Root(), fs.TempDir, "leftover"), []byte("x"), 0o644))
	page, err := b.List(ctx, "", "", 100)
	require.NoError(t, err)
	require.Equal(t, []objstore.ObjectInfo{{Key: "p/star/00000001/00000000", Size: 6}}, page)
	page, err = b.List(ctx, ".cutline", "", 100)
	require.NoError(t, err)
	require.Empty(t, page)
	page, err = b.List(ctx, fs.TempDir+"/", "", 100)
	require.NoError(t, err)
	require.Empty(t, page)

	for _, k := range []string{fs.TempDir, fs.TempDir + "/leftover", fs.TempDir + "/new"} {
		_, err := b.Get(ctx, k)
		require.ErrorIs(t, err, objstore.ErrInvalidKey, k)
		require.ErrorIs(t, b.Create(ctx, k, []byte("x")), objstore.ErrInvalidKey, k)
		require.ErrorIs(t, b.Delete(ctx, k), objstore.ErrInvalidKey, k)
	}
	_, err = os.Stat(filepath.Join(b.Root(), fs.TempDir, "leftover"))
	require.NoError(t, err, "Delete must not reach into the temporary directory")
	// A key that merely starts like the temporary directory is fine.
	require.NoError(t, b.Create(ctx, fs.TempDir+"x/y", []byte("ok")))
	require.NoError(t, b.Create(ctx, "a/"+fs.TempDir, []byte("ok")))
}

func TestDeleteRemovesEmptyDirectories(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t, fs.Options{})
	require.NoError(t, b.Create(ctx, "a/b/c/one", []byte("1")))
	require.NoError(t, b.Create(ctx, "a/two", []byte("2")))
	require.NoError(t, b.Delete(ctx, "a/b/c/one"))
	require.Equal(t, []string{fs.TempDir + "/", "a/", "a/two"}, entries(t, b.Root()))
	require.NoError(t, b.Delete(ctx, "a/two"))
	require.Equal(t, []string{fs.TempDir + "/"}, entries(t, b.Root()))
}

// TestCreateRacesDirectoryRemoval: creators and deleters share a directory
// that keeps being removed when it empties; no Create may fail for it.
func TestCreateRacesDirectoryRemoval(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t, fs.Options{NoSync: true})
	const workers, rounds = 8, 100
	errs := make(chan error, workers*rounds*2)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				k := fmt.Sprintf("shared/deep/dir/w%d-%d", w, i)
				if err := b.Create(ctx, k, []byte{byte(i)}); err != nil {
					errs <- fmt.Errorf("create %s: %w", k, err)
					continue
				}
				if err := b.Delete(ctx, k); err != nil {
					errs <- fmt.Errorf("delete %s: %w", k, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.Equal(t, []string{fs.TempDir + "/"}, entries(t, b.Root()))
}

func TestObjectAndPrefixConflict(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t, fs.Options{})
	require.NoError(t, b.Create(ctx, "a/b", []byte("leaf")))

	// "a" is a directory of other keys: it cannot also be an object here.
	err := b.Create(ctx, "a", []byte("x"))
	require.ErrorIs(t, err, objstore.ErrInvalidKey)
	require.NotErrorIs(t, err, objstore.ErrExists)
	var ke *objstore.KeyError
	require.ErrorAs(t, err, &ke)
	require.Contains(t, ke.Reason, "prefix of other objects")
	_, err = b.Get(ctx, "a")
	require.ErrorIs(t, err, objstore.ErrNotFound)
	require.NoError(t, b.Delete(ctx, "a"), "deleting a prefix deletes nothing")

	// "a/b" is an object: nothing can live below it.
	err = b.Create(ctx, "a/b/c", []byte("x"))
	require.ErrorIs(t, err, objstore.ErrInvalidKey)
	_, err = b.Get(ctx, "a/b/c")
	require.ErrorIs(t, err, objstore.ErrNotFound)
	require.NoError(t, b.Delete(ctx, "a/b/c"))

	got, err := b.Get(ctx, "a/b")
	require.NoError(t, err)
	require.Equal(t, "leaf", string(got))
}

func TestSymlinksAreNotFollowed(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t, fs.Options{})
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(b.Root(), "evil")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(b.Root(), "link")))

	for _, k := range []string{"evil/secret", "link"} {
		_, err := b.Get(ctx, k)
		require.ErrorIs(t, err, fs.ErrNotRegular, k)
		require.ErrorIs(t, err, objstore.ErrUnavailable, "%s: never read as absent", k)
		_, err = b.GetRange(ctx, k, 0, 1)
		require.ErrorIs(t, err, fs.ErrNotRegular, k)
	}
	require.ErrorIs(t, b.Create(ctx, "evil/new", []byte("x")), fs.ErrNotRegular)
	require.ErrorIs(t, b.Create(ctx, "link", []byte("x")), objstore.ErrExists)
	require.Error(t, b.Delete(ctx, "evil/secret"))

	require.Equal(t, []string{"secret"}, entries(t, outside), "nothing outside the root changed")
	page, err := b.List(ctx, "", "", 100)
	require.NoError(t, err)
	require.Empty(t, page, "symbolic links are never listed")
	page, err = b.List(ctx, "evil/", "", 100)
	require.NoError(t, err)
	require.Empty(t, page)
}

// Files whose names are not valid keys (written by something other than the
// bucket) are never listed.
func TestInvalidKeyFilesAreNotListed(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t, fs.Options{})
	require.NoError(t, b.Create(ctx, "ok", []byte("1")))
	for _, name := range []string{"back\\slash", "new\nline", "del\x7f"} {
		require.NoError(t, os.WriteFile(filepath.Join(b.Root(), name), []byte("x"), 0o644))
	}
	page, err := b.List(ctx, "", "", 100)
	require.NoError(t, err)
	require.Equal(t, []objstore.ObjectInfo{{Key: "ok", Size: 1}}, page)
}

func TestLongSegment(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t, fs.Options{})
	long := "x/" + string(make([]byte, 0)) + fmt.Sprintf("%0256d", 0)
	require.NoError(t, objstore.ValidateKey(long))
	require.ErrorIs(t, b.Create(ctx, long, []byte("x")), objstore.ErrInvalidKey)
	_, err := b.Get(ctx, long)
	require.ErrorIs(t, err, objstore.ErrInvalidKey)
	ok := "x/" + fmt.Sprintf("%0255d", 0)
	require.NoError(t, b.Create(ctx, ok, []byte("x")))
}

func TestReopenAndName(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "zone-a")
	b, err := fs.New(dir, fs.Options{CreateRoot: true})
	require.NoError(t, err)
	require.Equal(t, "zone-a", b.Name())
	require.NoError(t, b.Create(ctx, "k", []byte("v")))
	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "Close is idempotent")

	_, err = b.Get(ctx, "k")
	require.ErrorIs(t, err, cutline.ErrClosed)
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	_, err = b.List(ctx, "", "", 1)
	require.ErrorIs(t, err, cutline.ErrClosed)

	b2, err := fs.New(dir, fs.Options{Name: "other"})
	require.NoError(t, err)
	defer b2.Close()
	require.Equal(t, "other", b2.Name())
	got, err := b2.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "v", string(got))
	require.ErrorIs(t, b2.Create(ctx, "k", []byte("w")), objstore.ErrExists)

	var op *objstore.OpError
	err = b2.Create(ctx, "k", nil)
	require.ErrorAs(t, err, &op)
	require.Equal(t, "other", op.Bucket)
	require.Equal(t, "create", op.Op)
}

func TestNewRefusesBadRoots(t *testing.T) {
	_, err := fs.New("", fs.Options{})
	require.ErrorIs(t, err, cutline.ErrInvalid)
	var ce *cutline.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "root", ce.Field)
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = fs.New(file, fs.Options{})
	require.Error(t, err)
}

// TestNewRefusesMissingRoot: a mistyped root is a configuration error
// naming the path, never a new empty zone; CreateRoot asks for one.
func TestNewRefusesMissingRoot(t *testing.T) {
	parent := t.TempDir()
	typo := filepath.Join(parent, "zone-aa")
	_, err := fs.New(typo, fs.Options{Name: "zone-a"})
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NotErrorIs(t, err, objstore.ErrNotFound)
	var missing *fs.MissingRootError
	require.ErrorAs(t, err, &missing)
	require.Equal(t, typo, missing.Path)
	require.Equal(t, "zone-a", missing.Name)
	require.Contains(t, err.Error(), typo)
	require.Contains(t, err.Error(), "CreateRoot")
	_, statErr := os.Stat(typo)
	require.ErrorIs(t, statErr, os.ErrNotExist, "nothing was created")

	// A missing parent is refused the same way.
	_, err = fs.New(filepath.Join(parent, "no", "such"), fs.Options{})
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)

	// CreateRoot creates the root and its parents; an existing root is
	// opened as it is, with or without it.
	deep := filepath.Join(parent, "new", "zone-b")
	b, err := fs.New(deep, fs.Options{CreateRoot: true})
	require.NoError(t, err)
	require.NoError(t, b.Create(t.Context(), "k", []byte("v")))
	require.NoError(t, b.Close())
	for _, opts := range []fs.Options{{}, {CreateRoot: true}} {
		b, err := fs.New(deep, opts)
		require.NoError(t, err)
		got, err := b.Get(t.Context(), "k")
		require.NoError(t, err)
		require.Equal(t, "v", string(got))
		require.NoError(t, b.Close())
	}
}

// TestVerifyDistinct: two Buckets on one directory, however the path is
// spelled, are one zone; two directories are two.
func TestVerifyDistinct(t *testing.T) {
	ctx := t.Context()
	parent := t.TempDir()
	open := func(dir, name string) *fs.Bucket {
		b, err := fs.New(dir, fs.Options{Name: name, NoSync: true, CreateRoot: true})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, b.Close()) })
		return b
	}
	a := open(filepath.Join(parent, "a"), "zone-a")
	b := open(filepath.Join(parent, "b"), "zone-b")
	require.NoError(t, objstore.VerifyDistinct(ctx, a, b))

	require.NoError(t, os.Symlink(filepath.Join(parent, "a"), filepath.Join(parent, "link")))
	for _, dir := range []string{filepath.Join(parent, "a"), filepath.Join(parent, "b", "..", "a"), filepath.Join(parent, "link")} {
		alias := open(dir, "zone-c")
		err := objstore.VerifyDistinct(ctx, a, b, alias)
		require.ErrorIs(t, err, objstore.ErrAliased, dir)
		var ae *objstore.AliasError
		require.ErrorAs(t, err, &ae)
		require.Equal(t, objstore.AliasError{A: "zone-a", B: "zone-c"}, *ae)
	}
	for _, z := range []*fs.Bucket{a, b} {
		require.Equal(t, []string{fs.TempDir + "/"}, entries(t, z.Root()), "%s: no probe is left", z.Name())
	}
}

// TestTwoBucketsOneRoot: two Bucket values on one directory (as two
// processes would have) still let exactly one creator win.
func TestTwoBucketsOneRoot(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	b1, err := fs.New(dir, fs.Options{})
	require.NoError(t, err)
	defer b1.Close()
	b2, err := fs.New(dir, fs.Options{})
	require.NoError(t, err)
	defer b2.Close()
	for i := range 20 {
		k := fmt.Sprintf("k/%d", i)
		var e1, e2 error
		var wg sync.WaitGroup
		wg.Go(func() { e1 = b1.Create(ctx, k, []byte("one")) })
		wg.Go(func() { e2 = b2.Create(ctx, k, []byte("two")) })
		wg.Wait()
		require.True(t, (e1 == nil) != (e2 == nil), "exactly one winner: %v / %v", e1, e2)
		loser := e1
		if loser == nil {
			loser = e2
		}
		require.ErrorIs(t, loser, objstore.ErrExists)
	}
}

func TestCanceledCreateLeavesNothing(t *testing.T) {
	b := newBucket(t, fs.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := b.Create(ctx, "a/b", []byte("x"))
	require.True(t, errors.Is(err, context.Canceled))
	require.Equal(t, []string{fs.TempDir + "/"}, entries(t, b.Root()))
}

// TestListRootTwice: listing at the root level twice on one handle finds
// the same objects both times (a listing must not consume the root's
// directory position).
func TestListRootTwice(t *testing.T) {
	ctx := context.Background()
	b, err := fs.New(t.TempDir(), fs.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	for _, k := range []string{"a", "b/c", "d"} {
		require.NoError(t, b.Create(ctx, k, []byte(k)))
	}
	for range 3 {
		got, err := b.List(ctx, "", "", 0)
		require.NoError(t, err)
		require.Len(t, got, 3)
		n := 0
		for _, err := range objstore.All(ctx, b, "") {
			require.NoError(t, err)
			n++
		}
		require.Equal(t, 3, n)
	}
}

// TestNewRefusesNonDirectories: an empty root path, or a file where the
// root directory should be, is refused as objstore.ErrNoSuchBucket.
func TestNewRefusesNonDirectories(t *testing.T) {
	_, err := fs.New("", fs.Options{})
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	_, err = fs.New(file, fs.Options{})
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	_, err = fs.New(file, fs.Options{CreateRoot: true})
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
}
