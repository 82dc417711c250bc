package main

import (
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
)

func TestPeerConfig(t *testing.T) {
	// testdata's chain core: 2026-10 sends 10 and receives 110.
	secret := hex.EncodeToString([]byte("aokeyd-test-secret-alpha-7QvX"))
	tests := []struct {
		name   string
		args   []string
		code   int
		golden string
		stdout []string // substrings of stdout
		stderr []string // substrings of stderr
		not    []string // not in stdout
	}{
		{"bird", []string{"192.0.2.2", "--for", "bird", "--local", "192.0.2.1", "--at", "2026-10-15"}, exitOK, "peer-config-bird.golden", nil, nil, []string{secret}},
		{"yang", []string{"192.0.2.2", "--for", "yang", "--at", "2026-10-15"}, exitOK, "", []string{`"send-id": 110,`}, nil, []string{secret}},
		// A refusal prints nothing on stdout: half a configuration (an
		// empty key chain with TCP-AO switched on, an empty key list)
		// is not one to apply. The reasons go to stderr.
		{"junos refuses hmac(sha256)", []string{"192.0.2.2", "--for", "junos"}, exitInvalid, "",
			nil, []string{"aoctl peer-config: refused: junos: key 2026-10: Junos TCP-AO offers hmac-sha-1-96 and aes-128-cmac-96 only"}, nil},
		{"iosxr refuses hmac(sha256)", []string{"192.0.2.2", "--for", "iosxr", "--at", "2026-10-15"}, exitInvalid, "",
			nil, []string{"aoctl peer-config: refused: iosxr: key 2026-10:"}, nil},
		{"bird before any key", []string{"192.0.2.2", "--for", "bird", "--at", "2026-01-01"}, exitInvalid, "",
			nil, []string{"aoctl peer-config: refused: bird: no key is installed at 2026-01-01T00:00:00Z"}, nil},
		{"bird refusal with secrets", []string{"192.0.2.2", "--for", "bird", "--at", "2026-01-01", "--with-secrets"}, exitInvalid, "",
			nil, []string{"aoctl peer-config: refused: bird:"}, []string{secret}},
		{"with secrets warns", []string{"192.0.2.2", "--for", "aokeyd", "--with-secrets"}, exitOK, "",
			[]string{`secret_hex: "` + secret + `"`}, []string{"WARNING: --with-secrets"}, nil},
		{"unknown target", []string{"192.0.2.2", "--for", "frr"}, exitUsage, "", nil, []string{`unknown target "frr"`}, nil},
		{"no peer", []string{"--for", "bird"}, exitUsage, "", nil, []string{"name one PEER"}, nil},
		{"peer without binding", []string{"203.0.113.9", "--for", "bird"}, exitInvalid, "", nil, []string{"203.0.113.9"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"peer-config", "--config", "testdata/aokeyd.yaml"}, tt.args...)
			r := runAoctl(t, filepath.Join(t.TempDir(), "none.sock"), args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\n%s%s", r.code, tt.code, r.stdout, r.stderr)
			}
			if tt.golden != "" {
				golden(t, tt.golden, r.stdout)
			}
			if r.code != exitOK && r.stdout != "" {
				t.Errorf("exit %d with a configuration on stdout:\n%s", r.code, r.stdout)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
				}
			}
			for _, s := range tt.not {
				if strings.Contains(r.stdout, s) || strings.Contains(r.stderr, s) {
					t.Errorf("output holds %q", s)
				}
			}
		})
	}
}
