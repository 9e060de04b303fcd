//go:build unix

package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/internal/errkind"
	"github.com/cutline/cutline/objstore"
)

// TempDir is the directory under the root that holds objects while they are
// written. Keys whose first segment is TempDir are refused with
// objstore.ErrInvalidKey, and List never shows it.
const TempDir = ".cutline-tmp"

// ErrNotRegular is returned (as an objstore.ErrUnavailable) when a key's
// path holds something this backend did not create and will not
// interpret: a symbolic link, a device, a socket. The backend never
// follows symbolic links.
var ErrNotRegular = errkind.New(cutline.ErrUnavailable, "fs: not a regular file or directory")

// errClosed is returned (as an objstore.ErrUnavailable) by every method of
// a Bucket after Close; it matches cutline.ErrClosed as well.
var errClosed = errkind.New(cutline.ErrClosed, "fs: bucket closed")

// Options tunes a Bucket. The zero value works.
type Options struct {
	// Name is the bucket's logical name in errors and logs, and what the
	// chain layer records; default: the base name of the root directory.
	Name string
	// NoSync skips every fsync. Create-only and atomic visibility still hold
	// while the machine stays up, but a power loss may leave objects empty
	// or missing. Only for tests and benchmarks that do not care.
	NoSync bool
	// FileMode is the permission of object files before the umask;
	// default 0o644.
	FileMode os.FileMode
	// DirMode is the permission of directories before the umask;
	// default 0o755.
	DirMode os.FileMode
	// Logger receives best-effort failures (a temporary file or an empty
	// directory that could not be removed); default: discard.
	Logger *slog.Logger
	// CreateRoot makes New create the root directory, and its missing
	// parents, when it does not exist. Without it New refuses a missing
	// root with a *MissingRootError (matching objstore.ErrNoSuchBucket):
	// a mistyped path must fail at start-up, not open an empty zone in
	// which every slot looks unwritten. Set it where the directory is
	// meant to be new (tests, demos, a first deployment).
	CreateRoot bool
}

// MissingRootError is New's refusal of a root directory that does not
// exist while Options.CreateRoot is unset. It matches
// objstore.ErrNoSuchBucket and, through Err, fs.ErrNotExist.
type MissingRootError struct {
	Name string // the bucket's name
	Path string // the absolute path of the missing root
	Err  error  // the error of opening it
}

func (e *MissingRootError) Error() string {
	return fmt.Sprintf("fs: bucket %s: root directory %s does not exist (set Options.CreateRoot to create it): %v",
		e.Name, e.Path, objstore.ErrNoSuchBucket)
}

func (e *MissingRootError) Unwrap() []error { return []error{objstore.ErrNoSuchBucket, e.Err} }

// Bucket stores objects as files under a root directory. It is safe for
// concurrent use, also by several processes sharing the root (on a local
// file system with POSIX link semantics). Close releases its descriptors.
type Bucket struct {
	name     string
	root     string
	noSync   bool
	fileMode uint32
	dirMode  uint32
	log      *slog.Logger

	mu     sync.RWMutex // read-held by operations, write-held by Close
	closed bool
	rootFD int
	tmpFD  int
}

var _ objstore.Bucket = (*Bucket)(nil)

// New opens the bucket rooted at the directory root, which must exist
// unless opts.CreateRoot is set; a missing root is a *MissingRootError.
func New(root string, opts Options) (*Bucket, error) {
	if root == "" {
		return nil, &cutline.ConfigError{Field: "root", Reason: "empty", Err: objstore.ErrNoSuchBucket}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("fs: root %q: %w", root, err)
	}
	b := &Bucket{
		name:     opts.Name,
		root:     abs,
		noSync:   opts.NoSync,
		fileMode: uint32(opts.FileMode.Perm()),
		dirMode:  uint32(opts.DirMode.Perm()),
		log:      opts.Logger,
	}
	if b.name == "" {
		b.name = filepath.Base(abs)
	}
	if b.fileMode == 0 {
		b.fileMode = 0o644
	}
	if b.dirMode == 0 {
		b.dirMode = 0o755
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.rootFD, err = openDir(unix.AT_FDCWD, abs)
	if errors.Is(err, unix.ENOENT) {
		if !opts.CreateRoot {
			return nil, &MissingRootError{Name: b.name, Path: abs, Err: err}
		}
		if err := b.makeRoot(); err != nil {
			return nil, fmt.Errorf("fs: bucket %s: create root %s: %w", b.name, abs, err)
		}
		b.rootFD, err = openDir(unix.AT_FDCWD, abs)
	}
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		// A file or a symbolic link where the directory should be: not a
		// bucket this backend will use.
		return nil, fmt.Errorf("fs: bucket %s: root %s is not a directory: %w: %w", b.name, abs, objstore.ErrNoSuchBucket, err)
	}
	if err != nil {
		return nil, fmt.Errorf("fs: bucket %s: open root %s: %w", b.name, abs, err)
	}
	if err := b.openTemp(); err != nil {
		unix.Close(b.rootFD)
		return nil, fmt.Errorf("fs: bucket %s: %w", b.name, err)
	}
	return b, nil
}

