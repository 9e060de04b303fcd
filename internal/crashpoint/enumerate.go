package crashpoint

import (
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Module is the import path of the module whose code is enumerated.
const Module = "github.com/cutline/cutline"

// Packages are the production packages whose mutating steps are crashed:
// mint, cursor and record moves (epoch), write (chain), fence and publish
// (fence), settle and trim (settle), a writer's rolls across epochs
// (roll), and a star's registry, gate, Open, Finish, Close, snapshots and
// producer tokens (lease). Package authority is left out: its metastore
// writes (the controller's
// election and grant records) decide who holds a domain of streams, not
// what a chain holds.
var Packages = []string{"epoch", "chain", "fence", "settle", "roll", "lease"}

// shorthandPackages hold the storage interfaces and their shorthand functions.
var shorthandPackages = []string{"objstore", "metastore"}

// Kinds of storage call.
const (
	BucketCreate    = "Bucket.Create"
	BucketDelete    = "Bucket.Delete"
	StoreTxn        = "Store.Txn"
	StoreNewSession = "Store.NewSession"
	SessionClose    = "Session.Close"
)

// mutating lists the mutating methods of the storage interfaces, by
// interface.
var mutating = map[string]map[string]string{
	"objstore.Bucket":   {"Create": BucketCreate, "Delete": BucketDelete},
	"metastore.Store":   {"Txn": StoreTxn, "NewSession": StoreNewSession},
	"metastore.Session": {"Close": SessionClose},
}

// Site is one call site of a mutating storage request in a production
// package.
type Site struct {
	// Name is the site's stable name: its enclosing function, the call,
	// and an ordinal when one function makes the same call more than
	// once, e.g. "fence.(*walk).poison → Bucket.Create".
	Name string
	// Func is the enclosing declared function, as in Name.
	Func string
	// Call is what is called: a mutating method (Bucket.Create) or a
	// shorthand that makes one (metastore.Put).
	Call string
	// Pkg is the package's path inside the module ("fence").
	Pkg string
	// File is the file's base name, Line and EndLine the lines the call
	// spans.
	File          string
	Line, EndLine int
	// Planted is set when the call lies in a branch taken only by a
	// planted protocol variant (internal/planted): dead code in a normal
	// build, so no crash case can reach it.
	Planted bool
}

// String is the site's name and position.
func (s Site) String() string { return fmt.Sprintf("%s (%s/%s:%d)", s.Name, s.Pkg, s.File, s.Line) }

// Candidate is a call that looks like a storage request by its method's
// name and arity but whose receiver's type the enumerator could not
// resolve. A non-empty list means the enumeration may be incomplete.
type Candidate struct {
	Pkg, File string
	Line      int
	Expr      string
}

// Enumeration is what Enumerate found.
type Enumeration struct {
	Sites      []Site
	Unresolved []Candidate
}

// Live returns the sites a normal build can reach (not Planted).
func (e *Enumeration) Live() []Site {
	var out []Site
	for _, s := range e.Sites {
		if !s.Planted {
			out = append(out, s)
		}
	}
	return out
}

// ErrNoModule: the directory given to Enumerate is not the module's root.
var ErrNoModule = errors.New("crashpoint: not the module root")

// Enumerate type-checks the non-test files of pkgs (paths inside the
// module rooted at root) and returns every call site of a mutating storage
// request in them: objstore.Bucket's Create and Delete, metastore.Store's
// Txn and NewSession, metastore.Session's Close, and calls of the exported
// shorthand functions of packages objstore and metastore that make one
// (metastore.Put, metastore.PutBound, metastore.Delete, …).
//
// Packages outside the module are not loaded: they are type-checked as
// empty, which leaves the types that come from them invalid but resolves
// every method of the module's own types. A call that matches a mutating
// method by name and arity on a receiver of unresolved type is returned
// in Unresolved.
func Enumerate(root string, pkgs []string) (*Enumeration, error) {
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoModule, root, err)
	}
	l := &loader{root: root, fset: token.NewFileSet(), pkgs: map[string]*loaded{}}
	shorthands, err := l.shorthands()
	if err != nil {
		return nil, err
	}
	out := &Enumeration{}
	for _, rel := range pkgs {
		p, err := l.load(Module + "/" + rel)
		if err != nil {
			return nil, err
		}
		sites, cands := scan(l.fset, p, rel, shorthands)
		out.Sites = append(out.Sites, sites...)
		out.Unresolved = append(out.Unresolved, cands...)
	}
	sort.SliceStable(out.Sites, func(i, j int) bool { return out.Sites[i].Name < out.Sites[j].Name })
	return out, nil
}

