package keystore

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// snapshotSummary renders what a decode gave, for comparing two decodes:
// the error, or each chain's digest (secrets by fingerprint) and
// rejections.
func snapshotSummary(s *Snapshot, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	for _, n := range s.ChainNames() {
		fmt.Fprintf(&b, "%s %x %q\n", n, chainDigest(s.Chains[n]), s.Chains[n].Rejected)
	}
	return b.String()
}

// sameDecodeFile fails t unless the key file decodes the same with and
// without masking the secrets' text.
func sameDecodeFile(t testing.TB, data []byte) {
	t.Helper()
	m, merr := decodeFile("k.yaml", data, true)
	u, uerr := decodeFile("k.yaml", data, false)
	if a, b := snapshotSummary(m, merr), snapshotSummary(u, uerr); a != b {
		t.Fatalf("masked decode differs:\n%s\nfrom the plain one:\n%s", a, b)
	}
	if merr == nil {
		m.Zero()
		u.Zero()
	}
}

// sameDecodeVault is sameDecodeFile for a Vault chain document.
func sameDecodeVault(t testing.TB, doc []byte) {
	t.Helper()
	m, merr := decodeVaultChain("vault kv/c", "core", doc, true)
	u, uerr := decodeVaultChain("vault kv/c", "core", doc, false)
	sum := func(c *Chain, err error) string {
		if err != nil {
			return snapshotSummary(nil, err)
		}
		return snapshotSummary(&Snapshot{Chains: map[string]*Chain{"core": c}}, nil)
	}
	if a, b := sum(m, merr), sum(u, uerr); a != b {
		t.Fatalf("masked decode differs:\n%s\nfrom the plain one:\n%s", a, b)
	}
	if merr == nil {
		m.Zero()
		u.Zero()
	}
}

// secretValueOf returns the value the parse of a key file gives the
// secret field of chain core's first key.
func secretValueOf(t *testing.T, tree any, field string) any {
	t.Helper()
	top, _ := tree.(*object)
	if top == nil {
		t.Fatalf("tree %T", tree)
	}
	var cur any = top
	for _, step := range []any{"chains", "core", "keys", 0, field} {
		switch s := step.(type) {
		case string:
			o, _ := cur.(*object)
			if o == nil {
				t.Fatalf("no mapping for %q", s)
			}
			cur = o.vals[s]
		case int:
			l, _ := cur.([]any)
			if len(l) <= s {
				t.Fatalf("no item %d", s)
			}
			cur = l[s]
		}
	}
	return cur
}

