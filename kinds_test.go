package cutline_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/authority"
	"github.com/cutline/cutline/authority/authhttp"
	"github.com/cutline/cutline/batch"
	"github.com/cutline/cutline/chain"
	"github.com/cutline/cutline/chain/wire"
	"github.com/cutline/cutline/cutlinetest"
	"github.com/cutline/cutline/epoch"
	"github.com/cutline/cutline/fence"
	"github.com/cutline/cutline/lease"
	"github.com/cutline/cutline/metastore"
	"github.com/cutline/cutline/metastore/etcd"
	"github.com/cutline/cutline/objstore"
	"github.com/cutline/cutline/objstore/fault"
	objfs "github.com/cutline/cutline/objstore/fs"
	"github.com/cutline/cutline/roll"
	"github.com/cutline/cutline/settle"
)

// libraryErrors holds every exported error of the library packages of this
// module: its sentinels and a value of each typed error (wrappers carry a
// sentinel of the package, as they do when returned), by directory and
// name. TestEveryErrorHasOneKind finds the exported errors in the source
// and fails on any missing here.
var libraryErrors = map[string]error{
	"chain.ErrFenced":                  chain.ErrFenced,
	"chain.ErrNoQuorum":                chain.ErrNoQuorum,
	"chain.ErrAborted":                 chain.ErrAborted,
	"chain.ErrPayloadTooLarge":         chain.ErrPayloadTooLarge,
	"chain.ErrPending":                 chain.ErrPending,
	"chain.ErrConflictingFlight":       chain.ErrConflictingFlight,
	"chain.ErrDataUnavailable":         chain.ErrDataUnavailable,
	"chain.ErrNotCommitted":            chain.ErrNotCommitted,
	"chain.FencedError":                &chain.FencedError{},
	"chain.NoQuorumError":              &chain.NoQuorumError{},
	"chain.ConflictError":              &chain.ConflictError{},
	"chain.AbortedError":               &chain.AbortedError{},
	"chain.PayloadError":               &chain.PayloadError{},
	"chain.DataUnavailableError":       &chain.DataUnavailableError{},
	"chain/wire.ErrCorrupt":            wire.ErrCorrupt,
	"chain/wire.ErrUnknownFormat":      wire.ErrUnknownFormat,
	"chain/wire.ErrMisplaced":          wire.ErrMisplaced,
	"chain/wire.ObjectError":           &wire.ObjectError{Err: wire.ErrCorrupt},
	"cutline.ErrInvalid":               cutline.ErrInvalid,
	"cutline.ConfigError":              &cutline.ConfigError{},
	"cutlinetest.ErrStopped":           cutlinetest.ErrStopped,
	"cutlinetest.Violation":            cutlinetest.Violation{},
	"epoch.ErrNoRecord":                epoch.ErrNoRecord,
	"epoch.ErrCutMismatch":             epoch.ErrCutMismatch,
	"epoch.ErrState":                   epoch.ErrState,
	"epoch.ErrCursorRegression":        epoch.ErrCursorRegression,
	"epoch.ErrCursorAhead":             epoch.ErrCursorAhead,
	"epoch.ErrNotMinted":               epoch.ErrNotMinted,
	"epoch.ErrClaimed":                 epoch.ErrClaimed,
	"epoch.CutMismatchError":           &epoch.CutMismatchError{},
	"epoch.StateError":                 &epoch.StateError{},
	"epoch.CursorError":                &epoch.CursorError{Err: epoch.ErrCursorAhead},
	"fence.ErrUndecided":               fence.ErrUndecided,
	"fence.ErrBlocked":                 fence.ErrBlocked,
	"fence.UndecidedError":             &fence.UndecidedError{},
	"fence.BlockedError":               &fence.BlockedError{},
	"lease.ErrDeferred":                lease.ErrDeferred,
	"lease.ErrHeld":                    lease.ErrHeld,
	"lease.ErrNotHeld":                 lease.ErrNotHeld,
	"lease.ErrDeparting":               lease.ErrDeparting,
	"lease.ErrTenureLost":              lease.ErrTenureLost,
	"lease.ErrSuperseded":              lease.ErrSuperseded,
	"lease.ErrLimbo":                   lease.ErrLimbo,
	"lease.ErrOffset":                  lease.ErrOffset,
	"lease.ErrStaleToken":              lease.ErrStaleToken,
	"lease.ErrStarRunning":             lease.ErrStarRunning,
	"lease.ErrSessionLost":             lease.ErrSessionLost,
	"lease.ErrSnapshotTooBig":          lease.ErrSnapshotTooBig,
	"lease.ErrSnapshotBackwards":       lease.ErrSnapshotBackwards,
	"lease.ErrSnapshotUncovered":       lease.ErrSnapshotUncovered,
	"lease.ErrBadSnapshot":             lease.ErrBadSnapshot,
	"lease.DeferredError":              &lease.DeferredError{},
	"lease.StreamError":                &lease.StreamError{Err: lease.ErrNotHeld},
	"lease.OffsetError":                &lease.OffsetError{},
	"lease.TokenError":                 &lease.TokenError{},
	"lease.LimboError":                 &lease.LimboError{},
	"lease.SnapshotError":              &lease.SnapshotError{Err: lease.ErrBadSnapshot},
	"authority.ErrNotAdmitted":         authority.ErrNotAdmitted,
	"authority.ErrStaleGrant":          authority.ErrStaleGrant,
	"authority.ErrDeposed":             authority.ErrDeposed,
	"authority.ErrRefused":             authority.ErrRefused,
	"authority.ErrBadState":            authority.ErrBadState,
	"authority.ErrConnClosed":          authority.ErrConnClosed,
	"authority.ErrNoDriver":            authority.ErrNoDriver,
	"authority.StaleGrantError":        &authority.StaleGrantError{},
	"authority.StateError":             &authority.StateError{},
	"authority.NotAdmittedError":       &authority.NotAdmittedError{},
	"authority.RefusedError":           &authority.RefusedError{},
	"authority/authhttp.ErrForbidden":  authhttp.ErrForbidden,
	"authority/authhttp.ErrBadRequest": authhttp.ErrBadRequest,
	"authority/authhttp.ErrIdentity":   authhttp.ErrIdentity,
	"authority/authhttp.StatusError":   &authhttp.StatusError{Code: 503},
	"authority/authhttp.RequestError":  &authhttp.RequestError{},
	"authority/authhttp.IdentityError": &authhttp.IdentityError{},
	"batch.ErrFailed":                  batch.ErrFailed,
	"batch.ErrTooLarge":                batch.ErrTooLarge,
	"batch.ErrInput":                   batch.ErrInput,
	"batch.ErrDedupFormat":             batch.ErrDedupFormat,
	"batch.DedupFormatError":           &batch.DedupFormatError{},
	"batch.ErrFormat":                  batch.ErrFormat,
	"batch.ErrTooManyStreams":          batch.ErrTooManyStreams,
	"batch.ErrSequenceTooOld":          batch.ErrSequenceTooOld,
	"batch.ErrPayloadConflict":         batch.ErrPayloadConflict,
	"batch.RecordError":                &batch.RecordError{},
	"batch.StreamError":                &batch.StreamError{},
	"batch.SizeError":                  &batch.SizeError{},
	"batch.InputError":                 &batch.InputError{},
	"batch.FormatError":                &batch.FormatError{},
	"metastore.ErrNotFound":            metastore.ErrNotFound,
	"metastore.ErrConflict":            metastore.ErrConflict,
	"metastore.ErrUnavailable":         metastore.ErrUnavailable,
	"metastore.ErrSessionExpired":      metastore.ErrSessionExpired,
	"metastore.ErrInvalidKey":          metastore.ErrInvalidKey,
	"metastore.ErrCompacted":           metastore.ErrCompacted,
	"metastore.ErrBadRecord":           metastore.ErrBadRecord,
	"metastore.ConflictError":          &metastore.ConflictError{},
	"metastore.RecordError":            &metastore.RecordError{},
	"metastore/etcd.ErrNotEtcd":        etcd.ErrNotEtcd,
	"objstore.ErrNotFound":             objstore.ErrNotFound,
	"objstore.ErrExists":               objstore.ErrExists,
	"objstore.ErrUnavailable":          objstore.ErrUnavailable,
	"objstore.ErrInvalidKey":           objstore.ErrInvalidKey,
	"objstore.ErrNotCreateOnly":        objstore.ErrNotCreateOnly,
	"objstore.ErrInvalidRange":         objstore.ErrInvalidRange,
	"objstore.ErrAccessDenied":         objstore.ErrAccessDenied,
	"objstore.ErrNoSuchBucket":         objstore.ErrNoSuchBucket,
	"objstore.ErrRejected":             objstore.ErrRejected,
	"objstore.ErrObjectTooLarge":       objstore.ErrObjectTooLarge,
	"objstore.ErrUnsatisfiableRange":   objstore.ErrUnsatisfiableRange,
	"objstore.ErrAliased":              objstore.ErrAliased,
	"objstore.OpError":                 &objstore.OpError{Err: objstore.ErrExists},
	"objstore.KeyError":                &objstore.KeyError{},
	"objstore.AliasError":              &objstore.AliasError{},
	"objstore/fault.ErrDown":           fault.ErrDown,
	"objstore/fs.ErrNotRegular":        objfs.ErrNotRegular,
	"objstore/fs.MissingRootError":     &objfs.MissingRootError{},
	"settle.ErrSegment":                settle.ErrSegment,
	"settle.ErrBelowRetention":         settle.ErrBelowRetention,
	"settle.ErrDoubleCover":            settle.ErrDoubleCover,
	"settle.ErrGap":                    settle.ErrGap,
	"settle.ErrLocate":                 settle.ErrLocate,
	"settle.ErrIndexFormat":            settle.ErrIndexFormat,
	"roll.ErrDropped":                  roll.ErrDropped,
	"settle.SegmentError":              &settle.SegmentError{},
	"settle.TrimmedError":              &settle.TrimmedError{},
	"settle.ErrPassBudget":             settle.ErrPassBudget,
	"settle.StageError":                &settle.StageError{Err: settle.ErrPassBudget},
	"settle.DoubleCoverError":          &settle.DoubleCoverError{},
	"settle.GapError":                  &settle.GapError{},
	"settle.FormatError":               &settle.FormatError{},
}

