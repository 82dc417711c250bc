package tcpao_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// notKeyed are the files of this module that make TCP sockets with Go's
// default (Multipath TCP on a listener since Go 1.24, where the kernel has
// CONFIG_MPTCP) because no TCP-AO or TCP-MD5 key ever goes on those
// sockets, each with what they are.
var notKeyed = map[string]string{
	"cmd/aokeyd/main.go":                   "the metrics HTTP listener",
	"keystore/vaulttest/server.go":         "the Vault stand-in's HTTP listener",
	"internal/control/server_test.go":      "an HTTP listener without SO_PEERCRED",
	"integration/e2e/lab_test.go":          "a free port for aokeyd's metrics listener",
	"integration/activeopen/guest_test.go": "the BMP collector's listener",
	"cmd/aokeyd/reload_test.go":            "a free port where no Vault answers",
	"internal/vaultreal/vaultreal.go":      "a free port for a real Vault's listener",
}

// Every socket this module makes to put TCP-AO or TCP-MD5 keys on (tests,
// lab and bench helpers, aokeyd itself) must be plain TCP: an MPTCP socket
// refuses the keys (tcpao.ErrMPTCP), and since Go 1.24 net.Listen and a
// zero net.ListenConfig make MPTCP listeners where the kernel has
// CONFIG_MPTCP (this module's go.mod says go 1.26). So, outside notKeyed:
//   - net.Listen, net.Dial, net.DialTimeout, net.ListenTCP and net.DialTCP
//     are not called for TCP (their network a "tcp" literal, or any
//     expression that is not a "unix" one): they cannot be told plain TCP;
//   - a function that calls Listen, Dial or DialContext with a "tcp"
//     network literal also calls SetMultipathTCP (false, by the reviewer's
//     eye: the test does not follow values).
func TestKeyedSocketsArePlainTCP(t *testing.T) {
	root := ".."
	var bad []string
	listed := map[string]int{} // notKeyed's files: how many TCP sockets each makes
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "vendor" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		found := mptcpDefaults(f)
		if _, ok := notKeyed[rel]; ok {
			listed[rel] = len(found)
			return nil
		}
		for _, p := range found {
			bad = append(bad, rel+":"+strconv.Itoa(fset.Position(p.pos).Line)+": "+p.what)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f, why := range notKeyed {
		if listed[f] == 0 {
			t.Errorf("notKeyed lists %s (%s), which makes no TCP socket with Go's default now: drop it", f, why)
		}
	}
	for _, b := range bad {
		t.Errorf("%s: a TCP socket with Go's Multipath TCP default; make it plain TCP "+
			"(net.ListenConfig or net.Dialer with SetMultipathTCP(false)), or list the file in notKeyed if no key ever goes on it", b)
	}
}

// A finding: where, and the call.
type finding struct {
	pos  token.Pos
	what string
}

// mptcpDefaults are f's calls that make TCP sockets with Go's Multipath
// TCP default (see TestKeyedSocketsArePlainTCP).
func mptcpDefaults(f *ast.File) []finding {
	netName := ""
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == "net" {
			netName = "net"
			if im.Name != nil {
				netName = im.Name.Name
			}
		}
	}
	if netName == "" {
		return nil
	}
	var out []finding
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		sets := false
		var tcp []finding
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			method := sel.Sel.Name
			if method == "SetMultipathTCP" {
				sets = true
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == netName {
				switch method {
				case "Listen", "Dial", "DialTimeout", "ListenTCP", "DialTCP":
					if len(call.Args) > 0 && !isNetwork(call.Args[0], "unix") {
						out = append(out, finding{call.Pos(), "net." + method})
					}
				}
				return true
			}
			// A method: lc.Listen(ctx, network, addr), d.Dial(network,
			// addr), d.DialContext(ctx, network, addr).
			at := map[string]int{"Listen": 1, "Dial": 0, "DialContext": 1}
			if i, ok := at[method]; ok && len(call.Args) == i+2 && isNetwork(call.Args[i], "tcp") {
				tcp = append(tcp, finding{call.Pos(), "." + method + " without SetMultipathTCP in " + fn.Name.Name})
			}
			return true
		})
		if !sets {
			out = append(out, tcp...)
		}
	}
	slices.SortFunc(out, func(a, b finding) int { return int(a.pos - b.pos) })
	return out
}

// isNetwork reports whether e is a string literal naming a network of kind
// ("tcp": tcp, tcp4, tcp6; "unix": unix, unixgram, unixpacket).
func isNetwork(e ast.Expr, kind string) bool {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return false
	}
	s, err := strconv.Unquote(lit.Value)
	return err == nil && strings.HasPrefix(s, kind)
}

// What the guard above counts, on snippets: each way of making a TCP
// socket with Go's default, and each way that is plain TCP or not TCP.
func TestMPTCPDefaultsFinds(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"net.Listen tcp", `net.Listen("tcp4", a)`, 1},
		{"net.Listen variable network", `net.Listen(network, a)`, 1},
		{"net.Listen unix", `net.Listen("unix", p)`, 0},
		{"net.Dial and DialTimeout", `net.Dial("tcp", a); net.DialTimeout("tcp", a, 0)`, 2},
		{"ListenTCP", `net.ListenTCP("tcp", nil)`, 1},
		{"ListenConfig without the setting", `var lc net.ListenConfig; lc.Listen(ctx, "tcp4", a)`, 1},
		{"ListenConfig plain TCP", `var lc net.ListenConfig; lc.SetMultipathTCP(false); lc.Listen(ctx, "tcp4", a)`, 0},
		{"Dialer without the setting", `d := net.Dialer{}; d.Dial("tcp", a); d.DialContext(ctx, "tcp6", a)`, 2},
		{"Dialer plain TCP", `d := net.Dialer{}; d.SetMultipathTCP(false); d.DialContext(ctx, "tcp4", a)`, 0},
		{"Dialer for unix", `var d net.Dialer; d.DialContext(ctx, "unix", p)`, 0},
		{"a method of another kind", `s.Listen()`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "package p\nimport \"net\"\nfunc f() {\n" + tc.body + "\n}\n"
			f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := mptcpDefaults(f); len(got) != tc.want {
				t.Errorf("%s: %d findings %v, want %d", tc.body, len(got), got, tc.want)
			}
		})
	}
}
