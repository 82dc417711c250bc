package peerconfig

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// junosTokens splits a Junos CLI line into its words, a double-quoted
// string being one word (quotes kept).
func junosTokens(line string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, c := range line {
		switch {
		case c == '"':
			quoted = !quoted
			cur.WriteRune(c)
		case (c == ' ' || c == '\t') && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(c)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// junosSecretLoads reports whether line is a Junos `set` command that sets
// a key's secret: `set ... secret VALUE` with VALUE one word (a quoted
// string or a word without spaces), which Junos takes as the secret.
func junosSecretLoads(line string) bool {
	w := junosTokens(line)
	if len(w) < 2 || w[0] != "set" {
		return false
	}
	for i, x := range w {
		if x == "secret" {
			return i == len(w)-2
		}
	}
	return false
}

// TestPlaceholderDoesNotLoad: a secret that is not rendered is a line the
// target refuses to load, never a value it would take as the secret. The
// Junos placeholder used to be a quoted string (`secret "<secret:
// file:...>"`), which Junos loads as the secret itself. The rendering with
// secrets is the control: its secret lines do load.
func TestPlaceholderDoesNotLoad(t *testing.T) {
	_, l := fixture(t)
	for _, tc := range []struct {
		target      Target
		withSecrets bool
		loads       func(line string) bool
		wantLoading bool // the secret lines load
	}{
		{Junos, false, junosSecretLoads, false},
		{Junos, true, junosSecretLoads, true},
	} {
		var out bytes.Buffer
		if _, err := Render(&out, tc.target, l, Options{At: at, WithSecrets: tc.withSecrets}); err != nil {
			t.Fatal(err)
		}
		secretLines := 0
		for _, line := range strings.Split(out.String(), "\n") {
			if !strings.Contains(line, " secret ") || strings.HasPrefix(line, "#") {
				continue
			}
			secretLines++
			if got := tc.loads(line); got != tc.wantLoading {
				t.Errorf("%s with secrets %t: %q loads as a secret: %t, want %t", tc.target, tc.withSecrets, line, got, tc.wantLoading)
			}
			if !tc.withSecrets && (!strings.HasPrefix(line, secretNotRendered) || !strings.Contains(line, "--with-secrets")) {
				t.Errorf("%s: the placeholder line %q does not say the secret is not rendered and how to render it", tc.target, line)
			}
		}
		if secretLines == 0 {
			t.Errorf("%s with secrets %t: no secret line:\n%s", tc.target, tc.withSecrets, out.String())
		}
	}
}

// TestNothingSwitchedOnWithoutKeys: when a target can take none of the
// chain's keys, the rendering is refused for the whole chain and holds no
// configuration at all: comments only. It used to switch TCP-AO on for the
// neighbor with an empty key chain (Junos authentication-algorithm ao,
// IOS-XR's ao statement with include-tcp-options disable where the keys
// include them, EOS's empty shared-secret profile).
func TestNothingSwitchedOnWithoutKeys(t *testing.T) {
	_, base := fixture(t)
	for _, target := range []Target{Junos, IOSXR, EOS} {
		t.Run(string(target), func(t *testing.T) {
			l := base
			l.Keys = nil
			for _, k := range base.Keys {
				k.Algorithm = "hmac(sha512)" // none of these targets has it
				k.IncludeTCPOptions = true
				l.Keys = append(l.Keys, k)
			}
			var out bytes.Buffer
			refused, err := Render(&out, target, l, Options{At: time.Date(2026, 10, 15, 0, 0, 0, 0, time.UTC)})
			if err != nil {
				t.Fatal(err)
			}
			chain := false
			for _, r := range refused {
				chain = chain || r.Key == ""
			}
			if !chain {
				t.Errorf("refusals %+v: none for the chain", refused)
			}
			c := "#"
			if target != Junos {
				c = "!"
			}
			for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
				if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, c) {
					t.Errorf("configuration line %q in a rendering with no key:\n%s", line, out.String())
				}
			}
		})
	}
}