// elsewhere are the exported errors of nested modules, which this module
// cannot import: each module's own kinds test checks them.
var elsewhere = []string{
	"cutlinetest/linearize.ErrInconsistent", // cutlinetest/linearize: TestErrorKinds
}

// markers are exported errors that are no kind of failure: they mark
// errors made by a test harness on top of the failure's own sentinel.
var markers = []string{
	"objstore/fault.ErrInjected", // every injected fault, whatever its sentinel
}

// TestEveryErrorHasOneKind: every exported error of the library packages
// matches exactly one of the kinds, and none is left out of the list.
func TestEveryErrorHasOneKind(t *testing.T) {
	for name, err := range libraryErrors {
		var kinds []error
		for _, k := range cutline.Kinds() {
			if errors.Is(err, k) {
				kinds = append(kinds, k)
			}
		}
		if len(kinds) != 1 {
			t.Errorf("%s (%v) matches %d kinds %v, want exactly one", name, err, len(kinds), kinds)
		}
	}
	for _, name := range markers {
		if _, ok := libraryErrors[name]; ok {
			t.Errorf("%s is listed both as a marker and as an error with a kind", name)
		}
	}
	for _, name := range exportedErrors(t) {
		if _, ok := libraryErrors[name]; !ok && !slices.Contains(elsewhere, name) && !slices.Contains(markers, name) {
			t.Errorf("%s is an exported error of a library package with no kind checked: add it to libraryErrors", name)
		}
	}
}

