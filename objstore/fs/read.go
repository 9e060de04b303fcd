//go:build unix

package fs

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/cutline/cutline/objstore"
)

// Get implements objstore.Bucket.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	return b.read(ctx, "get", key, 0, -1)
}

// GetRange implements objstore.Bucket.
func (b *Bucket) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	return b.read(ctx, "getrange", key, offset, length)
}

// read returns length bytes at offset, or the rest of the object when
// length is -1 (Get).
func (b *Bucket) read(ctx context.Context, op, key string, offset, length int64) ([]byte, error) {
	segs, err := b.enter(ctx, op, key)
	if err != nil {
		return nil, err
	}
	defer b.mu.RUnlock()
	fail := func(err error) ([]byte, error) { return nil, b.opErr(op, key, err) }
	if op == "getrange" && (offset < 0 || length <= 0) {
		return fail(objstore.ErrInvalidRange)
	}

	fd, err := b.openObject(segs)
	if err != nil {
		return fail(err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(objstore.Unavailable(err))
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return fail(objstore.ErrNotFound) // only a prefix of other keys
	default:
		return fail(objstore.Unavailable(ErrNotRegular))
	}
	size := st.Size
	if offset >= size {
		return []byte{}, nil
	}
	n := size - offset
	if length >= 0 {
		n = min(n, length)
	}
	buf := make([]byte, n)
	for done := int64(0); done < n; {
		m, err := unix.Pread(fd, buf[done:], offset+done)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fail(objstore.Unavailable(fmt.Errorf("read: %w", err)))
		case m == 0:
			// Objects never change once linked; someone truncated it.
			return fail(objstore.Unavailable(fmt.Errorf("read: %w: object shrank", io.ErrUnexpectedEOF)))
		}
		done += int64(m)
	}
	return buf, nil
}

// openObject opens the file of a key for reading without following
// symbolic links, classifying a missing path as ErrNotFound.
func (b *Bucket) openObject(segs []string) (int, error) {
	fds, err := b.walk(segs[:len(segs)-1], false)
	if err != nil {
		return -1, classifyRead(err)
	}
	defer closeAll(fds)
	// O_NONBLOCK: opening a FIFO someone left here must not hang.
	fd, err := openFileAt(fds[len(fds)-1], segs[len(segs)-1], unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, classifyRead(err)
	}
	return fd, nil
}
