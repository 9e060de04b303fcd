// Package fs is an objstore.Bucket on a local file system: one directory per
// bucket (zone), one file per object. It is the backend for single-machine
// deployments, development, and tests that want real files, fsync and
// link(2) rather than a map.
//
// # Layout
//
// The object at key "p/star/00000007/00000003" is the file
// <root>/p/star/00000007/00000003. Directories are created as needed and
// removed again, best effort, when Delete leaves them empty. The directory
// <root>/.cutline-tmp (TempDir) holds objects while they are written; keys
// whose first segment is ".cutline-tmp" are refused with
// objstore.ErrInvalidKey, List never shows it, and a file left there by a
// crash is garbage that may be deleted while no process uses the root.
//
// # Create-only
//
// Create writes the data to a new file in TempDir, fsyncs it, and then
// link(2)s it to the key's path. link fails with EEXIST when the name is
// taken, so of any number of concurrent creators, in this process or in
// others sharing the root, exactly one wins and the others get
// objstore.ErrExists; the existing file is never touched. Readers see either
// no file or the whole file. Create then fsyncs the directory (and the
// parent of every directory it made) before it returns, so an acknowledged
// object survives a power loss. rename(2) is never used: it overwrites.
// Options.NoSync drops the fsyncs for tests that do not need durability.
//
// # Keys and safety
//
// Keys are checked with objstore.ValidateKey; beyond that a path segment may
// not exceed 255 bytes (a file name's limit) and the resolved path must stay
// under the root. The backend never follows symbolic links: it resolves
// every path one directory at a time with O_NOFOLLOW, so a link planted
// under the root cannot lead a key outside it. A symbolic link, device or
// socket found at a key's path is reported as ErrNotRegular (matching
// objstore.ErrUnavailable: never read as "absent"); List skips it, as it
// skips files whose names are not valid key segments.
//
// A file system cannot hold an object "a" and an object "a/b" at once (a is
// either a file or a directory). Creating one while the other exists fails
// with an objstore.ErrInvalidKey that says so; Get of "a" while only "a/b"
// exists returns objstore.ErrNotFound. Key layouts in which every object is
// a leaf at the same depth, like cutline's <prefix>/<star>/<epoch>/<slot>,
// never meet this. On case-insensitive file systems keys differing only in
// case collide; use a case-sensitive one.
//
// # Errors
//
// ENOENT reads as objstore.ErrNotFound, EEXIST on link as
// objstore.ErrExists; every other failure (ENOSPC, EIO, EROFS, EACCES, a
// failed fsync...) is wrapped with objstore.Unavailable, because the outcome
// is unknown to the caller. Every error is a *objstore.OpError naming the
// bucket, operation and key.
//
// # Use
//
//	b, err := fs.New("/var/lib/app/zone-a", fs.Options{})
//	if err != nil { ... }
//	defer b.Close()
//	if err := objstore.Verify(ctx, b); err != nil { ... }
//
// The root directory must exist: New refuses a missing one with a
// *MissingRootError, which matches objstore.ErrNoSuchBucket and names the
// path, because a mistyped path that quietly became a new, empty zone
// would make every slot look unwritten. Options.CreateRoot creates it
// (and its parents) instead, for directories meant to be new. Two Buckets
// on one directory are one zone, not two: objstore.VerifyDistinct refuses
// such a zone set.
//
// List walks the directories under the prefix in key order and stops after
// limit objects, so its cost grows with the size of the subtree before the
// page, and each directory it enters is read whole. The package builds on
// Unix systems only.
package fs
