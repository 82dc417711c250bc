package keystore

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

func writeKeyFile(t *testing.T, dir, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, "keys.yaml")
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// goodYAML is a chain with one valid key plus an extra key body.
func chainYAML(sec testSecrets, extra string) string {
	return fmt.Sprintf(`chains:
  core:
    peers: [192.0.2.2, "2001:db8::/64"]
    keys:
      - name: good
        send_id: 1
        recv_id: 2
        algorithm: hmac(sha256)
        secret_b64: %q
%s`, b64(sec[0]), extra)
}

func TestDecodeFileRejectsBadKeys(t *testing.T) {
	sec := loadSecrets(t)
	bad := func(lines ...string) string {
		return "      - name: bad\n" + "        " + strings.Join(lines, "\n        ") + "\n"
	}
	base := []string{"send_id: 10", "recv_id: 20", "algorithm: hmac(sha1)"}
	withSecret := func(more ...string) []string {
		return append(append([]string{}, base...), append([]string{fmt.Sprintf("secret_b64: %q", b64(sec[1]))}, more...)...)
	}
	long := strings.Repeat(sec[2], 3) // 90 bytes
	tests := []struct {
		name, key, field, want string
	}{
		{"secret too long", bad(append(base, fmt.Sprintf("secret_hex: %q", hexs(long)))...), "secret_hex", "want 1..80 bytes"},
		{"secret not base64", bad(append(base, fmt.Sprintf("secret_b64: %q", sec[1]+"!"))...), "secret_b64", "not standard base64"},
		{"secret not hex", bad(append(base, fmt.Sprintf("secret_hex: %q", sec[1]))...), "secret_hex", "not hexadecimal"},
		{"both secrets", bad(append(base, fmt.Sprintf("secret_b64: %q", b64(sec[1])), fmt.Sprintf("secret_hex: %q", hexs(sec[1])))...), "secret_hex", "not both"},
		{"no secret", bad(base...), "secret_b64", "missing"},
		{"cmac wrong length", bad("send_id: 10", "recv_id: 20", "algorithm: cmac(aes128)", fmt.Sprintf("secret_b64: %q", b64(sec[1]))), "secret_b64", "cmac(aes128) wants exactly 16 bytes"},
		{"no algorithm", bad("send_id: 10", "recv_id: 20", fmt.Sprintf("secret_b64: %q", b64(sec[1]))), "algorithm", "missing"},
		{"peers an empty list", bad(withSecret("peers: []")...), "peers", "empty list"},
		{"unknown algorithm", bad("send_id: 10", "recv_id: 20", "algorithm: hmac(md5)", fmt.Sprintf("secret_b64: %q", b64(sec[1]))), "algorithm", "want one of"},
		{"send_id out of range", bad(append([]string{"send_id: 256", "recv_id: 20", "algorithm: sha1"}, fmt.Sprintf("secret_b64: %q", b64(sec[1])))...), "send_id", "0..255"},
		{"recv_id negative", bad(append([]string{"send_id: 1", "recv_id: -1", "algorithm: sha1"}, fmt.Sprintf("secret_b64: %q", b64(sec[1])))...), "recv_id", "0..255"},
		{"send_id duplicated", bad(append([]string{"send_id: 1", "recv_id: 20", "algorithm: sha1"}, fmt.Sprintf("secret_b64: %q", b64(sec[1])))...), "send_id", "already used by chain \"core\" key \"good\""},
		{"send_id duplicated for a covering prefix", bad(append([]string{"send_id: 1", "recv_id: 20", "algorithm: sha1", "peers: [192.0.2.0/24]"}, fmt.Sprintf("secret_b64: %q", b64(sec[1])))...), "send_id", "overlapping peer"},
		{"recv_id duplicated for a contained address", bad(append([]string{"send_id: 9", "recv_id: 2", "algorithm: sha1", "peers: [\"2001:db8::5\"]"}, fmt.Sprintf("secret_b64: %q", b64(sec[1])))...), "recv_id", "overlapping peer"},
		{"recv_id duplicated", bad(append([]string{"send_id: 9", "recv_id: 2", "algorithm: sha1"}, fmt.Sprintf("secret_b64: %q", b64(sec[1])))...), "recv_id", "already used"},
		{"lifetime unparsable", bad(withSecret("send_lifetime: {start: yesterday}")...), "send_lifetime.start", "not an RFC 3339 time"},
		{"lifetime end before start", bad(withSecret("accept_lifetime: {start: \"2026-12-01T00:00:00Z\", end: \"2026-11-01T00:00:00Z\"}")...), "accept_lifetime", "is not after start"},
		{"lifetime end and duration", bad(withSecret("send_lifetime: {start: \"2026-12-01T00:00:00Z\", end: \"2027-11-01T00:00:00Z\", duration: 1h}")...), "send_lifetime", "not both"},
		{"lifetime bad word", bad(withSecret("send_lifetime: never")...), "send_lifetime", "always"},
		{"peer host bits", bad(withSecret("peers: [192.0.2.1/24]")...), "peers[0]", "host bits set"},
		{"peer v6 host bits", bad(withSecret("peers: [\"2001:db8::1/64\"]")...), "peers[0]", "host bits set"},
		{"peer garbage", bad(withSecret("peers: [router-b]")...), "peers[0]", "not an IPv4 or IPv6 address"},
		{"maclen too big", bad(withSecret("maclen: 17")...), "maclen", "1..16"},
		{"unknown field", bad(withSecret("colour: blue")...), "", "unknown field (its name is not shown); allowed here: name, send_id"},
		{"tcp_options word", bad(withSecret("tcp_options: maybe")...), "tcp_options", "include or exclude"},
		{"revoked not bool", bad(withSecret("revoked: soon")...), "revoked", "true or false"},
		{"vrf name", bad(withSecret("vrf: \"a b\"")...), "vrf", "VRF device name"},
		{"duplicate name", "      - name: good\n        " + strings.Join(withSecret(), "\n        ") + "\n", "name", "another key of the chain"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := DecodeFile("/etc/aokeyd/keys.yaml", []byte(chainYAML(sec, tc.key)))
			if err != nil {
				noSecret(t, err.Error())
				t.Fatalf("whole file failed: %v", err)
			}
			defer s.Zero()
			c := s.Chains["core"]
			if len(c.Keys) != 1 || c.Keys[0].Name != "good" {
				t.Fatalf("want only key good to load, have %v", c.Keys)
			}
			if len(c.Rejected) != 1 {
				t.Fatalf("want 1 rejected key, have %d: %v", len(c.Rejected), c.Rejected)
			}
			msg := c.Rejected[0].Error()
			noSecret(t, msg)
			var fe *FieldError
			if !errors.As(c.Rejected[0], &fe) {
				t.Fatalf("rejection is %T, want *FieldError", c.Rejected[0])
			}
			for _, want := range []string{"/etc/aokeyd/keys.yaml:", ": " + strings.TrimSuffix("chains.core.keys[1]."+tc.field, ".") + ": ", tc.want} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q lacks %q", msg, want)
				}
			}
			if fe.Key == "" || (tc.name != "duplicate name" && fe.Key != "bad") {
				t.Errorf("error names key %q, want bad", fe.Key)
			}
		})
	}
}

