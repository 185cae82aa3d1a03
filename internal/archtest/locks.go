package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// A lock is named "pkg.Type.field" (pkg relative to the module, "." for
// its root package is not used: the root has no package): a mutex field
// of a named struct type, or "pkg.var" for a package-level mutex.

// CodeLocks returns the locks declared in the non-test Go files of the
// package in dir, whose path relative to the module is rel.
func CodeLocks(rel, dir string) ([]string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range g.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if st, ok := s.Type.(*ast.StructType); ok {
						out = append(out, structLocks(rel+"."+s.Name.Name, st)...)
					}
				case *ast.ValueSpec:
					if isMutex(s.Type) {
						for _, n := range s.Names {
							out = append(out, rel+"."+n.Name)
						}
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// structLocks lists the mutex fields of st, prefix naming st; the fields
// of a struct-typed field are named through it (prefix.field.mu).
func structLocks(prefix string, st *ast.StructType) []string {
	var out []string
	for _, f := range st.Fields.List {
		if isMutex(f.Type) {
			for _, n := range f.Names {
				out = append(out, prefix+"."+n.Name)
			}
			continue
		}
		if inner, ok := f.Type.(*ast.StructType); ok {
			for _, n := range f.Names {
				out = append(out, structLocks(prefix+"."+n.Name, inner)...)
			}
		}
	}
	return out
}

func isMutex(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == "sync" && (sel.Sel.Name == "Mutex" || sel.Sel.Name == "RWMutex")
}

// lockName is a lock as the lock-order file writes it: pkg/path.Type.field,
// the package under one of the module's top directories.
var lockName = regexp.MustCompile(`\b((?:broker|gateway|storage|cmd|internal|sdk)(?:/[a-z0-9_]+)*)\.([A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\b`)

// DocLocks returns the locks the lock-order file names.
func DocLocks(doc string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range lockName.FindAllStringSubmatch(doc, -1) {
		l := m[1] + "." + m[2]
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}
