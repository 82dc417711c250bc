package peerconfig

import (
	"bytes"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/golden"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/tcpao"
)

// at is the instant the golden files are rendered for: 2026-10 and
// 2026-11 both installed, 2026-11 sent with; 2026-12 still to come.
var at = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// fixture is testdata's chain for peer 192.0.2.2: aokeyd's keys (as
// policy.ChainKeys returns them) and the far end's link.
func fixture(t *testing.T) ([]policy.ScheduledKey, Link) {
	t.Helper()
	data, err := os.ReadFile("testdata/keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := keystore.DecodeFile("testdata/keys.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	pdata, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Parse("testdata/policy.yaml", pdata)
	if err != nil {
		t.Fatal(err)
	}
	b, keys, err := pol.ChainKeys(snap, netip.MustParseAddr("192.0.2.2"), "")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := pol.Chain(b.KeyChain)
	return keys, Mirror("192.0.2.2", "192.0.2.1", b, c.AcceptTolerance, keys, "file testdata/keys.yaml")
}

func TestGolden(t *testing.T) {
	_, l := fixture(t)
	tests := []struct {
		target  Target
		refused []string // keys refused ("" for the chain)
	}{
		// 2026-11 excludes TCP options, which BIRD cannot.
		{BIRD, []string{"2026-11"}},
		// Junos has no hmac(sha256).
		{Junos, []string{"2026-11"}},
		// No documented 12-byte hmac(sha256) on IOS-XR.
		{IOSXR, []string{"2026-11"}},
		// One ID for both directions; no hmac(sha256).
		{EOS, []string{"2026-10", "2026-11", "2026-12", ""}},
		{GoBGP, []string{""}},
		{Aokeyd, nil},
		{YANG, nil},
	}
	for _, tt := range tests {
		t.Run(string(tt.target), func(t *testing.T) {
			var out bytes.Buffer
			refused, err := Render(&out, tt.target, l, Options{At: at})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, r := range refused {
				keys = append(keys, r.Key)
				if r.Reason == "" || r.Target != tt.target {
					t.Errorf("refusal without reason or of another target: %+v", r)
				}
			}
			if !slices.Equal(keys, tt.refused) {
				t.Errorf("refused %q, want %q", keys, tt.refused)
			}
			ext := ".golden"
			golden.Check(t, "testdata/"+string(tt.target)+ext, out.String())
		})
	}
}

// TestIDsSwapped fails if the far end's keys are not the mirror image of
// aokeyd's: send-id and recv-id swapped, the rest equal (keystore's own
// mirror check), and each target spells the far end's IDs.
func TestIDsSwapped(t *testing.T) {
	keys, l := fixture(t)
	if len(keys) != 3 || len(l.Keys) != 3 {
		t.Fatalf("fixture has %d keys, far end %d; want 3", len(keys), len(l.Keys))
	}
	for i, k := range keys {
		if err := keystore.CheckMirror(k.MKT, l.Keys[i].MKT(k.MKT.Chain)); err != nil {
			t.Errorf("far end of %s is not its mirror image: %v", k.MKT.Name, err)
		}
	}
	// aokeyd's 2026-10 sends 10 and receives 110: the far end sends 110.
	want := map[Target]string{
		BIRD:   "send id 110; recv id 10;",
		Junos:  "key 0 ao-attribute send-id 110\n",
		Aokeyd: "send_id: 110\n        recv_id: 10\n",
		GoBGP:  "send_id: 110\n        recv_id: 10\n",
		YANG:   "\"send-id\": 110,\n                \"recv-id\": 10,",
	}
	for target, w := range want {
		var out bytes.Buffer
		// Rendered while 2026-10 is the key sent with.
		if _, err := Render(&out, target, l, Options{At: time.Date(2026, 10, 15, 0, 0, 0, 0, time.UTC)}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), w) {
			t.Errorf("%s: output lacks the far end's IDs %q:\n%s", target, w, out.String())
		}
	}
	// IOS-XR, with a chain it can express (hmac(sha1) alone).
	one := l
	one.Keys = l.Keys[:1]
	var out bytes.Buffer
	if _, err := Render(&out, IOSXR, one, Options{At: at}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "key 1 SendID 110 ReceiveID 10\n") {
		t.Errorf("iosxr: output lacks the far end's IDs:\n%s", out.String())
	}
}