func TestDecodeFileFields(t *testing.T) {
	sec := loadSecrets(t)
	body := fmt.Sprintf(`chains:
  core:
    peers: [192.0.2.2]
    vrf: blue
    keys:
      - name: "2026-11"
        send_id: 7
        recv_id: 70
        algorithm: cmac-aes128
        secret_hex: %q
        maclen: 16
        peers: ["2001:db8:1::/48", 198.51.100.0/24]
        tcp_options: exclude
        send_lifetime: {start: 2026-11-01T00:00:00Z, duration: 30d}
        accept_lifetime: {end: "2027-01-01T00:00:00Z"}
        revoked: true
      - name: plain
        send_id: 8
        recv_id: 80
        algorithm: hmac(sha1)
        secret_b64: %q
        send_lifetime: always
`, hexs(sec[3]), b64(sec[4]))
	s, err := DecodeFile("k.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Zero()
	c := s.Chains["core"]
	if len(c.Rejected) != 0 {
		t.Fatalf("rejected: %v", c.Rejected)
	}
	a, b := c.Keys[0], c.Keys[1]
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	checks := []struct {
		name string
		ok   bool
	}{
		{"a ids", a.SendID == 7 && a.RecvID == 70},
		{"a alg", a.Algorithm == tcpao.CMACAES128},
		{"a secret", a.Secret.Equal(tcpao.NewSecret([]byte(sec[3])))},
		{"a maclen", a.MACLen == 16},
		{"a peers override", len(a.Peers) == 2 && a.Peers[0] == netip.MustParsePrefix("2001:db8:1::/48")},
		{"a vrf inherited", a.VRF == "blue"},
		{"a options", !a.IncludeTCPOptions},
		{"a send lifetime", a.SendLifetime == Lifetime{Start: start, End: start.Add(30 * 24 * time.Hour)}},
		{"a accept lifetime", a.AcceptLifetime.Start.IsZero() && a.AcceptLifetime.End.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))},
		{"a revoked", a.Revoked && !a.ActiveSend(start.Add(time.Hour))},
		{"a source", a.Source == "file:k.yaml:6"},
		{"b peers inherited", len(b.Peers) == 1 && b.Peers[0] == netip.MustParsePrefix("192.0.2.2/32")},
		{"b defaults", b.MACLen == 12 && b.IncludeTCPOptions && b.SendLifetime.IsAlways() && b.AcceptLifetime.IsAlways()},
		{"b secret", b.Secret.Equal(tcpao.NewSecret([]byte(sec[4])))},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("%s: wrong (keys %v / %v)", ch.name, a, b)
		}
	}
	k := b.Key(b.Peers[0], 5)
	defer k.Secret.Zero()
	if err := k.Validate(); err != nil || k.IfIndex != 5 || k.ExcludeOptions || k.MACLen != 12 {
		t.Errorf("Key(): %v %v", k, err)
	}
	for _, v := range []string{fmt.Sprint(a), fmt.Sprintf("%+v", a), fmt.Sprintf("%#v", b), fmt.Sprint(s)} {
		noSecret(t, v)
	}
}

