package keystore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestUnknownFieldNameNotEchoed writes a test secret where a field name
// goes, at each level of a key file and a Vault chain (a YAML flow mapping
// `md5: {PASSWORD}` makes the password a key): the problem is an unknown
// field that names the position (line and column in a file), the path up
// to the last known field and the fields allowed there, and never the
// name. The name used to be shown whenever it looked like a field name,
// which a password of letters, digits and '-' does.
func TestUnknownFieldNameNotEchoed(t *testing.T) {
	sec := loadSecrets(t)
	good := "        name: k1\n        send_id: 1\n        recv_id: 2\n        algorithm: hmac(sha256)\n        secret_b64: " + b64(sec[0]) + "\n"
	goodJSON := fmt.Sprintf(`"name": "k1", "send_id": 1, "recv_id": 2, "algorithm": "hmac(sha256)", "secret_b64": %q`, b64(sec[0]))
	for ni, name := range []string{sec[1], sec[4], "colour"} {
		for _, tc := range []struct {
			where   string
			yaml    string // the key file; NAME is the unknown field's name
			json    string // the Vault chain; "" for a file-only level
			pos     string // "line:col" of the name in the file
			chain   string
			key     string
			field   string
			allowed string
		}{
			{"top", "NAME: 1\nchains:\n  core:\n    keys: []\n", "", "1:1", "", "", "", "chains"},
			{"chain", "chains:\n  core:\n    peers: [192.0.2.1]\n    NAME: 1\n    keys:\n      -\n" + good,
				`{"peers": ["192.0.2.1"], "NAME": 1, "keys": [{` + goodJSON + `}]}`, "4:5", "core", "", "", "peers, vrf, keys, md5"},
			{"key", "chains:\n  core:\n    keys:\n      -\n" + good + "        NAME: 1\n",
				`{"keys": [{` + goodJSON + `, "NAME": 1}]}`, "10:9", "core", "k1", "", "name, send_id, recv_id"},
			{"md5 flow mapping", "chains:\n  core:\n    peers: [192.0.2.1]\n    md5: {NAME}\n",
				`{"peers": ["192.0.2.1"], "md5": {"NAME": null}}`, "4:11", "core", "", "md5", "secret_b64, secret_hex, revoked"},
			{"lifetime", "chains:\n  core:\n    peers: [192.0.2.1]\n    keys:\n      -\n" + good + "        send_lifetime: {NAME: 1}\n",
				`{"peers": ["192.0.2.1"], "keys": [{` + goodJSON + `, "send_lifetime": {"NAME": 1}}]}`, "11:25", "core", "k1", "send_lifetime", "start, end, duration"},
		} {
			t.Run(fmt.Sprintf("%s/%d", tc.where, ni), func(t *testing.T) {
				yamlDoc := []byte(strings.ReplaceAll(tc.yaml, "NAME", name))
				var problems []error
				s, err := DecodeFile(pastePath, yamlDoc)
				if err != nil {
					problems = append(problems, err)
				} else {
					problems = append(problems, s.Rejected()...)
					s.Zero()
				}
				if tc.json != "" {
					c, err := DecodeVaultChain(pasteVault, "core", []byte(strings.ReplaceAll(tc.json, "NAME", name)))
					if err != nil {
						problems = append(problems, err)
					} else {
						problems = append(problems, c.Rejected...)
						c.Zero()
					}
				}
				if want := 1 + map[bool]int{true: 1}[tc.json != ""]; len(problems) != want {
					t.Fatalf("%d problems %q, want %d", len(problems), problems, want)
				}
				for i, err := range problems {
					src := pastePath + ":" + tc.pos
					if i == 1 {
						src = pasteVault
					}
					noSecret(t, err.Error())
					var fe *FieldError
					if !errors.As(err, &fe) || !errors.Is(err, ErrUnknownField) {
						t.Fatalf("%q (%T) is not a *FieldError wrapping ErrUnknownField", err, err)
					}
					if fe.Pos.String() != src || fe.Chain != tc.chain || fe.Key != tc.key || relField(fe) != tc.field {
						t.Errorf("at %q chain %q key %q field %q, want %q %q %q %q",
							fe.Pos, fe.Chain, fe.Key, fe.Field, src, tc.chain, tc.key, tc.field)
					}
					if strings.Contains(err.Error(), name) {
						t.Errorf("%q shows the unknown field's name", err)
					}
					if !strings.Contains(err.Error(), tc.allowed) {
						t.Errorf("%q does not name the fields allowed (%s)", err, tc.allowed)
					}
				}
			})
		}
	}
}

// TestDuplicateKeyNameNotEchoed: a mapping key given twice is named only
// when it is one of the schema's fields; a secret's text given twice as a
// key (`md5: {PASSWORD, PASSWORD}`) is not. It used to be shown whenever
// it looked like a field name.
func TestDuplicateKeyNameNotEchoed(t *testing.T) {
	sec := loadSecrets(t)
	for _, tc := range []struct {
		name, doc, field string
	}{
		{"secret twice", "chains:\n  core:\n    peers: [192.0.2.1]\n    md5: {" + sec[2] + ", " + sec[2] + "}\n", "md5"},
		{"field twice", "chains:\n  core:\n    peers: [192.0.2.1]\n    peers: [192.0.2.1]\n    keys: []\n", "peers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeFile(pastePath, []byte(tc.doc))
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrDuplicate) {
				t.Fatalf("%v: want a *FieldError wrapping ErrDuplicate", err != nil)
			}
			noSecret(t, err.Error())
			if fe.File != pastePath || fe.Line != 4 || relField(fe) != tc.field {
				t.Errorf("at %q field %q, want %s:4 %q", fe.Pos, fe.Field, pastePath, tc.field)
			}
		})
	}
}
