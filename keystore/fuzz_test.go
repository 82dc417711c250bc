package keystore

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to both decoders — the YAML key file and
// the Vault KV v2 read response — and checks that they never panic and that
// no error message contains a secret of the input, that every problem
// is a *FieldError wrapping one of the sentinels, and that keeping the
// secrets' text out of the YAML and JSON decoders (see secretText) changes
// nothing of what the key file and a chain document decode to.
func FuzzDecode(f *testing.F) {
	sec := loadSecrets(f)
	f.Add([]byte(chainYAML(sec, "")))
	f.Add([]byte(chainYAML(sec, fmt.Sprintf("      - {name: b, send_id: 300, recv_id: 1, algorithm: sha1, secret_hex: %q}\n", hexs(sec[1])+"zz"))))
	f.Add(DefaultKeyFile())
	doc := chainJSON(f, []string{"192.0.2.0/24"}, key("k", 1, 2, sec[2]), key("x", 1, 3, sec[3]).with("secret_b64", sec[3]))
	env, _ := json.Marshal(map[string]any{"data": map[string]any{"data": json.RawMessage(doc), "metadata": map[string]any{"version": 3}}})
	f.Add(env)
	f.Add([]byte(`{"data":{"data":{"keys":[{"name":"a","secret_hex":"` + hexs(sec[4]) + `\u0001"}]},"metadata":{"version":1}}}`))
	f.Add(doc)
	// The ways of writing a secret that the masking must tell apart (see
	// TestSecretTextMasking).
	for _, line := range []string{`"secret_b64": '%s'`, "secret_b64: %s # c", "secret_b64: |\n          %s", "secret_b64: &a \"%s\""} {
		f.Add([]byte(chainYAML(sec, "      - name: m\n        send_id: 7\n        recv_id: 8\n        algorithm: sha1\n        "+
			fmt.Sprintf(line, b64(sec[5]))+"\n")))
	}
	f.Add([]byte(strings.ReplaceAll(chainYAML(sec, "        vrf: |\n          secret_b64: "+b64(sec[2])+"\n"), "\n", "\r\n")))
	f.Add([]byte(chainYAML(sec, fmt.Sprintf("      - {name: c, send_id: 5, recv_id: 6, algorithm: sha1, secret_b64: '%s'}\n# secret_hex: %s\n", b64(sec[1]), hexs(sec[2])))))
	f.Fuzz(func(t *testing.T, data []byte) {
		var texts []string
		// Every problem is a *FieldError wrapping a known sentinel, so
		// callers can classify it without reading its text.
		add := func(err error) {
			t.Helper()
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("problem %q (%T) is not a *FieldError", err, err)
			}
			if !slices.ContainsFunc(sentinels, func(s error) bool { return errors.Is(err, s) }) {
				t.Fatalf("problem %q wraps no sentinel", err)
			}
			texts = append(texts, err.Error())
		}
		if s, err := DecodeFile(fuzzFile, data); err != nil {
			add(err)
		} else {
			for _, e := range s.Rejected() {
				add(e)
			}
			_ = fmt.Sprintf("%v %+v %#v", s, s, s)
			s.Zero()
		}
		if c, err := DecodeVaultResponse(fuzzVault, "fuzz", data); err != nil {
			add(err)
		} else {
			for _, e := range c.Rejected {
				add(e)
			}
			c.Zero()
		}
		// Masking the secrets' text changes nothing of what decodes.
		sameDecodeFile(t, data)
		sameDecodeVault(t, data)
		for _, s := range secretValues(data) {
			if bytes.Count(data, []byte(s)) > 1 {
				continue // the same text also sits in a non-secret field
			}
			if strings.Contains(fuzzWhere, s) {
				continue // the test's own location names, which every message carries
			}
			for _, txt := range texts {
				if strings.Contains(txt, s) {
					t.Fatalf("error %q contains the secret value %q", txt, s)
				}
			}
		}
	})
}

// The locations FuzzDecode decodes under. Every message names them, so a
// secret whose text is part of one (the input "secret_hex: 736563726574"
// decodes to "secret", as in "vault secret/fuzz") proves nothing.
const (
	fuzzFile  = "fuzz.yaml"
	fuzzVault = "vault secret/fuzz"
	fuzzWhere = fuzzFile + " " + fuzzVault
)

// sentinels are what a decoding problem may wrap.
var sentinels = []error{ErrSyntax, ErrMissingField, ErrInvalid, ErrDuplicate, ErrUnknownField, ErrNoChains}

var secretFields = []*regexp.Regexp{
	regexp.MustCompile(`(?m)(?:^|[\s{,])secret_(?:b64|hex):\s+"?([^"\s,}\]]{6,})`),
	regexp.MustCompile(`"secret_(?:b64|hex)"\s*:\s*"([^"]{6,})"`),
}

// secretValues extracts the values of secret fields (and their decodings)
// from raw input, roughly, for the fuzz check.
func secretValues(data []byte) []string {
	var out []string
	var ms [][][]byte
	for _, re := range secretFields {
		ms = append(ms, re.FindAllSubmatch(data, -1)...)
	}
	for _, m := range ms {
		v := string(m[1])
		out = append(out, v)
		if b, err := base64.StdEncoding.DecodeString(v); err == nil && len(b) >= 6 {
			out = append(out, string(b))
		}
		if b, err := hex.DecodeString(v); err == nil && len(b) >= 6 {
			out = append(out, string(b))
		}
	}
	return out
}
