package keystore

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// A value pasted into one field of an otherwise valid key source, in both
// decoders' formats: the harness of TestPastedValueNotEchoed and
// FuzzFieldValueNotEchoed.

// pasteFields are the fields a value can be pasted into. "chain.x" is the
// chain-level field x, "f.sub" the sub-field sub of lifetime f.
var pasteFields = []string{"name", "send_id", "recv_id", "algorithm", "secret_b64", "secret_hex", "maclen",
	"peers", "vrf", "tcp_options", "send_lifetime", "accept_lifetime", "revoked",
	"send_lifetime.start", "accept_lifetime.end", "send_lifetime.duration", "chain.peers", "chain.vrf"}

const (
	pastePath  = "/etc/bgp/keys.yaml"
	pasteVault = "vault:kv/routers/chains/core@v3"
)

// pasteKV is one field of the harness document with its value as YAML and
// as JSON text.
type pasteKV struct{ k, yaml, json string }

// pasteDocs returns the key file and the Vault chain document with field
// set to the value given as YAML and JSON text.
func pasteDocs(sec testSecrets, field, yv, jv string) (yamlDoc, jsonDoc []byte) {
	q := func(s string) pasteKV { return pasteKV{yaml: fmt.Sprintf("%q", s), json: fmt.Sprintf("%q", s)} }
	set := func(kvs []pasteKV, k string, v pasteKV) []pasteKV {
		v.k = k
		for i := range kvs {
			if kvs[i].k == k {
				kvs[i] = v
				return kvs
			}
		}
		return append(kvs, v)
	}
	with := func(k string, v pasteKV) pasteKV { v.k = k; return v }
	chain := []pasteKV{{"peers", `["192.0.2.1"]`, `["192.0.2.1"]`}}
	key := []pasteKV{with("name", q("k1")), {"send_id", "1", "1"}, {"recv_id", "2", "2"},
		with("algorithm", q("hmac(sha256)")), with("secret_b64", q(b64(sec[0])))}
	val := pasteKV{yaml: yv, json: jv}
	switch sub, ok := strings.CutPrefix(field, "chain."); {
	case ok:
		chain = set(chain, sub, val)
	case strings.Contains(field, "."):
		lt, sub, _ := strings.Cut(field, ".")
		fixed := map[string][2]string{"start": {"end", "2031-01-01T00:00:00Z"}, "end": {"start", "2030-01-01T00:00:00Z"},
			"duration": {"start", "2030-01-01T00:00:00Z"}}[sub]
		key = set(key, lt, pasteKV{
			yaml: fmt.Sprintf("{%s: %s, %s: %q}", sub, yv, fixed[0], fixed[1]),
			json: fmt.Sprintf("{%q: %s, %q: %q}", sub, jv, fixed[0], fixed[1])})
	case field == "secret_hex":
		key = set(key[:len(key)-1], field, val) // one secret field only
	default:
		key = set(key, field, val)
	}
	var y strings.Builder
	y.WriteString("chains:\n  core:\n")
	for _, kv := range chain {
		fmt.Fprintf(&y, "    %s: %s\n", kv.k, kv.yaml)
	}
	y.WriteString("    keys:\n")
	for i, kv := range key {
		lead := "        "
		if i == 0 {
			lead = "      - "
		}
		fmt.Fprintf(&y, "%s%s: %s\n", lead, kv.k, kv.yaml)
	}
	obj := func(kvs []pasteKV) string {
		parts := make([]string, len(kvs))
		for i, kv := range kvs {
			parts[i] = fmt.Sprintf("%q: %s", kv.k, kv.json)
		}
		return strings.Join(parts, ", ")
	}
	j := fmt.Sprintf(`{%s, "keys": [{%s}]}`, obj(chain), obj(key))
	return []byte(y.String()), []byte(j)
}