func TestDecodeFileStructureErrors(t *testing.T) {
	sec := loadSecrets(t)
	tests := []struct{ name, body, want string }{
		{"empty", "", "no chains"},
		{"no chains", "chains: {}\n", "no chains"},
		{"top-level unknown", "chainz: {}\n", "k.yaml:1:1: unknown field (its name is not shown); allowed here: chains"},
		{"syntax", "chains:\n  core: [\n", "k.yaml:2: syntax error: did not find expected node content"},
		{"syntax: YAML's punctuation is kept", "chains:\n  core: {keys: []\n", "k.yaml:1: syntax error: did not find expected ',' or '}'"},
		{"chain unknown field", "chains:\n  core:\n    keys: []\n    peer: [192.0.2.1]\n", `k.yaml:4:5: chains.core: unknown field (its name is not shown); allowed here: peers, vrf, keys, md5`},
		{"chain without keys", "chains:\n  core:\n    peers: [192.0.2.1]\n", "k.yaml:3:5: chains.core.keys: missing"},
		{"bad chain name", "chains:\n  \"a/b\":\n    keys: []\n", "chain name (not shown) must be"},
		{"duplicate field", fmt.Sprintf("chains:\n  core:\n    keys:\n      - name: x\n        secret_b64: %q\n        secret_b64: %q\n", b64(sec[0]), b64(sec[1])), "k.yaml:6:9: chains.core.keys[0].secret_b64: duplicate"},
		{"two documents", "chains: {}\n---\nchains: {}\n", "more than one YAML document"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := DecodeFile("k.yaml", []byte(tc.body))
			if err == nil {
				s.Zero()
				t.Fatal("no error")
			}
			noSecret(t, err.Error())
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
		})
	}
}