// TestSecretTextMasking: the secrets' text of a key file or a Vault
// chain is kept out of the YAML and JSON decoders (it reaches decodeSecret
// as a secretText of the input) when it is written in a way the masking
// recognises for certain, and otherwise goes through them as before;
// either way the decode is the same as without masking.
func TestSecretTextMasking(t *testing.T) {
	sec := loadSecrets(t)
	b, h := b64(sec[0]), hexs(sec[1])
	key := func(secretLine string) string {
		return "chains:\n  core:\n    peers: [192.0.2.1]\n    keys:\n      - name: k1\n        send_id: 1\n        recv_id: 2\n" +
			"        algorithm: hmac(sha256)\n        " + secretLine + "\n"
	}
	yamlTests := []struct {
		name, body, field string
		masked            bool
	}{
		{"double-quoted", key(`secret_b64: "` + b + `"`), "secret_b64", true},
		{"single-quoted", key(`secret_b64: '` + b + `'`), "secret_b64", true},
		{"plain", key(`secret_b64: ` + b), "secret_b64", true},
		{"plain, comment after", key(`secret_b64: ` + b + `   # rotated 2026-11`), "secret_b64", true},
		{"quoted key", key(`"secret_b64": "` + b + `"`), "secret_b64", true},
		{"hex, plain, digit first", key(`secret_hex: ` + h), "secret_hex", true},
		{"hex with 0x", key(`secret_hex: "0x` + h + `"`), "secret_hex", true},
		{"CRLF", strings.ReplaceAll(key(`secret_b64: "`+b+`"`), "\n", "\r\n"), "secret_b64", true},
		{"flow mapping", "chains:\n  core:\n    peers: [192.0.2.1]\n    keys:\n      - {name: k1, send_id: 1, recv_id: 2, " +
			"algorithm: hmac(sha256), secret_b64: " + b + "}\n", "secret_b64", true},
		{"a number is not masked", key(`secret_hex: 00112233`), "secret_hex", false},
		{"nor an exponent", key(`secret_hex: 1e10`), "secret_hex", false},
		{"nor true", key(`secret_b64: true`), "secret_b64", false},
		{"nor a block scalar", key("secret_b64: |\n          " + b), "secret_b64", false},
		{"nor an anchored value", key(`secret_b64: &s "` + b + `"`), "secret_b64", false},
		{"nor a value with an escape", key(`secret_b64: "` + b[:4] + `\u0041` + b[5:] + `"`), "secret_b64", false},
		{"a secret in a comment: nothing masked", "# was: secret_b64: " + b64(sec[2]) + "\n" + key(`secret_b64: "`+b+`"`),
			"secret_b64", false},
		{"a secret in a block scalar: nothing masked", key(`secret_b64: "`+b+`"`) + "        vrf: |\n          secret_b64: " + b64(sec[2]) + "\n",
			"secret_b64", false},
	}
	for _, tc := range yamlTests {
		t.Run("file/"+tc.name, func(t *testing.T) {
			data := []byte(tc.body)
			tree, _, err := parseKeyFile("keys.yaml", data, true)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			v := secretValueOf(t, tree, tc.field)
			if _, ok := v.(secretText); ok != tc.masked {
				t.Errorf("secret value is %T, want masked=%t", v, tc.masked)
			}
			sameDecodeFile(t, data)
		})
	}

	doc := func(keys ...string) []byte {
		return []byte(`{"peers": ["192.0.2.1"], "keys": [` + strings.Join(keys, ", ") + `]}`)
	}
	jkey := func(name, secret string) string {
		return `{"name": "` + name + `", "send_id": 1, "recv_id": 2, "algorithm": "hmac(sha256)", ` + secret + `}`
	}
	jsonTests := []struct {
		name   string
		doc    []byte
		masked []bool // per key
	}{
		{"one key", doc(jkey("k1", `"secret_b64": "`+b+`"`)), []bool{true}},
		{"two keys, hex", doc(jkey("k1", `"secret_b64": "`+b+`"`), `{"secret_hex":"`+h+`","name":"k2","send_id":3,"recv_id":4,"algorithm":"hmac(sha1)"}`),
			[]bool{true, true}},
		{"an escape is not masked", doc(jkey("k1", `"secret_b64": "`+b[:4]+`\u0041`+b[5:]+`"`)), []bool{false}},
		{"the last of two values", doc(jkey("k1", `"secret_b64": "`+b64(sec[2])+`", "secret_b64": "`+b+`"`)), []bool{true}},
		{"a number is not masked", doc(jkey("k1", `"secret_hex": 1234`)), []bool{false}},
		{"not at a key's level", []byte(`{"secret_b64": "` + b + `", "keys": [` + jkey("k1", `"secret_b64": "`+b+`"`) + `]}`), []bool{true}},
	}
	for _, tc := range jsonTests {
		t.Run("vault/"+tc.name, func(t *testing.T) {
			tree, err := parseChainJSON(tc.doc, true)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			keys := tree.(*object).vals["keys"].([]any)
			var got []bool
			for _, k := range keys {
				o := k.(*object)
				_, b := o.vals["secret_b64"].(secretText)
				_, x := o.vals["secret_hex"].(secretText)
				got = append(got, b || x)
			}
			if !slices.Equal(got, tc.masked) {
				t.Errorf("masked %v, want %v", got, tc.masked)
			}
			sameDecodeVault(t, tc.doc)
		})
	}
}

// TestPlainString: which plain scalars of base64 or hex characters
// yaml.v3 reads as strings (the masking may replace them by "xxxx").
func TestPlainString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"YW9r", true}, {"616f6b", true}, {"abc=", true}, {"/abc", true}, {"=", true},
		{"12", false}, {"+12", false}, {"0x1F", false}, {"0o17", false}, {"0b101", false},
		{"1e10", false}, {"1E+10", false}, {"12e", true}, {"1e+", true}, {"1ea", true}, {"+", false},
		{"true", false}, {"False", false}, {"NULL", false}, {"yes", true}, {"+abc", false},
	} {
		if got := plainString([]byte(tc.in)); got != tc.want {
			t.Errorf("plainString(%q) = %t, want %t", tc.in, got, tc.want)
		}
		var n yaml.Node
		if err := yaml.Unmarshal([]byte("v: "+tc.in), &n); err != nil {
			t.Fatal(err)
		}
		if tag := n.Content[0].Content[1].ShortTag(); tc.want && tag != "!!str" {
			t.Errorf("yaml.v3 reads %q as %s, not as a string", tc.in, tag)
		}
	}
}
