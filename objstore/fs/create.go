//go:build unix

package fs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cutline/cutline/objstore"
)

// maxRetries bounds how often Create starts over after a concurrent Delete
// removed a directory it was about to use.
const maxRetries = 100

// Create implements objstore.Bucket: the data is written to a temporary
// file, synced, and linked to its final name; link(2) fails with EEXIST
// when the name is taken, which makes the write create-only, and a reader
// sees either no file or the whole file.
func (b *Bucket) Create(ctx context.Context, key string, data []byte) error {
	segs, err := b.enter(ctx, "create", key)
	if err != nil {
		return err
	}
	defer b.mu.RUnlock()
	fail := func(err error) error { return b.opErr("create", key, err) }

	tmp, err := b.writeTemp(data)
	if err != nil {
		return fail(objstore.Unavailable(err))
	}
	defer b.removeTemp(tmp)

	dirs, last := segs[:len(segs)-1], segs[len(segs)-1]
	for attempt := 0; ; attempt++ {
		// Writing the temporary file may have taken a while: a caller that
		// gave up must not see its write land afterwards.
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		fds, err := b.walk(dirs, true)
		if err != nil {
			switch {
			case errors.Is(err, unix.ENOENT) && attempt < maxRetries:
				continue // a concurrent Delete removed a directory on our path
			case errors.Is(err, unix.ENOTDIR):
				return fail(conflict(key, "a prefix of it is an object"))
			}
			return fail(objstore.Unavailable(err))
		}
		parent := fds[len(fds)-1]
		err = eintr(func() error { return unix.Linkat(b.tmpFD, tmp, parent, last, 0) })
		switch {
		case err == nil:
			err = b.sync(parent)
			closeAll(fds)
			if err != nil {
				// The object is linked but may not survive a crash: the
				// outcome is unknown to the caller.
				return fail(objstore.Unavailable(fmt.Errorf("sync directory: %w", err)))
			}
			return nil
		case errors.Is(err, unix.EEXIST):
			if !isDirAt(parent, last) {
				closeAll(fds)
				return fail(objstore.ErrExists)
			}
			// A directory: a prefix of other objects, or an empty one that
			// a Delete could not prune. rmdir removes only the latter.
			rmErr := eintr(func() error { return unix.Unlinkat(parent, last, unix.AT_REMOVEDIR) })
			closeAll(fds)
			if rmErr != nil || attempt >= maxRetries {
				return fail(conflict(key, "it is a prefix of other objects"))
			}
		case errors.Is(err, unix.ENOENT) && attempt < maxRetries:
			closeAll(fds) // the parent was removed after we opened it
		default:
			closeAll(fds)
			return fail(objstore.Unavailable(fmt.Errorf("link: %w", err)))
		}
	}
}

// writeTemp writes data to a new file in the temporary directory, syncs it
// and returns its name.
func (b *Bucket) writeTemp(data []byte) (string, error) {
	var name string
	var fd int
	for {
		name = fmt.Sprintf("%016x", rand.Uint64())
		var err error
		fd, err = openFileAt(b.tmpFD, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, b.fileMode)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("create temporary file: %w", err)
		}
		break
	}
	f := os.NewFile(uintptr(fd), filepath.Join(b.root, TempDir, name))
	_, err := f.Write(data)
	if err == nil && !b.noSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.removeTemp(name)
		return "", fmt.Errorf("write temporary file: %w", err)
	}
	return name, nil
}

func (b *Bucket) removeTemp(name string) {
	if err := eintr(func() error { return unix.Unlinkat(b.tmpFD, name, 0) }); err != nil {
		b.log.Warn("fs: could not remove temporary file", "bucket", b.name, "file", name, "err", err)
	}
}
