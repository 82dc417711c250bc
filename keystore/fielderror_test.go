package keystore_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// TestFieldErrorRendering: every problem, whichever file it is in, renders
// as FILE:LINE:COL: FIELD: PROBLEM (the parts that are unknown left out),
// the chain and key it concerns in the problem, the hint after it; and
// Report gives the same parts for JSON. Key source problems used to render
// as "file PATH:LINE: chain ...: field F: ..." and Vault's as "vault
// PATH: ...".
func TestFieldErrorRendering(t *testing.T) {
	bad := fmt.Errorf("%w: want debug, info, warn or error", keystore.ErrInvalid)
	tests := []struct {
		name string
		err  *keystore.FieldError
		want string
		rep  keystore.Report
	}{
		{"config: file, line, column, field",
			&keystore.FieldError{Pos: keystore.Pos{File: "aokeyd.yaml", Line: 9, Column: 10}, Field: "log.level", Err: bad},
			`aokeyd.yaml:9:10: log.level: invalid value: want debug, info, warn or error`,
			keystore.Report{File: "aokeyd.yaml", Line: 9, Column: 10, Field: "log.level", Problem: "invalid value: want debug, info, warn or error"}},
		{"policy: line and column",
			&keystore.FieldError{Pos: keystore.Pos{File: "p.yaml", Line: 23, Column: 16}, Field: "peers[2].key_chain",
				Err: fmt.Errorf("%w: %q is not defined under key_chains", policy.ErrUnknownChain, "cor")},
			`p.yaml:23:16: peers[2].key_chain: unknown key chain: "cor" is not defined under key_chains`,
			keystore.Report{File: "p.yaml", Line: 23, Column: 16, Field: "peers[2].key_chain", Problem: `unknown key chain: "cor" is not defined under key_chains`}},
		{"policy: a snapshot key with its source",
			&keystore.FieldError{Pos: keystore.Pos{File: "p.yaml", Line: 2, Column: 5}, Field: "key_chains[0]",
				Chain: "core", Key: "long", Source: "/etc/aokeyd/keys.yaml:14:9", Err: policy.ErrKeyLength},
			`p.yaml:2:5: key_chains[0]: chain "core" key "long" (/etc/aokeyd/keys.yaml:14:9): bad key length`,
			keystore.Report{File: "p.yaml", Line: 2, Column: 5, Field: "key_chains[0]", Problem: `chain "core" key "long" (/etc/aokeyd/keys.yaml:14:9): bad key length`}},
		{"file only",
			&keystore.FieldError{Pos: keystore.Pos{File: "aokeyd.yaml"}, Field: "control.group", Err: keystore.ErrInvalid},
			`aokeyd.yaml: control.group: invalid value`,
			keystore.Report{File: "aokeyd.yaml", Field: "control.group", Problem: "invalid value"}},
		{"key file: the path names the chain, the problem the key",
			&keystore.FieldError{Pos: keystore.Pos{File: "/etc/aokeyd/keys.yaml", Line: 14, Column: 18}, Chain: "core", Key: "2026-11",
				Field: "chains.core.keys[1].send_id", Err: fmt.Errorf("%w: send_id already used", keystore.ErrDuplicate)},
			`/etc/aokeyd/keys.yaml:14:18: chains.core.keys[1].send_id: key "2026-11": duplicate: send_id already used`,
			keystore.Report{File: "/etc/aokeyd/keys.yaml", Line: 14, Column: 18, Field: "chains.core.keys[1].send_id",
				Problem: `key "2026-11": duplicate: send_id already used`}},
		{"vault: the chain's place, no line; a name with a space is quoted",
			&keystore.FieldError{Pos: keystore.Pos{File: "vault:secret/aokeyd/chains/core@v3"}, Chain: "core", Key: "old key",
				Field: "keys[0].maclen", Err: keystore.ErrInvalid},
			`vault:secret/aokeyd/chains/core@v3: keys[0].maclen: chain "core" key "old key": invalid value`,
			keystore.Report{File: "vault:secret/aokeyd/chains/core@v3", Field: "keys[0].maclen", Problem: `chain "core" key "old key": invalid value`}},
		{"whole file",
			&keystore.FieldError{Pos: keystore.Pos{File: "k.yaml"}, Err: fmt.Errorf("empty key file: %w", keystore.ErrNoChains)},
			`k.yaml: empty key file: keystore: source holds no chains`,
			keystore.Report{File: "k.yaml", Problem: "empty key file: keystore: source holds no chains"}},
		{"with what to do",
			&keystore.FieldError{Pos: keystore.Pos{File: "k.yaml"}, Err: keystore.ErrInsecureFile, Hint: "chmod 600 k.yaml"},
			`k.yaml: the key file is readable or writable by group or others; chmod 600 k.yaml`,
			keystore.Report{File: "k.yaml", Problem: "the key file is readable or writable by group or others", Hint: "chmod 600 k.yaml"}},
		{"key without chain, no place",
			&keystore.FieldError{Key: "#2", Field: "name", Err: keystore.ErrMissingField},
			`name: key "#2": missing required field`,
			keystore.Report{Field: "name", Problem: `key "#2": missing required field`}},
		{"no place at all", &keystore.FieldError{Err: keystore.ErrSyntax}, `syntax error`, keystore.Report{Problem: "syntax error"}},
		{"no reason", &keystore.FieldError{Pos: keystore.Pos{File: "k.yaml"}}, `k.yaml: unknown problem`,
			keystore.Report{File: "k.yaml", Problem: "unknown problem"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() =\n%s\nwant\n%s", got, tt.want)
			}
			if got := keystore.ReportOf(tt.err); got != tt.rep {
				t.Errorf("Report =\n%+v\nwant\n%+v", got, tt.rep)
			}
			if got := tt.rep.String(); got != tt.want {
				t.Errorf("Report.String() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	list := keystore.FieldErrors{
		{Pos: keystore.Pos{File: "a.yaml", Line: 1}, Err: keystore.ErrSyntax},
		{Pos: keystore.Pos{File: "a.yaml", Line: 3, Column: 2}, Field: "x", Err: keystore.ErrUnknownField},
	}
	if got, want := list.Error(), "a.yaml:1: syntax error\na.yaml:3:2: x: unknown field"; got != want {
		t.Errorf("a list renders\n%s\nwant one a line\n%s", got, want)
	}
	if got := keystore.ReportOf(errors.New("plain")); got != (keystore.Report{Problem: "plain"}) {
		t.Errorf("ReportOf(a plain error) = %+v, want its text as the problem", got)
	}
	if err := (keystore.FieldErrors{}).Err(); err != nil {
		t.Errorf("empty FieldErrors.Err() = %v, want nil", err)
	}
}

// TestFieldErrorThroughEachDecoder checks what a caller outside the module
// relies on: every decoder's problems are *keystore.FieldError (policy's
// Problem is the same type), the shared sentinels classify them under every
// package's name for them, and the message names the place but never the
// key bytes or their length.
func TestFieldErrorThroughEachDecoder(t *testing.T) {
	// 81 bytes: one more than TCP-AO allows, so the length matters.
	secret := strings.Repeat("s3cr3t-", 12)[:81]
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	key := func(fields ...string) []byte {
		return []byte("chains:\n  core:\n    peers: [192.0.2.1]\n    keys:\n      - name: k1\n        " +
			strings.Join(fields, "\n        ") + "\n")
	}
	// firstProblem is the first problem a decoder reported, whether it
	// failed the whole input or only rejected a key.
	keyFile := func(data []byte) func() error {
		return func() error {
			s, err := keystore.DecodeFile("/etc/aokeyd/keys.yaml", data)
			if err != nil {
				return err
			}
			defer s.Zero()
			if r := s.Rejected(); len(r) > 0 {
				return r[0]
			}
			return nil
		}
	}
	const pol = "version: 1\nkey_chains:\n  - name: core\n    keys: [{name: k1}]\npeers:\n  - neighbor: 192.0.2.1\n    key_chain: core\n"
	policyErr := func(data string) func() error {
		return func() error { _, err := policy.Parse("p.yaml", []byte(data)); return err }
	}
	const cfg = "key_source:\n  type: file\n  file: {path: k.yaml}\npolicy: {path: p.yaml}\n"
	configErr := func(data string) func() error {
		return func() error { _, err := config.Parse("aokeyd.yaml", []byte(data)); return err }
	}
	tests := []struct {
		name      string
		decode    func() error
		sentinels []error // all of them must match
		want      []string
	}{
		{"keystore: key too long", keyFile(key("send_id: 1", "recv_id: 1", "algorithm: sha1", "secret_b64: "+b64)),
			[]error{keystore.ErrInvalid, policy.ErrInvalid},
			[]string{"/etc/aokeyd/keys.yaml:9:21: chains.core.keys[0].secret_b64: ", `key "k1"`}},
		{"keystore: missing field", keyFile(key("recv_id: 1", "algorithm: sha1", "secret_b64: "+b64)),
			[]error{keystore.ErrMissingField},
			[]string{"keys.yaml:5:9: chains.core.keys[0].send_id: ", `key "k1"`, "missing required field"}},
		{"keystore: unknown field", keyFile(key("send_id: 1", "recv_id: 1", "algorithm: sha1", "secret_b64: "+b64, "colour: blue")),
			[]error{keystore.ErrUnknownField},
			[]string{"keys.yaml:10:9", "unknown field (its name is not shown); allowed here: name"}},
		{"keystore: duplicate field", keyFile(key("send_id: 1", "send_id: 2")),
			[]error{keystore.ErrDuplicate, policy.ErrDuplicate},
			[]string{"keys.yaml:7:9: chains.core.keys[0].send_id: ", "duplicate"}},
		{"keystore: YAML syntax", keyFile([]byte("chains:\n  core: [\n")),
			[]error{keystore.ErrSyntax, policy.ErrSyntax},
			[]string{"/etc/aokeyd/keys.yaml:2: syntax error"}},
		{"keystore: no chains", keyFile([]byte("chains: {}\n")),
			[]error{keystore.ErrNoChains},
			[]string{"keys.yaml:1"}},
		{"keystore: vault JSON", func() error {
			_, err := keystore.DecodeVaultChain("vault:secret/aokeyd/chains/core@v3", "core", []byte(`{"keys": [`))
			return err
		}, []error{keystore.ErrSyntax},
			[]string{"vault:secret/aokeyd/chains/core@v3: ", `chain "core"`}},
		{"policy: invalid value", policyErr(pol + "safety:\n  on_switch_timeout: give-up\n"),
			[]error{policy.ErrInvalid, keystore.ErrInvalid},
			[]string{"p.yaml:9:22", "safety.on_switch_timeout"}},
		{"policy: duplicate", policyErr(strings.Replace(pol, "[{name: k1}]", "[{name: k1}, {name: k1}]", 1)),
			[]error{policy.ErrDuplicate, keystore.ErrDuplicate},
			[]string{"p.yaml:4", "key_chains[0].keys[1].name"}},
		{"policy: unknown field", policyErr(pol + "peer: []\n"),
			[]error{policy.ErrUnknownField, keystore.ErrUnknownField},
			[]string{"p.yaml:8:1", "unknown field (its name is not shown) in policy; allowed: version"}},
		{"policy: duplicate field", policyErr(pol + "version: 1\n"),
			[]error{policy.ErrDuplicate, keystore.ErrDuplicate},
			[]string{"p.yaml:8", `mapping key "version" already defined at line 1`}},
		{"policy: syntax", policyErr(pol + "defaults:\n  accept_tolerance: soon\n"),
			[]error{policy.ErrSyntax, keystore.ErrSyntax},
			[]string{"p.yaml:9", `"soon"`}},
		{"policy: its own reason", policyErr(strings.Replace(pol, "key_chain: core", "key_chain: cor", 1)),
			[]error{policy.ErrUnknownChain},
			[]string{"p.yaml:7", "peers[0].key_chain"}},
		{"config: missing field", configErr("key_source:\n  type: file\n  file: {path: k.yaml}\n"),
			[]error{keystore.ErrMissingField},
			[]string{"aokeyd.yaml:1", "policy.path"}},
		{"config: invalid value", configErr(cfg + "log:\n  level: loud\n"),
			[]error{keystore.ErrInvalid, policy.ErrInvalid},
			[]string{"aokeyd.yaml:6", "log.level"}},
		{"config: unknown field", configErr(cfg + "log:\n  colour: true\n"),
			[]error{keystore.ErrUnknownField, policy.ErrUnknownField},
			[]string{"aokeyd.yaml:6:3", "log: unknown field (its name is not shown) in log; allowed: format, level"}},
		{"config: duplicate field", configErr(cfg + "policy: {path: q.yaml}\n"),
			[]error{keystore.ErrDuplicate},
			[]string{"aokeyd.yaml:5", `mapping key "policy" already defined at line 4`}},
		{"config: syntax", configErr(strings.Replace(cfg, "type: file", "type: file\n  refresh: soon", 1)),
			[]error{keystore.ErrSyntax},
			[]string{"aokeyd.yaml:3", "not a duration"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.decode()
			if err == nil {
				t.Fatal("no error")
			}
			var fe *keystore.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%q (%T) is not a *keystore.FieldError", err, err)
			}
			var pr *policy.Problem
			if !errors.As(err, &pr) || pr != fe {
				t.Errorf("errors.As to *policy.Problem gave %v, want the same %v", pr, fe)
			}
			msg := fe.Error()
			for _, s := range tt.sentinels {
				if !errors.Is(fe, s) {
					t.Errorf("%q does not wrap %q", msg, s)
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not name %q", msg, w)
				}
			}
			for _, leak := range []string{secret[:16], b64[:16], strconv.Itoa(len(secret))} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("%q shows the key (%q)", err, leak)
				}
			}
		})
	}
}

// A caller classifies a decoding problem with errors.Is and reads its place
// with errors.As, whichever decoder (key source, policy, config) found it.
func ExampleFieldError() {
	_, err := keystore.DecodeFile("/etc/aokeyd/keys.yaml", []byte("chains:\n  core:\n    keys: []\n    peer: [192.0.2.1]\n"))
	var fe *keystore.FieldError
	if errors.As(err, &fe) && errors.Is(err, keystore.ErrUnknownField) {
		fmt.Printf("chain %s: fix or remove the field at %s (in %s)\n", fe.Chain, fe.Pos, fe.Field)
	}
	fmt.Println(err)
	// Output:
	// chain core: fix or remove the field at /etc/aokeyd/keys.yaml:4:5 (in chains.core)
	// /etc/aokeyd/keys.yaml:4:5: chains.core: unknown field (its name is not shown); allowed here: peers, vrf, keys, md5
}
