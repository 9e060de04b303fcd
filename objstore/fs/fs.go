//go:build unix

package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cutline/cutline/objstore"
)

// TempDir is the directory under the root that holds objects while they are
// written. Keys whose first segment is TempDir are refused with
// objstore.ErrInvalidKey, and List never shows it.
const TempDir = ".cutline-tmp"

// maxSegment is the longest file name common file systems accept (NAME_MAX).
const maxSegment = 255

// maxRetries bounds how often Create starts over after a concurrent Delete
// removed a directory it was about to use.
const maxRetries = 100

var (
	// ErrClosed is returned (as an objstore.ErrUnavailable) by every method
	// of a Bucket after Close.
	ErrClosed = errors.New("fs: bucket closed")
	// ErrNotRegular is returned (as an objstore.ErrUnavailable) when a key's
	// path holds something this backend did not create and will not
	// interpret: a symbolic link, a device, a socket. The backend never
	// follows symbolic links.
	ErrNotRegular = errors.New("fs: not a regular file or directory")
)

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
		return nil, fmt.Errorf("fs: root directory is empty: %w", objstore.ErrNoSuchBucket)
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
// fail with ErrClosed. Close is idempotent.
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
		return nil, b.opErr(op, key, objstore.Unavailable(ErrClosed))
	}
	return segs, nil
}

func (b *Bucket) opErr(op, key string, err error) error {
	return &objstore.OpError{Op: op, Bucket: b.name, Key: key, Err: err}
}

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

// walk opens every directory along dirs, creating missing ones when create
// is set. fds[0] is the root (owned by b, never closed by closeAll) and
// fds[i] the directory dirs[:i]. Errors are for the caller to classify:
// ENOENT (missing), ENOTDIR (an object file on the path), ErrNotRegular (a
// symbolic link or another foreign entry on the path), or another errno.
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

func (b *Bucket) sync(fd int) error {
	if b.noSync {
		return nil
	}
	return eintr(func() error { return unix.Fsync(fd) })
}

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

// List implements objstore.Bucket. It walks the directories under prefix in
// key order (each directory's entries sorted so that a directory sorts as
// its name plus '/'), skips subtrees that lie wholly at or before
// startAfter, and stops after limit objects.
func (b *Bucket) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.ObjectInfo, error) {
	fail := func(err error) ([]objstore.ObjectInfo, error) { return nil, b.opErr("list", prefix, err) }
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := objstore.ValidatePrefix(prefix); err != nil {
		return fail(err)
	}
	if limit <= 0 {
		limit = 1000
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return fail(objstore.Unavailable(ErrClosed))
	}

	// "a/b/c" lists directory a/b for names starting with c; "a/b/" lists
	// all of a/b.
	var dirs []string
	base, filter := "", prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		base, filter = prefix[:i+1], prefix[i+1:]
		dirs = strings.Split(prefix[:i], "/")
	}
	if len(dirs) > 0 && dirs[0] == TempDir {
		return nil, nil
	}
	fds, err := b.walk(dirs, false)
	if err != nil {
		err = classifyRead(err)
		if errors.Is(err, objstore.ErrNotFound) || errors.Is(err, ErrNotRegular) {
			return nil, nil // nothing listable under prefix
		}
		return fail(err)
	}
	dirFD := fds[len(fds)-1]
	if len(fds) == 1 {
		// The root descriptor is shared; list through a descriptor of
		// its own. Not a dup(2): a duplicate shares the directory's read
		// position, so every later listing of the root would read an
		// exhausted directory and find nothing.
		if dirFD, err = unix.Openat(b.rootFD, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return fail(objstore.Unavailable(err))
		}
	} else {
		fds = fds[:len(fds)-1] // listDir owns dirFD
	}
	closeAll(fds)
	l := lister{ctx: ctx, root: b.root, startAfter: startAfter, limit: limit}
	if err := l.dir(dirFD, base, filter); err != nil {
		return fail(err)
	}
	return l.out, nil
}

type lister struct {
	ctx        context.Context
	root       string
	startAfter string
	limit      int
	out        []objstore.ObjectInfo
}

type dirEntry struct {
	name  string
	order string // name, or name+"/" for a directory
	dir   bool
}

// dir lists the directory open at fd (and takes ownership of fd), whose keys
// start with base, keeping names that start with filter.
func (l *lister) dir(fd int, base, filter string) error {
	if err := l.ctx.Err(); err != nil {
		unix.Close(fd)
		return err
	}
	f := os.NewFile(uintptr(fd), filepath.Join(l.root, filepath.FromSlash(base)))
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // removed while we listed it
		}
		return objstore.Unavailable(fmt.Errorf("read directory %q: %w", base, err))
	}
	keep := make([]dirEntry, 0, len(ents))
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, filter) || (base == "" && name == TempDir) ||
			len(name) > maxSegment || objstore.ValidateKey(name) != nil {
			continue
		}
		key := base + name
		switch t := e.Type(); {
		case t.IsDir():
			sub := key + "/"
			// Every key below is sub + something: all of them are ≤
			// startAfter when startAfter sorts after sub without
			// extending it.
			if len(sub) >= objstore.MaxKeyLen || (l.startAfter > sub && !strings.HasPrefix(l.startAfter, sub)) {
				continue
			}
			keep = append(keep, dirEntry{name: name, order: name + "/", dir: true})
		case t.IsRegular():
			if key <= l.startAfter || len(key) > objstore.MaxKeyLen {
				continue
			}
			keep = append(keep, dirEntry{name: name, order: name})
		}
	}
	slices.SortFunc(keep, func(a, b dirEntry) int { return strings.Compare(a.order, b.order) })
	dirFD := int(f.Fd())
	for _, e := range keep {
		if len(l.out) >= l.limit {
			return nil
		}
		if e.dir {
			sub, err := openDirAt(dirFD, e.name)
			switch {
			case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
				continue // changed while we listed
			case err != nil:
				return objstore.Unavailable(fmt.Errorf("open directory %q: %w", base+e.name, err))
			}
			if err := l.dir(sub, base+e.name+"/", ""); err != nil {
				return err
			}
			continue
		}
		var st unix.Stat_t
		err := unix.Fstatat(dirFD, e.name, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case errors.Is(err, unix.ENOENT):
			continue // deleted while we listed
		case err != nil:
			return objstore.Unavailable(fmt.Errorf("stat %q: %w", base+e.name, err))
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			continue
		}
		l.out = append(l.out, objstore.ObjectInfo{Key: base + e.name, Size: st.Size})
	}
	return nil
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