// TestSecrets: the key bytes appear only with WithSecrets; the placeholder
// names the key's source.
func TestSecrets(t *testing.T) {
	_, l := fixture(t)
	secret := string(l.Keys[0].Secret.Bytes())
	for _, target := range Targets {
		for _, with := range []bool{false, true} {
			var out bytes.Buffer
			if _, err := Render(&out, target, l, Options{At: time.Date(2026, 10, 15, 0, 0, 0, 0, time.UTC), WithSecrets: with}); err != nil {
				t.Fatal(err)
			}
			s := out.String()
			leaked := strings.Contains(s, secret) || strings.Contains(s, "616f6b6579642d74657374") || strings.Contains(s, "61:6f:6b:65")
			if leaked != with && !(with && target == EOS) { // EOS refuses every key of the fixture
				t.Errorf("%s with secrets %t: key bytes in the output %t", target, with, leaked)
			}
			if !with && target != EOS && !strings.Contains(s, "<secret: file:testdata/keys.yaml:") {
				t.Errorf("%s: no placeholder naming the source:\n%s", target, s)
			}
		}
	}
}

// TestEOSOneID: EOS renders a key whose send-id and recv-id are equal
// (one ID per shared secret), with its algorithm on the neighbor.
func TestEOSOneID(t *testing.T) {
	_, l := fixture(t)
	k := l.Keys[0]
	k.SendID, k.RecvID = 7, 7
	l.Keys = []Key{k}
	var out bytes.Buffer
	refused, err := Render(&out, EOS, l, Options{At: at, WithSecrets: true})
	if err != nil || len(refused) != 0 {
		t.Fatalf("refused %v, err %v", refused, err)
	}
	for _, w := range []string{"secret 7 0 aokeyd-test-sha1-secret receive-lifetime 09/29/2026 23:55:00 11/03/2026 00:05:00 transmit-lifetime 10/01/2026 00:00:00 11/02/2026 00:00:00\n",
		"neighbor 192.0.2.1 password shared-secret profile core algorithm hmac-sha1-96\n"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	// A peer in VRF red: the neighbor under vrf red.
	l.VRF = "red"
	out.Reset()
	if _, err := Render(&out, EOS, l, Options{At: at}); err != nil {
		t.Fatal(err)
	}
	if w := "router bgp <asn>\n   vrf red\n      neighbor 192.0.2.1 password shared-secret profile core algorithm hmac-sha1-96\n"; !strings.Contains(out.String(), w) {
		t.Errorf("VRF peer: output lacks %q:\n%s", w, out.String())
	}
}

// TestAokeydRenderingLoads: the --for aokeyd rendering (with secrets) is a
// key file a second aokeyd loads, whose chain is the mirror image of this
// one key by key (keystore.CheckMirrorSnapshots), and its policy lines
// parse as that aokeyd's policy binding aokeyd's router to the chain.
func TestAokeydRenderingLoads(t *testing.T) {
	_, l := fixture(t)
	var out bytes.Buffer
	if refused, err := Render(&out, Aokeyd, l, Options{At: at, WithSecrets: true}); err != nil || len(refused) > 0 {
		t.Fatalf("refused %v, err %v", refused, err)
	}
	far, err := keystore.DecodeFile("far-keys.yaml", out.Bytes())
	if err != nil {
		t.Fatalf("the far end's key file does not load: %v\n%s", err, out.String())
	}
	data, err := os.ReadFile("testdata/keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	local, err := keystore.DecodeFile("testdata/keys.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	if errs := keystore.CheckMirrorSnapshots(local, far); len(errs) > 0 {
		t.Errorf("the far end's keys are not the mirror image: %v", errs)
	}
	// The commented policy: uncomment it and parse it.
	var pol []string
	in := false
	for _, line := range strings.Split(out.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "# --- policy.yaml"):
			in = true
		case strings.HasPrefix(line, "# ---"):
			in = false
		case in:
			pol = append(pol, strings.TrimPrefix(strings.TrimPrefix(line, "#"), " "))
		}
	}
	p, err := policy.Parse("far-policy.yaml", []byte(strings.Join(pol, "\n")))
	if err != nil {
		t.Fatalf("the far end's policy does not parse: %v\n%s", err, strings.Join(pol, "\n"))
	}
	b, err := p.BindingFor(netip.MustParseAddr("192.0.2.1"), "")
	if err != nil || b.KeyChain != "core" {
		t.Errorf("far end's binding of 192.0.2.1: %+v, %v", b, err)
	}
	if probs := p.Validate(far, at, 24*time.Hour); len(probs) > 0 {
		t.Errorf("far end's policy against its keys: %v", probs)
	}
}