// pasteProblems decodes both documents and returns every problem found,
// whole-document failures and rejected keys alike, zeroing what decoded.
func pasteProblems(yamlDoc, jsonDoc []byte) (fileProblems, vaultProblems []error) {
	if s, err := DecodeFile(pastePath, yamlDoc); err != nil {
		fileProblems = append(fileProblems, err)
	} else {
		fileProblems = append(fileProblems, s.Rejected()...)
		s.Zero()
	}
	if c, err := DecodeVaultChain(pasteVault, "core", jsonDoc); err != nil {
		vaultProblems = append(vaultProblems, err)
	} else {
		vaultProblems = append(vaultProblems, c.Rejected...)
		c.Zero()
	}
	return fileProblems, vaultProblems
}

// echoedRuns returns the runs of more than 3 bytes of value that text holds.
func echoedRuns(value, text string) []string {
	var out []string
	for i := 0; i+4 <= len(value); i++ {
		if r := value[i : i+4]; strings.Contains(text, r) {
			out = append(out, r)
		}
	}
	return out
}

// TestPastedValueNotEchoed pastes each test secret, in each of its
// encodings, into each field of a key that does not take it, in a key file
// and in a Vault chain: the problem names the source, the position (the
// line, or the key and the item) and the field and says what the field
// wants, and no run of more than 3 bytes of the value reaches its text,
// which status shows to the read group and the log keeps.
func TestPastedValueNotEchoed(t *testing.T) {
	sec := loadSecrets(t)
	values := []string{sec[1], b64(sec[1]), hexs(sec[1]), sec[2], b64(sec[2])}
	tests := []struct {
		field     string // where the value is pasted
		wantField string // the FieldError's Field
		wantKey   string // "" for a chain-level problem
		want      string
	}{
		{"send_id", "send_id", "k1", "not an integer 0..255"},
		{"recv_id", "recv_id", "k1", "not an integer 0..255"},
		{"maclen", "maclen", "k1", "not an integer 1..16"},
		{"peers", "peers[0]", "k1", "not an IPv4 or IPv6 address"},
		{"vrf", "vrf", "k1", "not a VRF device name"},
		{"chain.peers", "peers[0]", "", "not an IPv4 or IPv6 address"},
		{"chain.vrf", "vrf", "", "not a VRF device name"},
		{"algorithm", "algorithm", "k1", "want one of"},
		{"tcp_options", "tcp_options", "k1", "include or exclude"},
		{"revoked", "revoked", "k1", "true or false"},
		{"send_lifetime", "send_lifetime", "k1", `"always"`},
		{"send_lifetime.start", "send_lifetime.start", "k1", "not an RFC 3339 time"},
		{"accept_lifetime.end", "accept_lifetime.end", "k1", "not an RFC 3339 time"},
		{"send_lifetime.duration", "send_lifetime.duration", "k1", "not a duration"},
	}
	for _, tc := range tests {
		for vi, v := range values {
			t.Run(fmt.Sprintf("%s/%d", tc.field, vi), func(t *testing.T) {
				yv, _ := json.Marshal(v)
				yamlDoc, jsonDoc := pasteDocs(sec, tc.field, string(yv), string(yv))
				fileP, vaultP := pasteProblems(yamlDoc, jsonDoc)
				for _, d := range []struct {
					name     string
					problems []error
					source   string
				}{{"file", fileP, "file"}, {"vault", vaultP, "vault"}} {
					if len(d.problems) != 1 {
						t.Fatalf("%s: %d problems, want 1", d.name, len(d.problems))
					}
					err := d.problems[0]
					noSecret(t, err.Error())
					var fe *FieldError
					if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
						t.Fatalf("%s: %q (%T) is not a *FieldError wrapping ErrInvalid", d.name, err, err)
					}
					if placeKind(fe) != d.source || fe.Chain != "core" || fe.Key != tc.wantKey || relField(fe) != tc.wantField {
						t.Errorf("%s: at %q chain %q key %q field %q, want the %s, core, %q, %q",
							d.name, fe.Pos, fe.Chain, fe.Key, fe.Field, d.source, tc.wantKey, tc.wantField)
					}
					if runs := echoedRuns(v, fe.Err.Error()); len(runs) > 0 {
						t.Errorf("%s: the problem echoes %d runs of the pasted value (%d bytes)", d.name, len(runs), len(v))
					} else if !strings.Contains(err.Error(), tc.want) {
						t.Errorf("%s: %q does not say %q", d.name, err, tc.want)
					}
				}
			})
		}
	}
}