// TestKindsAreDistinct: no kind matches another, so that "exactly one
// kind" means something.
func TestKindsAreDistinct(t *testing.T) {
	for _, a := range cutline.Kinds() {
		for _, b := range cutline.Kinds() {
			if a != b && errors.Is(a, b) {
				t.Errorf("%v matches %v", a, b)
			}
		}
	}
}

// exportedErrors lists, as "dir.Name", every exported package-level
// variable named Err… and every exported type with an Error method, in the
// non-test sources of the library: every directory but the root (the
// kinds), cmd, examples, internal and testdata.
func exportedErrors(t *testing.T) []string {
	t.Helper()
	var names []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "cmd", "examples", "internal", "testdata":
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), ".") && path != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir == "." {
			return nil // the kinds themselves
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.GenDecl:
				if decl.Tok != token.VAR {
					continue
				}
				for _, spec := range decl.Specs {
					for _, id := range spec.(*ast.ValueSpec).Names {
						if id.IsExported() && strings.HasPrefix(id.Name, "Err") {
							names = append(names, dir+"."+id.Name)
						}
					}
				}
			case *ast.FuncDecl:
				if decl.Recv == nil || decl.Name.Name != "Error" || len(decl.Recv.List) != 1 {
					continue
				}
				typ := decl.Recv.List[0].Type
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
					names = append(names, dir+"."+id.Name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < len(libraryErrors) {
		t.Fatalf("found %d exported errors in the sources, fewer than the %d listed", len(names), len(libraryErrors))
	}
	return names
}
