package keystore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestKeyNamePlainIdentifier: a key's name is shown by status, plan,
// peer-config and the fleet document, so a secret pasted into name: would
// be shown everywhere. A name that is not a plain identifier (1..64 of
// A-Za-z0-9._-, starting with a letter or digit, no run of 24 or more
// letters and digits without a separator, not the key's own secret) is
// refused, in the key file and in Vault alike, naming the key by its
// position and never echoing the value. It used to be accepted whenever
// it was 1..64 printable characters.
func TestKeyNamePlainIdentifier(t *testing.T) {
	sec := loadSecrets(t)
	// pasteDocs's key k1 has sec[0] as its secret.
	tests := []struct {
		name    string
		value   string
		refused bool
	}{
		{"date", "2026-10", false},
		{"demo key", "demo-1", false},
		{"short", "k1", false},
		{"dots and underscores", "core.v2_east", false},
		{"64 characters", strings.Repeat("ab-", 21) + "a", false},
		{"65 characters", strings.Repeat("ab-", 21) + "ab", true},
		{"space", "core key", true},
		{"leading dash", "-core", true},
		{"slash", "core/2026", true},
		{"another key's secret, base64", b64(sec[1]), true},
		{"another key's secret, unpadded base64", b64(sec[2]), true},
		{"another key's secret, hex", hexs(sec[1]), true},
		{"its own secret", sec[0], true},
		{"its own secret, base64", b64(sec[0]), true},
		{"its own secret, hex", hexs(sec[0]), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := json.Marshal(tc.value)
			yamlDoc, jsonDoc := pasteDocs(sec, "name", string(v), string(v))
			fileP, vaultP := pasteProblems(yamlDoc, jsonDoc)
			for _, d := range []struct {
				name     string
				problems []error
				source   string
			}{{"file", fileP, "file"}, {"vault", vaultP, "vault"}} {
				if !tc.refused {
					if len(d.problems) != 0 {
						t.Errorf("%s: name %q refused: %v", d.name, tc.value, d.problems)
					}
					continue
				}
				if len(d.problems) != 1 {
					t.Fatalf("%s: %d problems, want 1 (the name refused)", d.name, len(d.problems))
				}
				err := d.problems[0]
				noSecret(t, err.Error())
				var fe *FieldError
				if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("%s: %q (%T) is not a *FieldError wrapping ErrInvalid", d.name, err, err)
				}
				if placeKind(fe) != d.source || fe.Chain != "core" || fe.Key != "#1" || relField(fe) != "name" {
					t.Errorf("%s: at %q chain %q key %q field %q, want the %s, core, #1, name", d.name, fe.Pos, fe.Chain, fe.Key, fe.Field, d.source)
				}
				if strings.Contains(err.Error(), tc.value) {
					t.Errorf("%s: %q echoes the name", d.name, err)
				}
				if !strings.Contains(err.Error(), "plain identifier") {
					t.Errorf("%s: %q does not say what a name must be", d.name, err)
				}
			}
		})
	}
}

// TestSendLifetimeWithinAccept: a key sent while the peer does not accept
// it breaks the session, so a send lifetime that is not within the
// accept lifetime is refused, naming file, line, key, field and the fix.
// It used to be accepted.
func TestSendLifetimeWithinAccept(t *testing.T) {
	sec := loadSecrets(t)
	const (
		always = `always`
		oct    = `{start: "2026-10-01T00:00:00Z", end: "2026-11-01T00:00:00Z"}`
		octIn  = `{start: "2026-10-02T00:00:00Z", end: "2026-10-31T00:00:00Z"}`
		sepOct = `{start: "2026-09-30T00:00:00Z", end: "2026-10-31T00:00:00Z"}`
		octNov = `{start: "2026-10-02T00:00:00Z", end: "2026-11-02T00:00:00Z"}`
		fromO  = `{start: "2026-10-01T00:00:00Z"}`
	)
	tests := []struct {
		name         string
		send, accept string // "" leaves the field out
		refused      bool
	}{
		{"both absent", "", "", false},
		{"equal", oct, oct, false},
		{"send inside accept", octIn, oct, false},
		{"accept always", oct, always, false},
		{"accept absent", oct, "", false},
		{"open send inside open accept", `{start: "2026-10-02T00:00:00Z"}`, fromO, false},
		{"send starts before accept", sepOct, oct, true},
		{"send ends after accept", octNov, oct, true},
		{"send always, accept bounded", always, oct, true},
		{"send absent, accept bounded", "", oct, true},
		{"send open-ended, accept ends", fromO, oct, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			extra := "      - name: k2\n        send_id: 5\n        recv_id: 6\n        algorithm: hmac(sha256)\n" +
				fmt.Sprintf("        secret_b64: %q\n", b64(sec[1]))
			if tc.send != "" {
				extra += "        send_lifetime: " + tc.send + "\n"
			}
			if tc.accept != "" {
				extra += "        accept_lifetime: " + tc.accept + "\n"
			}
			s, err := DecodeFile(pastePath, []byte(chainYAML(sec, extra)))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Zero()
			rej := s.Rejected()
			if !tc.refused {
				if len(rej) != 0 {
					t.Errorf("refused: %v", rej)
				}
				return
			}
			if len(rej) != 1 {
				t.Fatalf("%d rejected keys %v, want k2's send_lifetime refused", len(rej), rej)
			}
			msg := rej[0].Error()
			noSecret(t, msg)
			var fe *FieldError
			if !errors.As(rej[0], &fe) || !errors.Is(rej[0], ErrInvalid) {
				t.Fatalf("%q (%T) is not a *FieldError wrapping ErrInvalid", msg, rej[0])
			}
			// k2 starts at line 10 of chainYAML; send_lifetime is on line 15.
			line := 15
			if tc.send == "" {
				line = 10
			}
			if fe.File != pastePath || fe.Line != line || fe.Key != "k2" || fe.Field != "chains.core.keys[1].send_lifetime" {
				t.Errorf("at %q key %q field %q, want %s:%d, k2, chains.core.keys[1].send_lifetime", fe.Pos, fe.Key, fe.Field, pastePath, line)
			}
			if !strings.Contains(msg, "within accept_lifetime") || !strings.Contains(msg, "accept_lifetime") {
				t.Errorf("%q does not say the fix", msg)
			}
		})
	}
}