// packageLiterals returns every string literal of the package's own
// (non-test) source: the only text a key source's problem may carry
// besides where it is.
func packageLiterals(t testing.TB) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var lits []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if bl, ok := n.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				if s, err := strconv.Unquote(bl.Value); err == nil {
					lits = append(lits, s)
				}
			}
			return true
		})
	}
	return lits
}

// TestRefusalsAreLiterals: every refusal of a key source's value, and
// every message of the YAML conversion, is a string literal, so that none
// can carry the input's text.
func TestRefusalsAreLiterals(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var msg ast.Expr
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				if fn.Name != "refuse" || len(call.Args) != 1 {
					return true
				}
				msg = call.Args[0]
			case *ast.SelectorExpr:
				if x, ok := fn.X.(*ast.Ident); !ok || x.Name != "c" || fn.Sel.Name != "fail" || len(call.Args) != 2 {
					return true
				}
				msg = call.Args[1]
			default:
				return true
			}
			calls++
			if bl, ok := msg.(*ast.BasicLit); !ok || bl.Kind != token.STRING {
				t.Errorf("%s: the message is not a string literal", fset.Position(call.Pos()))
			}
			return true
		})
	}
	if calls < 30 {
		t.Fatalf("found %d refusals, want the decoders' (30 or more): is the check still looking at the right calls?", calls)
	}
}

// TestYAMLErrorQuotesNoInput: yaml.v3 quotes an unknown anchor's name in
// its message; the key file's error leaves it out.
func TestYAMLErrorQuotesNoInput(t *testing.T) {
	sec := loadSecrets(t)
	name := strings.TrimRight(b64(sec[3]), "=")
	_, err := DecodeFile(pastePath, []byte("chains:\n  core:\n    peers: *"+name+"\n    keys: []\n"))
	if err == nil || !errors.Is(err, ErrSyntax) {
		t.Fatalf("unknown anchor: %v, want a syntax error", err == nil)
	}
	noSecret(t, err.Error())
	if runs := echoedRuns(name, err.Error()); len(runs) > 0 {
		t.Errorf("the syntax error echoes %d runs of the anchor's name", len(runs))
	}
	if !strings.Contains(err.Error(), "unknown anchor") {
		t.Errorf("%q does not say what is wrong", err)
	}
}

// pasteValue renders value for a paste as YAML and JSON text: a quoted
// string (mode 0), a plain scalar (1: YAML's plain text, JSON's number,
// true, false or null, else a string) or a list of one string (2). ok is
// false for a plain value that is not a single plain scalar.
func pasteValue(value string, mode uint8) (yv, jv string, ok bool) {
	js, _ := json.Marshal(value)
	q := strconv.QuoteToASCII(value) // YAML's double-quoted escapes include Go's
	switch mode % 3 {
	case 0:
		return q, string(js), true
	case 1:
		if !plainScalar.MatchString(value) {
			return "", "", false
		}
		var x any
		if json.Unmarshal([]byte(value), &x) == nil {
			switch x.(type) {
			case float64, bool, nil:
				return value, value, true
			}
		}
		return value, string(js), true
	}
	return "[" + q + "]", "[" + string(js) + "]", true
}

