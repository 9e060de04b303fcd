//go:build unix

package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cutline/cutline/objstore"
)

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
		return fail(objstore.Unavailable(errClosed))
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
