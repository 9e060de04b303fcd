package crashpoint

import (
	"fmt"
	"path"
	"regexp"
	"runtime"
	"strings"
)

// Table attributes a running request to its site. The innermost frame of
// the calling goroutine's stack that lies in one of the enumerated
// packages is the site's function, and the frame it called names the
// call (a storage method, or a shorthand such as metastore.Put). When the
// function has one site of that call, that is the site, wherever its line
// has moved since the enumeration; when it has several, the frame's line
// picks the one whose call spans it.
type Table struct {
	pkgs  map[string]bool
	sites map[callKey][]Site
}

type callKey struct{ fn, call string }

// NewTable indexes the sites of the packages pkgs.
func NewTable(pkgs []string, sites []Site) *Table {
	t := &Table{pkgs: map[string]bool{}, sites: map[callKey][]Site{}}
	for _, p := range pkgs {
		t.pkgs[p] = true
	}
	for _, s := range sites {
		k := callKey{s.Func, s.Call}
		t.sites[k] = append(t.sites[k], s)
	}
	return t
}

// Attribution is where a request came from.
type Attribution struct {
	// Site is the site's name; empty when the request came from no
	// enumerated site (Where then says from where).
	Site string
	// Where is the innermost frame in an enumerated package, as
	// "function file:line", or "no frame in an enumerated package".
	Where string
	// Via is the outermost frame in an enumerated package, without the
	// module's path and closure suffixes: the step that reached the site
	// ("epoch.(*Minter).Publish"), or the goroutine that made the request
	// on its behalf ("chain.(*Writer).bucketWorker").
	Via string
}

// Caller attributes the request being made by the calling goroutine:
// call is the storage method the request was made through
// (BucketCreate, StoreTxn, …).
func (t *Table) Caller(call string) Attribution {
	var pcs [128]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	var at Attribution
	found := false
	for {
		f, more := frames.Next()
		if _, ok := t.packageOf(f.Function); ok {
			at.Via = stepName(f.Function)
			if !found {
				found = true
				at.Where = fmt.Sprintf("%s %s:%d", f.Function, path.Base(f.File), f.Line)
				at.Site = t.site(at.Via, call, f.Line)
			}
		} else if !found {
			if h, ok := shorthandName(f.Function); ok {
				call = h // the step called a shorthand that made the request
			}
		}
		if !more {
			break
		}
	}
	if !found {
		at.Where = "no frame in an enumerated package"
	}
	return at
}

// site finds the site of call in function fn at line.
func (t *Table) site(fn, call string, line int) string {
	cands := t.sites[callKey{fn, call}]
	if len(cands) == 1 {
		return cands[0].Name
	}
	for _, s := range cands {
		if s.Line <= line && line <= s.EndLine {
			return s.Name
		}
	}
	return ""
}

// shorthandName names a runtime function when it is an exported function of
// a shorthand package (metastore.Put).
func shorthandName(fn string) (string, bool) {
	for _, p := range shorthandPackages {
		if rest, ok := strings.CutPrefix(fn, Module+"/"+p+"."); ok && !strings.ContainsAny(rest, ".()") && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z' {
			return p + "." + rest, true
		}
	}
	return "", false
}

// rangeSuffix marks the body of a range-over-func loop in a runtime
// function name.
var rangeSuffix = regexp.MustCompile(`-range[0-9]+`)

// stepName is a runtime function name without the module's path and
// without the suffixes of closures and go or defer wrappers: the declared
// function the code belongs to.
func stepName(fn string) string {
	fn = strings.TrimPrefix(fn, Module+"/")
	fn = strings.ReplaceAll(fn, "[...]", "")
	fn = rangeSuffix.ReplaceAllString(fn, "")
	slash := strings.LastIndex(fn, "/")
	parts := strings.Split(fn[slash+1:], ".")
	keep := len(parts)
	for keep > 2 {
		p := parts[keep-1]
		if strings.HasPrefix(p, "func") || strings.HasPrefix(p, "gowrap") || strings.HasPrefix(p, "deferwrap") || strings.Trim(p, "0123456789") == "" {
			keep--
			continue
		}
		break
	}
	return fn[:slash+1] + strings.Join(parts[:keep], ".")
}

// packageOf returns the path inside the module of the package a runtime
// function name belongs to, when it is one of the table's packages.
func (t *Table) packageOf(fn string) (string, bool) {
	if !strings.HasPrefix(fn, Module+"/") {
		return "", false
	}
	rest := fn[len(Module)+1:]
	slash := strings.LastIndex(rest, "/")
	dot := strings.Index(rest[slash+1:], ".")
	if dot < 0 {
		return "", false
	}
	rel := rest[:slash+1+dot]
	return rel, t.pkgs[rel]
}
