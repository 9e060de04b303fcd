//go:build unix

package fs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cutline/cutline/objstore"
)

// Delete implements objstore.Bucket. It then removes directories left
// empty, best effort; a Create racing that removal starts over.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	segs, err := b.enter(ctx, "delete", key)
	if err != nil {
		return err
	}
	defer b.mu.RUnlock()
	fail := func(err error) error { return b.opErr("delete", key, err) }

	dirs, last := segs[:len(segs)-1], segs[len(segs)-1]
	fds, err := b.walk(dirs, false)
	if err != nil {
		err = classifyRead(err)
		if errors.Is(err, objstore.ErrNotFound) {
			return nil
		}
		return fail(err)
	}
	defer closeAll(fds)
	parent := fds[len(fds)-1]
	// Flags 0: unlinkat never removes a directory, so a key that is only a
	// prefix of other keys stays intact.
	err = eintr(func() error { return unix.Unlinkat(parent, last, 0) })
	switch {
	case err == nil:
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EISDIR), errors.Is(err, unix.EPERM) && isDirAt(parent, last):
		return nil // no object, only a prefix of other keys
	default:
		return fail(objstore.Unavailable(fmt.Errorf("unlink: %w", err)))
	}
	if err := b.sync(parent); err != nil {
		return fail(objstore.Unavailable(fmt.Errorf("sync directory: %w", err)))
	}
	b.prune(fds, dirs)
	return nil
}

// prune removes the directories of dirs that are now empty, deepest first,
// stopping at the first that is not. rmdir only ever removes an empty
// directory, so it cannot take an object with it.
func (b *Bucket) prune(fds []int, dirs []string) {
	for i := len(dirs); i >= 1; i-- {
		err := eintr(func() error { return unix.Unlinkat(fds[i-1], dirs[i-1], unix.AT_REMOVEDIR) })
		if err != nil {
			if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.ENOENT) {
				b.log.Warn("fs: could not remove empty directory", "bucket", b.name,
					"dir", strings.Join(dirs[:i], "/"), "err", err)
			}
			return
		}
	}
}
