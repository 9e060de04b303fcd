package crashpoint

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
)

// arity is the number of arguments of each mutating method, used to flag
// look-alike calls on receivers of unresolved type.
var arity = map[string]int{"Create": 3, "Delete": 2, "Txn": 2, "NewSession": 2}

// mutatingMethod reports the kind of storage request sel selects: a
// mutating method of one of the storage interfaces, called on the
// interface or on a type of the module that implements it.
func mutatingMethod(info *types.Info, sel *ast.SelectorExpr) (string, bool) {
	s, ok := info.Selections[sel]
	if !ok || (s.Kind() != types.MethodVal && s.Kind() != types.MethodExpr) {
		return "", false
	}
	fn, ok := s.Obj().(*types.Func)
	if !ok {
		return "", false
	}
	recv := fn.Signature().Recv()
	if recv == nil {
		return "", false
	}
	rt := recv.Type()
	if p, ok := rt.(*types.Pointer); ok {
		rt = p.Elem()
	}
	named, ok := rt.(*types.Named)
	if !ok || named.Obj().Pkg() == nil {
		return "", false
	}
	qual := named.Obj().Pkg().Name() + "." + named.Obj().Name()
	if strings.HasPrefix(named.Obj().Pkg().Path(), Module+"/") {
		if kind, ok := mutating[qual][fn.Name()]; ok {
			return kind, true
		}
	}
	// A type of the module that implements a storage interface (a
	// wrapper): its mutating method is a request too.
	for iface, methods := range mutating {
		kind, ok := methods[fn.Name()]
		if !ok {
			continue
		}
		it := lookupInterface(named.Obj().Pkg(), iface)
		if it != nil && (types.Implements(recv.Type(), it) || types.Implements(types.NewPointer(named), it)) {
			return kind, true
		}
	}
	return "", false
}

// lookupInterface finds the storage interface iface ("objstore.Bucket")
// among pkg's imports (or pkg itself).
func lookupInterface(pkg *types.Package, iface string) *types.Interface {
	name, typ, _ := strings.Cut(iface, ".")
	cands := append([]*types.Package{pkg}, pkg.Imports()...)
	for _, p := range cands {
		if p.Path() != Module+"/"+name {
			continue
		}
		if obj := p.Scope().Lookup(typ); obj != nil {
			if it, ok := obj.Type().Underlying().(*types.Interface); ok {
				return it
			}
		}
	}
	return nil
}

// scan lists the sites of one package.
func scan(fset *token.FileSet, p *loaded, rel string, shorthands map[types.Object]string) ([]Site, []Candidate) {
	var sites []Site
	var cands []Candidate
	for _, f := range p.files {
		file := filepath.Base(fset.Position(f.Pos()).Filename)
		for _, d := range f.Decls {
			owner, body := declOwner(rel, d)
			if body == nil {
				continue
			}
			var stack []ast.Node
			ast.Inspect(body, func(n ast.Node) bool {
				if n == nil {
					stack = stack[:len(stack)-1]
					return false
				}
				stack = append(stack, n)
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				call := ""
				if kind, ok := mutatingMethod(p.info, sel); ok {
					call = kind
				} else if name, ok := shorthands[p.info.Uses[sel.Sel]]; ok {
					call = name
				}
				var span ast.Node = sel
				var parentCall *ast.CallExpr
				if len(stack) >= 2 {
					if c, ok := stack[len(stack)-2].(*ast.CallExpr); ok && c.Fun == sel {
						span, parentCall = c, c
					}
				}
				if call == "" {
					if c, ok := lookAlike(p.info, sel, parentCall); ok {
						pos := fset.Position(sel.Pos())
						cands = append(cands, Candidate{Pkg: rel, File: file, Line: pos.Line, Expr: c})
					}
					return true
				}
				sites = append(sites, Site{
					Func: owner, Call: call, Pkg: rel, File: file,
					Line:    fset.Position(sel.Sel.Pos()).Line,
					EndLine: fset.Position(span.End()).Line,
					Planted: inPlantedBranch(p.info, stack),
				})
				return true
			})
		}
	}
	// Names: function and call, with an ordinal for the second and later
	// call of the same kind in one function (in source order).
	seen := map[string]int{}
	for i := range sites {
		base := sites[i].Func + " → " + sites[i].Call
		seen[base]++
		sites[i].Name = base
		if n := seen[base]; n > 1 {
			sites[i].Name = fmt.Sprintf("%s #%d", base, n)
		}
	}
	return sites, cands
}

// declOwner names the function a declaration's code belongs to:
// "pkg.F", "pkg.(*T).M", "pkg.T.M", or for a package-level variable
// initialized with code "pkg.v".
func declOwner(rel string, d ast.Decl) (string, ast.Node) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Body == nil {
			return "", nil
		}
		return rel + "." + funcName(d), d.Body
	case *ast.GenDecl:
		if d.Tok != token.VAR {
			return "", nil
		}
		name := ""
		for _, s := range d.Specs {
			if vs, ok := s.(*ast.ValueSpec); ok && len(vs.Names) > 0 {
				name = vs.Names[0].Name
				break
			}
		}
		return rel + "." + name, d
	}
	return "", nil
}

// funcName is a declared function's name as the runtime spells it, without
// the package path.
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	t := d.Recv.List[0].Type
	star := false
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = true, s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	name := fmt.Sprint(t)
	if id, ok := t.(*ast.Ident); ok {
		name = id.Name
	}
	if star {
		return "(*" + name + ")." + d.Name.Name
	}
	return name + "." + d.Name.Name
}

// lookAlike reports a call that has a mutating method's name and arity
// but a receiver whose type did not resolve.
func lookAlike(info *types.Info, sel *ast.SelectorExpr, call *ast.CallExpr) (string, bool) {
	n, ok := arity[sel.Sel.Name]
	if !ok || call == nil || len(call.Args) != n {
		return "", false
	}
	if id, ok := sel.X.(*ast.Ident); ok {
		if _, isPkg := info.Uses[id].(*types.PkgName); isPkg {
			return "", false // a package's function, not a method
		}
	}
	if _, ok := info.Selections[sel]; ok {
		return "", false // resolved: a method of some other type
	}
	return types.ExprString(sel), true
}

// inPlantedBranch reports whether the innermost node of stack lies in the
// body of an if statement whose condition asks planted.On.
func inPlantedBranch(info *types.Info, stack []ast.Node) bool {
	for i := len(stack) - 2; i >= 0; i-- {
		ifs, ok := stack[i].(*ast.IfStmt)
		if !ok || stack[i+1] != ifs.Body {
			continue
		}
		asks := false
		ast.Inspect(ifs.Cond, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "On" {
				if id, ok := sel.X.(*ast.Ident); ok {
					if pn, ok := info.Uses[id].(*types.PkgName); ok && pn.Imported().Path() == Module+"/internal/planted" {
						asks = true
					}
				}
			}
			return !asks
		})
		if asks {
			return true
		}
	}
	return false
}