// EnumerateDir enumerates one directory of Go source outside the module's
// tree (a test's synthetic package) that imports the module's packages:
// its sites are named with pkg as their package.
func EnumerateDir(root, dir, pkg string) (*Enumeration, error) {
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoModule, root, err)
	}
	l := &loader{root: root, fset: token.NewFileSet(), pkgs: map[string]*loaded{}}
	shorthands, err := l.shorthands()
	if err != nil {
		return nil, err
	}
	p, err := l.loadDir("synthetic/"+pkg, dir)
	if err != nil {
		return nil, err
	}
	sites, cands := scan(l.fset, p, pkg, shorthands)
	return &Enumeration{Sites: sites, Unresolved: cands}, nil
}

// loaded is one type-checked package.
type loaded struct {
	pkg   *types.Package
	files []*ast.File
	info  *types.Info
}

type loader struct {
	root string
	fset *token.FileSet
	pkgs map[string]*loaded
}

// Import loads the module's packages from source; any other package is
// empty.
func (l *loader) Import(path string) (*types.Package, error) {
	if path != Module && !strings.HasPrefix(path, Module+"/") {
		p := types.NewPackage(path, guessName(path))
		p.MarkComplete()
		return p, nil
	}
	p, err := l.load(path)
	if err != nil {
		return nil, err
	}
	return p.pkg, nil
}

func (l *loader) load(path string) (*loaded, error) {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, Module), "/")
	return l.loadDir(path, filepath.Join(l.root, filepath.FromSlash(rel)))
}

func (l *loader) loadDir(path, dir string) (*loaded, error) {
	if p, ok := l.pkgs[path]; ok {
		if p == nil {
			return nil, fmt.Errorf("crashpoint: import cycle through %s", path)
		}
		return p, nil
	}
	l.pkgs[path] = nil
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("crashpoint: package %s: %w", path, err)
	}
	ctxt := build.Default
	ctxt.CgoEnabled = false
	var files []*ast.File
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		// The build's own file selection: GOOS, GOARCH and tags, so that
		// planted code is read as a normal build compiles it.
		if ok, err := ctxt.MatchFile(dir, name); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(l.fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("crashpoint: %w", err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("crashpoint: package %s: no Go files in %s", path, dir)
	}
	info := &types.Info{
		Types:      map[ast.Expr]types.TypeAndValue{},
		Uses:       map[*ast.Ident]types.Object{},
		Defs:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}
	conf := types.Config{Importer: l, Error: func(error) {}, FakeImportC: true}
	pkg, _ := conf.Check(path, l.fset, files, info) // errors come from the empty outside packages
	p := &loaded{pkg: pkg, files: files, info: info}
	l.pkgs[path] = p
	return p, nil
}

// shorthands finds the exported package-level functions of the shorthand
// packages that make a mutating request themselves (metastore.Put …):
// a call of one is a site too. It maps each to its name.
func (l *loader) shorthands() (map[types.Object]string, error) {
	out := map[types.Object]string{}
	for _, rel := range shorthandPackages {
		p, err := l.load(Module + "/" + rel)
		if err != nil {
			return nil, err
		}
		for _, f := range p.files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Recv != nil || !fd.Name.IsExported() || fd.Body == nil {
					continue
				}
				makes := false
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok {
						if _, ok := mutatingMethod(p.info, sel); ok {
							makes = true
						}
					}
					return !makes
				})
				if makes {
					out[p.info.Defs[fd.Name]] = p.pkg.Name() + "." + fd.Name.Name
				}
			}
		}
	}
	return out, nil
}

// guessName is the name a package outside the module is most likely
// declared with: its path's last element, without a major version
// element or a dotted or dashed suffix.
func guessName(path string) string {
	elems := strings.Split(path, "/")
	name := elems[len(elems)-1]
	if len(elems) > 1 && len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" {
		name = elems[len(elems)-2]
	}
	if i := strings.IndexAny(name, ".-"); i > 0 {
		name = name[:i]
	}
	return name
}