// makeRoot creates the root directory and its missing parents, syncing
// the parent of each directory it makes: the root's entry must survive a
// power loss as the objects acknowledged inside it do.
func (b *Bucket) makeRoot() error {
	var missing []string // deepest first
	for p := b.root; ; {
		_, err := os.Lstat(p)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		missing = append(missing, p)
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	for _, dir := range slices.Backward(missing) {
		if err := os.Mkdir(dir, os.FileMode(b.dirMode)); err != nil && !errors.Is(err, os.ErrExist) {
			return err // os.ErrExist: another process made it first
		}
		parent, err := openDir(unix.AT_FDCWD, filepath.Dir(dir))
		if err != nil {
			return err
		}
		err = b.sync(parent)
		unix.Close(parent)
		if err != nil {
			return fmt.Errorf("sync %s: %w", filepath.Dir(dir), err)
		}
	}
	return nil
}

// openTemp creates and opens the temporary directory; it must live on the
// root's file system because link(2) cannot cross file systems.
func (b *Bucket) openTemp() error {
	err := eintr(func() error { return unix.Mkdirat(b.rootFD, TempDir, 0o700) })
	switch {
	case err == nil:
		if err := b.sync(b.rootFD); err != nil {
			return fmt.Errorf("sync root: %w", err)
		}
	case errors.Is(err, unix.EEXIST):
	default:
		return fmt.Errorf("create %s: %w", TempDir, err)
	}
	b.tmpFD, err = openDirAt(b.rootFD, TempDir)
	if err != nil {
		return fmt.Errorf("open %s: %w", TempDir, err)
	}
	var rootSt, tmpSt unix.Stat_t
	if err := unix.Fstat(b.rootFD, &rootSt); err != nil {
		unix.Close(b.tmpFD)
		return err
	}
	if err := unix.Fstat(b.tmpFD, &tmpSt); err != nil {
		unix.Close(b.tmpFD)
		return err
	}
	if rootSt.Dev != tmpSt.Dev {
		unix.Close(b.tmpFD)
		return fmt.Errorf("%s is on another file system than the root; link(2) needs one", TempDir)
	}
	return nil
}

// Name implements objstore.Bucket.
func (b *Bucket) Name() string { return b.name }

// Root returns the absolute path of the root directory.
func (b *Bucket) Root() string { return b.root }

// Close releases the bucket's directory descriptors. Operations after Close
// fail with cutline.ErrClosed. Close is idempotent.
func (b *Bucket) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	return errors.Join(unix.Close(b.tmpFD), unix.Close(b.rootFD))
}

// enter checks ctx and the key, and read-locks the bucket against Close. On
// success the caller must call b.mu.RUnlock.
func (b *Bucket) enter(ctx context.Context, op, key string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, b.opErr(op, key, err)
	}
	segs, err := splitKey(b.root, key)
	if err != nil {
		return nil, b.opErr(op, key, err)
	}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return nil, b.opErr(op, key, objstore.Unavailable(errClosed))
	}
	return segs, nil
}

func (b *Bucket) opErr(op, key string, err error) error {
	return &objstore.OpError{Op: op, Bucket: b.name, Key: key, Err: err}
}

func (b *Bucket) sync(fd int) error {
	if b.noSync {
		return nil
	}
	return eintr(func() error { return unix.Fsync(fd) })
}