// plainScalar is text that YAML reads as one plain scalar after "field: ".
var plainScalar = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9+/=._-]*(:[A-Za-z0-9+/=._-]+)*$`)

// fieldPath is a FieldError's Field for a key source: a field, an item of
// it, a sub-field.
var fieldPath = regexp.MustCompile(`^((chains\.core\.)?keys\[0\]|chains(\.core)?)?(\.?[a-z][a-z0-9_]*(\[[0-9]+\])?(\.[a-z_]+)?)?$`)

// fixedText reports whether s is text of the package: empty, a substring
// of one of its string literals, or a sentinel's text, ": " and fixed text.
func fixedText(s string, lits []string) bool {
	if s == "" {
		return true
	}
	for _, l := range lits {
		if strings.Contains(l, s) {
			return true
		}
	}
	for _, sen := range sentinels {
		if rest, ok := strings.CutPrefix(s, sen.Error()+": "); ok && fixedText(rest, lits) {
			return true
		}
	}
	return false
}

// FuzzFieldValueNotEchoed pastes arbitrary bytes into one field of a valid
// key source, in a key file and in a Vault chain, and checks every problem
// the decoders report: it is a *FieldError that names the source (with the
// line, for the file), the chain, the key and the field by the harness's
// own names, its reason is fixed text of the package (a refusal or another
// literal, after any sentinel), and no run of more than 3 bytes of the
// value reaches the error's text, other than fixed text.
func FuzzFieldValueNotEchoed(f *testing.F) {
	sec := loadSecrets(f)
	lits := packageLiterals(f)
	for i := range pasteFields {
		for m, v := range []string{sec[1], b64(sec[2]), hexs(sec[3]), "300", "-1", "192.0.2.1/24", "2026-13-01T00:00:00Z",
			"always", "include", "true", "", "36h"} {
			f.Add(uint8(i), uint8(m), []byte(v))
		}
	}
	f.Fuzz(func(t *testing.T, fi, mode uint8, value []byte) {
		field := pasteFields[int(fi)%len(pasteFields)]
		v := string(value)
		yv, jv, ok := pasteValue(v, mode)
		if !ok {
			return
		}
		yamlDoc, jsonDoc := pasteDocs(sec, field, yv, jv)
		fileP, vaultP := pasteProblems(yamlDoc, jsonDoc)
		for _, err := range append(fileP, vaultP...) {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("problem (%T) is not a *FieldError", err)
			}
			srcOK := fe.Source == "" && (fe.File == pasteVault || fe.File == pastePath)
			keyOK := fe.Key == "" || fe.Key == "k1" || fe.Key == "#1" || field == "name" && fe.Key == v
			if !srcOK || (fe.Chain != "core" && fe.Chain != "") || !keyOK || (fe.Field != "" && !fieldPath.MatchString(fe.Field)) {
				t.Fatalf("%s pasted (mode %d): the problem's place is not the harness's: at %q source %q chain %q key %q field %q",
					field, mode%3, fe.Pos, fe.Source, fe.Chain, fe.Key, fe.Field)
			}
			reason := fe.Err.Error()
			if !fixedText(reason, lits) && !(errors.Is(err, ErrSyntax) && fe.Line > 0) {
				t.Fatalf("%s pasted (mode %d): the reason %q is not fixed text", field, mode%3, reason)
			}
			// The place as the error renders it ("F:10:3: chains.core..."):
			// its separators and line number are not the value's, even
			// where the value happens to hold the same bytes (":10:").
			place := []string{fe.Pos.String(), fe.Chain, fe.Key, fe.Field, strings.TrimSuffix(err.Error(), reason)}
			for _, r := range echoedRuns(v, err.Error()) {
				if !fixedText(r, append(lits, place...)) {
					t.Fatalf("%s pasted (mode %d): %q echoes the run %q of the value", field, mode%3, err, r)
				}
			}
		}
	})
}

// TestRefusalBounds: the bounds the refusals spell out (literals, see
// refuse) are the limits the decoders apply.
func TestRefusalBounds(t *testing.T) {
	for _, b := range []struct {
		name      string
		got, want int
	}{{"tcpao.MaxKeyLen", tcpao.MaxKeyLen, 80}, {"maxMACLen", maxMACLen, 16}, {"maxPeers", maxPeers, 4096},
		{"maxKeysPerChain", maxKeysPerChain, 256}} {
		if b.got != b.want {
			t.Errorf("%s is %d; the refusals say %d: change them with it", b.name, b.got, b.want)
		}
	}
}
