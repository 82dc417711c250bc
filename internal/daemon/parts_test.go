package daemon

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strings"
	"testing"
)

// partFields are core's handles on the parts, by the part's type.
var partFields = map[string]string{
	"recon": "reconciler", "table": "peerTable", "revs": "revocations", "owns": "ownership",
	"migrs": "migrations", "stat": "statusView", "early": "earlyRolls", "conns": "connector",
}

// TestParts checks the package's shape (doc.go, "One owner for each piece
// of state"): *Daemon, the wiring, has at most 25 methods, and no code
// reaches a part's fields through another part's handle: a part is used
// through its methods only (New, newCore and wire build them).
func TestParts(t *testing.T) {
	fset := token.NewFileSet()
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	methods := map[string]map[string]bool{}
	recvType := func(fd *ast.FuncDecl) string {
		if fd.Recv == nil || len(fd.Recv.List) == 0 {
			return ""
		}
		x := fd.Recv.List[0].Type
		if s, ok := x.(*ast.StarExpr); ok {
			x = s.X
		}
		if id, ok := x.(*ast.Ident); ok {
			return id.Name
		}
		return ""
	}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				if r := recvType(fd); r != "" {
					if methods[r] == nil {
						methods[r] = map[string]bool{}
					}
					methods[r][fd.Name.Name] = true
				}
			}
		}
	}
	if n := len(methods["Daemon"]); n > 25 {
		t.Errorf("*Daemon has %d methods, want at most 25", n)
	}
	var bad []string
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			switch fd.Name.Name {
			case "New", "newCore", "wire":
				continue // the wiring builds the parts
			}
			own := recvType(fd)
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				inner, ok := sel.X.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				part, ok := partFields[inner.Sel.Name]
				if inner.Sel.Name == "rec" && own == "Daemon" {
					part, ok = "reconciler", true // Daemon's own handle on it
				}
				if !ok || part == own {
					return true
				}
				if !methods[part][sel.Sel.Name] {
					bad = append(bad, fset.Position(sel.Pos()).String()+": "+inner.Sel.Name+"."+sel.Sel.Name+" is a field of "+part)
				}
				return true
			})
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}