func TestFileSourcePermissions(t *testing.T) {
	sec := loadSecrets(t)
	for _, tc := range []struct {
		mode  os.FileMode
		allow bool
		ok    bool
	}{{0o600, false, true}, {0o400, false, true}, {0o640, false, false}, {0o604, false, false}, {0o620, false, false}, {0o644, true, true}} {
		t.Run(fmt.Sprintf("%04o-allow=%t", tc.mode, tc.allow), func(t *testing.T) {
			p := writeKeyFile(t, t.TempDir(), chainYAML(sec, ""), tc.mode)
			f, err := NewFile(FileOptions{Path: p, AllowGroupOtherAccess: tc.allow, Logger: logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			s, err := f.Read(context.Background())
			if tc.ok != (err == nil) {
				t.Fatalf("Read: err=%v, want ok=%t", err, tc.ok)
			}
			if err != nil {
				noSecret(t, err.Error())
				if !errors.Is(err, ErrInsecureFile) || !strings.Contains(err.Error(), p) {
					t.Errorf("error %q should name the file and wrap ErrInsecureFile", err)
				}
				return
			}
			s.Zero()
		})
	}
}

func TestFileSourceReloadAndCache(t *testing.T) { synctest.Test(t, testFileSourceReloadAndCache) }

func testFileSourceReloadAndCache(t *testing.T) {
	sec := loadSecrets(t)
	dir := t.TempDir()
	two := func(edgeSecret string) string {
		return chainYAML(sec, "") + fmt.Sprintf(`  edge:
    peers: [203.0.113.0/24]
    keys:
      - {name: e1, send_id: 5, recv_id: 6, algorithm: sha1, secret_b64: %q}
`, b64(edgeSecret))
	}
	p := writeKeyFile(t, dir, two(sec[1]), 0o600)
	f, err := NewFile(FileOptions{Path: p, Logger: logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := NewCache(f, CacheOptions{Logger: logger(t)})
	defer c.Close()
	ctx := context.Background()
	var gen uint64

	mustRefresh := func(wantChanged bool) {
		t.Helper()
		changed, err := c.Refresh(ctx)
		if err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		if changed != wantChanged {
			t.Fatalf("Refresh: changed=%t, want %t", changed, wantChanged)
		}
		if got, want := c.Generation(), gen+map[bool]uint64{true: 1}[wantChanged]; got != want {
			t.Fatalf("Generation after Refresh (changed=%t): %d, want %d", wantChanged, got, want)
		}
		gen = c.Generation()
	}
	mustRefresh(true)
	v1 := c.Status().Versions
	mustRefresh(false) // same file: nothing to re-apply

	// Change only the edge chain: only its version moves.
	writeKeyFile(t, dir, two(sec[2]), 0o600)
	mustRefresh(true)
	v2 := c.Status().Versions
	if v2["core"] != v1["core"] || v2["edge"] != v1["edge"]+1 {
		t.Fatalf("versions %v -> %v: want only edge to move", v1, v2)
	}
	snap := c.Current()
	if k, _ := snap.Chains["edge"].Key("e1"); !k.Secret.Equal(tcpao.NewSecret([]byte(sec[2]))) {
		t.Fatal("edge key not reloaded")
	}
	snap.Zero()

	// A broken file and then an unreadable one keep the last good snapshot.
	time.Sleep(time.Minute) // the bubble's clock
	writeKeyFile(t, dir, "chains: [\n", 0o600)
	if _, err := c.Refresh(ctx); err == nil {
		t.Fatal("broken file read without error")
	}
	writeKeyFile(t, dir, two(sec[2]), 0o644)
	time.Sleep(time.Minute) // the bubble's clock
	_, err = c.Refresh(ctx)
	if !errors.Is(err, ErrInsecureFile) {
		t.Fatalf("Refresh of a 0644 file: %v", err)
	}
	st := c.Status()
	noSecret(t, fmt.Sprint(st))
	if !st.HaveSnapshot || st.Age != 2*time.Minute || st.ConsecutiveFailures != 2 || !errors.Is(st.LastError, ErrInsecureFile) {
		t.Fatalf("status %+v: want the old snapshot, 2m old, 2 failures", st)
	}
	snap = c.Current()
	defer snap.Zero()
	if k, ok := snap.Chains["edge"].Key("e1"); !ok || !k.Secret.Equal(tcpao.NewSecret([]byte(sec[2]))) {
		t.Fatal("last good snapshot lost")
	}
}

func TestFileRevoke(t *testing.T) {
	sec := loadSecrets(t)
	body := "# operator comment kept\n" + chainYAML(sec, fmt.Sprintf("      - {name: other, send_id: 3, recv_id: 4, algorithm: sha1, secret_b64: %q}\n", b64(sec[1])))
	p := writeKeyFile(t, t.TempDir(), body, 0o600)
	f, _ := NewFile(FileOptions{Path: p, Logger: logger(t)})
	defer f.Close()
	ctx := context.Background()
	if err := f.Revoke(ctx, "core", "good"); err != nil {
		t.Fatal(err)
	}
	if err := f.Revoke(ctx, "core", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Revoke unknown key: %v", err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode after revoke %04o", st.Mode().Perm())
	}
	raw, _ := os.ReadFile(p)
	if !strings.Contains(string(raw), "operator comment kept") {
		t.Error("comment lost")
	}
	clear(raw)
	s, err := f.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Zero()
	g, _ := s.Chains["core"].Key("good")
	o, _ := s.Chains["core"].Key("other")
	if !g.Revoked || o.Revoked {
		t.Fatalf("revoked flags good=%t other=%t", g.Revoked, o.Revoked)
	}
}

func TestDefaultKeyFile(t *testing.T) {
	if !strings.Contains(string(DefaultKeyFile()), "DEMO ONLY") {
		t.Error("default key file is not labelled demo-only")
	}
	p := filepath.Join(t.TempDir(), "keys.yaml")
	if err := WriteDefaultKeyFile(p); err != nil {
		t.Fatal(err)
	}
	if err := WriteDefaultKeyFile(p); err == nil {
		t.Error("WriteDefaultKeyFile overwrote an existing file")
	}
	f, _ := NewFile(FileOptions{Path: p, Logger: logger(t)})
	s, err := f.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Zero()
	if len(s.Rejected()) != 0 || len(s.Chains["demo"].Keys) != 2 {
		t.Fatalf("default file: %v rejected %v", s.Chains, s.Rejected())
	}
}

func TestDuplicateIDsDisjointPeersAllowed(t *testing.T) {
	sec := loadSecrets(t)
	extra := fmt.Sprintf("      - {name: other-peer, send_id: 1, recv_id: 2, algorithm: sha1, peers: [198.51.100.0/24], secret_b64: %q}\n"+
		"      - {name: other-vrf, send_id: 1, recv_id: 2, algorithm: sha1, vrf: red, secret_b64: %q}\n"+
		"      - {name: revoked, send_id: 1, recv_id: 2, algorithm: sha1, revoked: true, secret_b64: %q}\n", b64(sec[1]), b64(sec[2]), b64(sec[3]))
	s, err := DecodeFile("k.yaml", []byte(chainYAML(sec, extra)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Zero()
	if c := s.Chains["core"]; len(c.Keys) != 4 || len(c.Rejected) != 0 {
		t.Fatalf("keys %v rejected %v", c.Keys, c.Rejected)
	}
}

// TestSecretLengthNotInErrors: a rejected secret's error names the field,
// but neither the secret's length nor that of its encoding.
func TestSecretLengthNotInErrors(t *testing.T) {
	tests := []struct {
		name, alg, field, value string
		lengths                 []int
	}{
		{"81-byte secret", "hmac(sha256)", "secret_b64", b64(strings.Repeat("x", 81)), []int{81, 108}},
		{"90-byte hex secret", "hmac(sha1)", "secret_hex", hexs(strings.Repeat("y", 90)), []int{90, 180}},
		{"15-byte cmac secret", "cmac(aes128)", "secret_b64", b64(strings.Repeat("z", 15)), []int{15, 20}},
		{"bad base64", "hmac(sha256)", "secret_b64", strings.Repeat("q", 37) + "!", []int{38, 37}},
		{"bad hex", "hmac(sha256)", "secret_hex", strings.Repeat("g", 43), []int{43}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := fmt.Sprintf("chains:\n  core:\n    peers: [192.0.2.2]\n    keys:\n      - name: k\n        send_id: 1\n        recv_id: 2\n        algorithm: %s\n        %s: %q\n", tc.alg, tc.field, tc.value)
			s, err := DecodeFile("keys.yaml", []byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Zero()
			rej := s.Chains["core"].Rejected
			if len(rej) != 1 {
				t.Fatalf("rejected %v, want one", rej)
			}
			var fe *FieldError
			if !errors.As(rej[0], &fe) || fe.Key != "k" || fe.Field != "chains.core.keys[0]."+tc.field {
				t.Fatalf("rejection %#v, want a FieldError naming key k and a secret field", rej[0])
			}
			msg := rej[0].Error()
			for _, n := range tc.lengths {
				if strings.Contains(msg, fmt.Sprint(n)) {
					t.Errorf("error %q states a length (%d)", msg, n)
				}
			}
		})
	}
}