// TestGoldenVRF: a peer in VRF red is rendered inside the far end's VRF of
// that name on every target that has VRFs (Junos routing-instances, IOS-XR
// and EOS vrf under router bgp, gobgpd's neighbor vrf, BIRD's protocol
// vrf, aokeyd's binding); the YANG key chain is global.
func TestGoldenVRF(t *testing.T) {
	_, l := fixture(t)
	l.VRF = "red"
	want := map[Target]string{
		Junos: "set routing-instances red protocols bgp group <bgp-group> neighbor 192.0.2.1 authentication-key-chain core\n",
		IOSXR: "router bgp <asn>\n vrf red\n  neighbor 192.0.2.1\n",
		GoBGP: "    vrf = \"red\"\n",
		BIRD:  "\tvrf \"red\";\n",
	}
	for _, target := range Targets {
		t.Run(string(target), func(t *testing.T) {
			var out bytes.Buffer
			if _, err := Render(&out, target, l, Options{At: at}); err != nil {
				t.Fatal(err)
			}
			if w := want[target]; w != "" && !strings.Contains(out.String(), w) {
				t.Errorf("the neighbor is not in VRF red: no %q in\n%s", w, out.String())
			}
			if target != YANG && target != EOS && strings.Contains(out.String(), "set protocols bgp") {
				t.Errorf("a VRF peer rendered in the global table:\n%s", out.String())
			}
			golden.Check(t, "testdata/vrf/"+string(target)+".golden", out.String())
		})
	}
}

// A TCP-MD5 link (its chain holds an md5 password) renders its password
// for BIRD and is refused for the other targets; with Migrate it renders
// the TCP-AO block that replaces the password at the switch time.
func TestGoldenMD5(t *testing.T) {
	_, l := fixture(t)
	l.Keys[1].IncludeTCPOptions = true // BIRD always includes them
	l.MD5, l.HasMD5, l.MD5Source = tcpao.NewSecret([]byte("md5-Secret.1")), true, "file keys.yaml:3"
	for _, c := range []struct {
		name string
		o    Options
	}{{"bird-md5", Options{At: at}}, {"bird-md5-secret", Options{At: at, WithSecrets: true}}, {"bird-migrate", Options{At: at, Migrate: true}}} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			refused, err := Render(&out, BIRD, l, c.o)
			if err != nil || len(refused) > 0 {
				t.Fatalf("refused %v, err %v", refused, err)
			}
			if !c.o.WithSecrets && strings.Contains(out.String(), "md5-Secret.1") {
				t.Fatal("the password is in a rendering without --with-secrets")
			}
			golden.Check(t, "testdata/md5/"+c.name+".golden", out.String())
		})
	}
	refused, err := Render(&bytes.Buffer{}, Junos, l, Options{At: at})
	if err != nil || len(refused) != 1 || !strings.Contains(refused[0].Reason, "--migrate") {
		t.Fatalf("junos for a TCP-MD5 link: refused %v, err %v", refused, err)
	}
	for _, target := range []Target{Junos, IOSXR, EOS} {
		var out bytes.Buffer
		if _, err := Render(&out, target, l, Options{At: at, Migrate: true}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "MIGRATION from TCP-MD5 at 2026-11-01T12:00:00Z") {
			t.Errorf("%s --migrate does not say when to switch:\n%s", target, out.String())
		}
		golden.Check(t, "testdata/md5/"+string(target)+"-migrate.golden", out.String())
	}
}
