package speakerbench

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// TestBirdFleetConfig renders the bird-fleet lab's files on the host: the
// route server BIRD's protocols each include their member's key file, the
// members' BIRD is the fleet item's far end toward the route server, and
// aokeyd's configuration and policy (a chain per member over the shared
// chain, single neighbors: BIRD's kind binds no prefix) are accepted.
func TestBirdFleetConfig(t *testing.T) {
	f := &rsFleet{bench: &bench{t: t, n: 2, dir: t.TempDir(), peers: []netip.Addr{fleetAddr(1), fleetAddr(300)}}}
	f.keysDir = filepath.Join(f.dir, "bird-keys")
	rs, mem := t.TempDir(), t.TempDir()
	if err := f.writeRS(rs); err != nil {
		t.Fatal(err)
	}
	if err := f.writeMembers(mem, true); err != nil {
		t.Fatal(err)
	}
	read := func(dir string) string {
		b, err := os.ReadFile(filepath.Join(dir, "bird.conf"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, want := range []string{
		"protocol bgp p300 {\n\tlocal 10.0.0.1 as 65001;\n\tneighbor 10.1.1.44 as 65002;\n\tpassive on;",
		"\tinclude \"" + f.keysDir + "/10.1.1.44.conf\";",
		"\tinclude \"" + f.keysDir + "/10.1.0.1.conf\";",
	} {
		if conf := read(rs); !strings.Contains(conf, want) {
			t.Errorf("the route server's bird.conf lacks %q:\n%s", want, conf)
		}
	}
	if f.keyFile(fleetAddr(300)) != filepath.Join(f.keysDir, "10.1.1.44.conf") {
		t.Errorf("keyFile = %s", f.keyFile(fleetAddr(300)))
	}
	for _, want := range []string{
		"protocol bgp p300 {\n\tlocal 10.1.1.44 as 65002;\n\tneighbor 10.0.0.1 as 65001;",
		"key { send id 102; recv id 2; secret hex:" + hexSecret(2) + "; algorithm hmac sha256; preferred; };",
	} {
		if conf := read(mem); !strings.Contains(conf, want) {
			t.Errorf("the members' bird.conf lacks %q:\n%s", want, conf)
		}
	}
	cfg, err := config.Parse("aokeyd.yaml", []byte(f.rsConfig()))
	if err != nil {
		t.Fatalf("aokeyd.yaml: %v\n%s", err, f.rsConfig())
	}
	if k := cfg.SpeakerKind(); k != config.BirdKind {
		t.Fatalf("speaker kind %s, want bird", k.Name)
	}
	pol, err := policy.Parse("policy.yaml", []byte(rsPolicy(f.peers)))
	if err != nil {
		t.Fatalf("policy.yaml: %v\n%s", err, rsPolicy(f.peers))
	}
	if errs := pol.CheckSpeaker(config.BirdKind.Kind, nil); len(errs) > 0 {
		t.Fatalf("policy for BIRD: %v", errs)
	}
	// The key source as the bench writes it: every member's binding
	// resolves to the shared chain's keys, which BIRD can hold.
	f.writeKeys(keysRolling(time.Now(), time.Now().Add(time.Hour)))
	doc, err := os.ReadFile(filepath.Join(f.dir, "keys.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := keystore.DecodeFile("keys.yaml", doc)
	if err != nil {
		t.Fatalf("keys.yaml: %v\n%s", err, doc)
	}
	defer snap.Zero()
	if errs := pol.CheckSpeakerKeys(config.BirdKind.Kind, snap, time.Now()); len(errs) > 0 {
		t.Fatalf("keys for BIRD: %v", errs)
	}
	for _, p := range f.peers {
		pk, err := pol.Desired(snap, p, "", time.Now())
		if err != nil || pk.SourceChain != chainShared || len(pk.Keys) == 0 {
			t.Errorf("member %s: desired keys %+v (%v), want the shared chain's", p, pk, err)
		}
	}
	for i := range f.peers {
		kc, ok := pol.Chain(memberChain(i + 1))
		if !ok || kc.SourceChain != chainShared {
			t.Errorf("chain %s: %+v (%v), want one reading %s", memberChain(i+1), kc, ok, chainShared)
		}
	}
}

// TestBirdFleetLine: the item's line, as issue 52 asks for it.
func TestBirdFleetLine(t *testing.T) {
	r := birdResult{N: 1000, RollS: 12.34, Configures: 3, RevokeMs: 1500.4}
	if got, want := r.line(), "bird-fleet: n=1000 roll_s=12.3 configures=3 revoke_ms=1500 flaps=0 pkt_bad=0"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
}
