//go:build unix

package fs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cutline/cutline/objstore"
)

// maxSegment is the longest file name common file systems accept (NAME_MAX).
const maxSegment = 255

// splitKey validates key and returns its path segments. Beyond
// objstore.ValidateKey it refuses the temporary directory, segments longer
// than a file name may be, and (defense in depth) any path that would
// resolve outside root.
func splitKey(root, key string) ([]string, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return nil, err
	}
	segs := strings.Split(key, "/")
	if segs[0] == TempDir {
		return nil, &objstore.KeyError{Key: key, Reason: "first segment " + TempDir + " is reserved by the fs backend"}
	}
	for _, s := range segs {
		if len(s) > maxSegment {
			return nil, &objstore.KeyError{Key: key, Reason: fmt.Sprintf("path segment longer than %d bytes", maxSegment)}
		}
	}
	rel, err := filepath.Rel(root, filepath.Join(root, filepath.FromSlash(key)))
	if err != nil || rel == "." || filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, &objstore.KeyError{Key: key, Reason: "resolves outside the root directory"}
	}
	return segs, nil
}

// conflict is the refusal for a key that a directory layout cannot hold:
// objects "a" and "a/b" cannot both exist on a file system.
func conflict(key, why string) error {
	return &objstore.KeyError{Key: key, Reason: "the fs backend cannot store it: " + why}
}

// walk opens every directory along dirs, creating missing ones when create
// is set. fds[0] is the root (owned by b, never closed by closeAll) and
// fds[i] the directory dirs[:i]. Errors are for the caller to classify:
// ENOENT (missing), ENOTDIR (an object file on the path), ErrNotRegular (a
// symbolic link or another entry that is neither a directory nor a regular
// file on the path), or another errno.
func (b *Bucket) walk(dirs []string, create bool) ([]int, error) {
	fds := make([]int, 1, len(dirs)+1)
	fds[0] = b.rootFD
	for i, name := range dirs {
		fd, err := openDirAt(fds[i], name)
		if create && errors.Is(err, unix.ENOENT) {
			err = eintr(func() error { return unix.Mkdirat(fds[i], name, b.dirMode) })
			switch {
			case err == nil:
				// The new directory entry must be durable before an object
				// inside it is acknowledged.
				err = b.sync(fds[i])
			case errors.Is(err, unix.EEXIST):
				err = nil // a concurrent Create made it
			}
			if err == nil {
				fd, err = openDirAt(fds[i], name)
			}
		}
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			// Either an object sits where a directory should (ENOTDIR), or
			// something this backend does not follow.
			var st unix.Stat_t
			if serr := unix.Fstatat(fds[i], name, &st, unix.AT_SYMLINK_NOFOLLOW); serr != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
				err = fmt.Errorf("%w: %q", ErrNotRegular, strings.Join(dirs[:i+1], "/"))
			} else {
				err = unix.ENOTDIR
			}
		}
		if err != nil {
			closeAll(fds)
			return nil, err
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

// closeAll closes fds[1:]; fds[0] is the root.
func closeAll(fds []int) {
	for _, fd := range fds[1:] {
		unix.Close(fd)
	}
}

// classifyRead classifies an error of walk or of opening an object.
func classifyRead(err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return objstore.ErrNotFound
	case errors.Is(err, unix.ELOOP):
		return objstore.Unavailable(fmt.Errorf("%w: symbolic link", ErrNotRegular))
	}
	return objstore.Unavailable(err)
}

func openDir(dirfd int, path string) (int, error) {
	return openFileAt(dirfd, path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
}

// openDirAt opens a directory entry, refusing symbolic links.
func openDirAt(dirfd int, name string) (int, error) {
	return openFileAt(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
}

func openFileAt(dirfd int, name string, flags int, mode uint32) (int, error) {
	flags |= unix.O_CLOEXEC
	if dirfd != unix.AT_FDCWD {
		flags |= unix.O_NOFOLLOW
	}
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if err == unix.EINTR {
			continue
		}
		return fd, err
	}
}

func isDirAt(dirfd int, name string) bool {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// eintr retries f while it is interrupted by a signal.
func eintr(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}
