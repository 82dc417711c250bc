package policy

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
)

// exampleSnapshot is a key source that fits testdata/example.yaml at t0.
func exampleSnapshot(t *testing.T, p *Policy) *keystore.Snapshot {
	t.Helper()
	s, ok := p.Schedule("customers")
	if !ok {
		t.Fatal("example has no customers rotation")
	}
	peer := addr("203.0.113.7")
	var gen []keystore.MKT
	for i := s.Index(peer, t0) - 1; i < s.NextDue(peer, t0).Index; i++ {
		pl := s.Plan(peer, i)
		m := mkt("customers-generated", pl.SendStart.Format("2006-01-02"), uint8(i), uint8(i), pl.SendLifetime, pl.AcceptLifetime)
		m.Peers = []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32")}
		gen = append(gen, m)
	}
	ix1 := mkt("ix", "a", 10, 10, keystore.Lifetime{End: at(40 * Day)}, keystore.Lifetime{End: at(41 * Day)})
	ix2 := mkt("ix", "b", 11, 11, from(39*Day), from(38*Day))
	return snapshot(
		chain("core",
			// Lifetimes come from the policy.
			mkt("core", "2026-10", 1, 1, keystore.Always, keystore.Always),
			mkt("core", "2026-11", 2, 2, keystore.Always, keystore.Always),
			// Not listed in the policy: never used, not checked.
			mkt("core", "spare", 1, 1, keystore.Always, keystore.Always),
		),
		chain("ix", ix1, ix2),
		chain("customers-generated", gen...),
	)
}

func TestValidateExample(t *testing.T) {
	p, err := Load("testdata/example.yaml", WithJitterSeed([]byte("example")))
	if err != nil {
		t.Fatal(err)
	}
	snap := exampleSnapshot(t, p)
	if probs := p.Validate(snap, t0, 365*Day); probs != nil {
		t.Fatalf("Validate(example) = %v", probs)
	}
	for _, b := range p.Bindings() {
		pk, err := p.Desired(snap, b.Neighbor.Addr(), b.VRF, t0)
		if err != nil {
			t.Fatalf("Desired(%s): %v", b, err)
		}
		if _, ok := pk.PreferredKey(); !ok {
			t.Errorf("Desired(%s) has no send key: %v", b, keyNames(pk))
		}
	}
}

func TestValidate(t *testing.T) {
	const pol = `key_chains:
  - name: core
  - name: listed
    source_chain: src
    keys:
      - name: k1
      - name: k2
        send_lifetime: {start: 2026-11-01}
      - name: gone
  - name: gen
    rotation: {start: 2026-10-01, interval: 30d, lead: 1d, grace: 1d}
peers:
  - neighbor: 10.0.0.1
    key_chain: core
  - neighbor: 10.0.0.2
    key_chain: listed
  - neighbor: 10.1.0.0/24
    key_chain: core
    vrf: blue
  - neighbor: 10.0.0.3
    key_chain: gen
`
	p := mustParse(t, pol)
	// The rotation of 10.0.0.3: S(1) = 2026-10-31, S(2) = 2026-11-30.
	gs, _ := p.Schedule("gen")
	gen := func(i int64) keystore.MKT {
		pl := gs.Plan(addr("10.0.0.3"), i)
		return mkt("gen", "g", uint8(i), uint8(i), pl.SendLifetime, pl.AcceptLifetime)
	}
	always := keystore.Always
	long := mkt("core", "long", 7, 7, always, always)
	long.Secret = tcpao.NewSecret(bytes.Repeat([]byte{1}, 81))
	md5 := mkt("core", "md5", 8, 8, always, always)
	md5.Algorithm = "md5"
	mac := mkt("core", "mac", 9, 9, always, always)
	mac.Algorithm, mac.MACLen = tcpao.HMACSHA1, 17
	cmac := mkt("core", "cmac", 9, 9, always, always)
	cmac.Algorithm = tcpao.CMACAES128
	cmac.Secret = tcpao.NewSecret(make([]byte, 20))
	revoked := mkt("core", "revoked", 5, 5, always, always)
	revoked.Revoked = true
	peerA := mkt("core", "pa", 3, 3, always, always)
	peerA.Peers = []netip.Prefix{netip.MustParsePrefix("10.1.0.1/32")}
	peerB := mkt("core", "pb", 3, 3, always, always)
	peerB.Peers = []netip.Prefix{netip.MustParsePrefix("10.1.0.2/32")}
	red := mkt("core", "red", 1, 1, always, always)
	red.VRF = "red"

	good := func() []*keystore.Chain {
		return []*keystore.Chain{
			chain("core", mkt("core", "k", 1, 1, always, always)),
			chain("src", mkt("src", "k1", 1, 1, life(-Day, 10*Day), always), mkt("src", "k2", 2, 2, always, always),
				mkt("src", "gone", 3, 3, always, always)),
			chain("gen", gen(0), gen(1)),
		}
	}
	with := func(name string, keys ...keystore.MKT) *keystore.Snapshot {
		cs := good()
		for i, c := range cs {
			if c.Name == name {
				cs[i] = chain(name, keys...)
			}
		}
		return snapshot(cs...)
	}
	tests := []struct {
		name string
		snap *keystore.Snapshot
		now  time.Duration
		want []wantProblem
	}{
		{"good", with("none"), 0, nil},
		{"missing chain and key", snapshot(chain("src", mkt("src", "k1", 1, 1, always, always), mkt("src", "k2", 2, 2, always, always))), 0, []wantProblem{
			{2, "key_chains[0].name", ErrUnknownChain, `source chain "core" is not in the key snapshot`},
			{9, "key_chains[1].keys[2].name", ErrUnknownKey, `source chain "src" has no key "gone"`},
			{10, "key_chains[2].name", ErrUnknownChain, `"gen"`},
		}},
		{"backwards MKT lifetime", with("core", mkt("core", "k", 1, 1, always, always), mkt("core", "b", 2, 2, always, life(Day, 0))), 0, []wantProblem{
			{2, "key_chains[0]", ErrInvalid, "chain \"core\" key \"b\" (test:core/b): invalid value: accept lifetime 2026-11-02T00:00:00Z..2026-11-01T00:00:00Z ends before it starts"},
		}},
		{"kernel limits", with("core", mkt("core", "k", 1, 1, always, always), long, md5, mac, cmac), 0, []wantProblem{
			{2, "key_chains[0]", ErrKeyLength, `chain "core" key "long"`},
			{2, "key_chains[0]", ErrAlgorithm, `chain "core" key "md5"`},
			{2, "key_chains[0]", ErrMACLength, `chain "core" key "mac"`},
			{2, "key_chains[0]", ErrKeyLength, `chain "core" key "cmac"`},
		}},
		{"gap between keys", with("core", mkt("core", "a", 1, 1, life(0, 10*Day), always), mkt("core", "b", 2, 2, from(12*Day), always)), 0, []wantProblem{
			{14, "peers[0].key_chain", ErrGap, "peer 10.0.0.1/32 (chain core) has no key to send with from 2026-11-11T00:00:00Z until 2026-11-13T00:00:00Z"},
			{18, "peers[2].key_chain", ErrGap, "peer 10.1.0.0/24 (vrf blue) (chain core)"},
		}},
		{"no key yet, then for ever", with("core", mkt("core", "a", 1, 1, from(Day), always)), 0, []wantProblem{
			{14, "peers[0].key_chain", ErrGap, "from 2026-11-01T00:00:00Z until 2026-11-02T00:00:00Z"},
			{18, "peers[2].key_chain", ErrGap, "from 2026-11-01T00:00:00Z until 2026-11-02T00:00:00Z"},
		}},
		{"gap after the horizon is not reported", with("core", mkt("core", "a", 1, 1, life(0, 100*Day), always)), 0, nil},
		{"revoked key does not cover", with("core", mkt("core", "a", 1, 1, life(0, 10*Day), always), revoked), 0, []wantProblem{
			{14, "peers[0].key_chain", ErrGap, "until 2026-12-31T00:00:00Z (end of the checked window)"},
			{18, "peers[2].key_chain", ErrGap, "from 2026-11-11T00:00:00Z"},
		}},
		{"duplicate IDs at once", with("core", mkt("core", "a", 1, 1, life(0, 10*Day), life(0, 10*Day)), mkt("core", "b", 1, 2, from(5*Day), from(5*Day))), 0, []wantProblem{
			{14, "peers[0].key_chain", ErrDuplicateID, "keys a and b of chain core both have SendID 1 (both installed from 2026-11-06T00:00:00Z)"},
			{18, "peers[2].key_chain", ErrDuplicateID, "SendID 1"},
		}},
		{"duplicate IDs only with accept tolerance", with("core", mkt("core", "a", 1, 1, life(0, 10*Day), life(0, 10*Day)), mkt("core", "b", 2, 1, from(10*Day), from(10*Day))), 0, nil},
		{"duplicate IDs, disjoint in time", with("core", mkt("core", "a", 1, 1, life(0, 10*Day), life(0, 10*Day)), mkt("core", "b", 1, 1, from(10*Day), from(10*Day))), 0, nil},
		{"duplicate IDs, past overlap", with("core", mkt("core", "a", 1, 1, life(0, 10*Day), life(0, 10*Day)), mkt("core", "b", 1, 1, from(5*Day), from(5*Day))), 20 * Day, nil},
		{"duplicate IDs for different peers", with("core", mkt("core", "k", 1, 1, always, always), peerA, peerB), 0, nil},
		{"MKT of another VRF", with("core", mkt("core", "k", 2, 2, always, always), red), 0, nil},
		{"rotation: next key not due yet", with("gen", gen(0), gen(1)), 28*Day - 1, nil},
		{"rotation: due key missing", with("gen", gen(0), gen(1)), 28 * Day, []wantProblem{
			{21, "peers[3].key_chain", ErrGap, "peer 10.0.0.3/32 (chain gen) has no key to send with from 2026-12-01T00:00:00Z"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			probs := p.Validate(tt.snap, at(tt.now), 60*Day)
			checkValidate(t, probs, tt.want)
		})
	}
}

func checkValidate(t *testing.T, probs Problems, want []wantProblem) {
	t.Helper()
	if len(probs) != len(want) {
		t.Errorf("got %d problems, want %d:\n%v", len(probs), len(want), probs)
	}
	for i := range min(len(probs), len(want)) {
		pr, w := probs[i], want[i]
		if pr.File != "test.yaml" || pr.Line != w.line || pr.Field != w.field || !errors.Is(pr, w.err) || !strings.Contains(pr.Error(), w.text) {
			t.Errorf("problem %d = %q (line %d field %q), want line %d field %q, %v, containing %q",
				i, pr.Error(), pr.Line, pr.Field, w.line, w.field, w.err, w.text)
		}
	}
	if len(want) == 0 && probs.Err() != nil {
		t.Errorf("Err() = %v", probs.Err())
	}
}

func TestValidateNoSecretInProblems(t *testing.T) {
	p := mustParse(t, "key_chains: [{name: c}]\npeers: [{neighbor: 10.0.0.1, key_chain: c}]\n")
	secret := []byte("correct-horse-battery-staple-xyz")
	bad := mkt("c", "k", 1, 1, life(0, Day), keystore.Always)
	bad.Algorithm = "md5"
	bad.Secret = tcpao.NewSecret(secret)
	dup := mkt("c", "k2", 1, 1, keystore.Always, keystore.Always)
	dup.Secret = tcpao.NewSecret(secret)
	probs := p.Validate(snapshot(chain("c", bad, dup, mkt("c", "k3", 1, 2, keystore.Always, keystore.Always))), t0, 10*Day)
	if len(probs) == 0 {
		t.Fatal("no problems")
	}
	if s := probs.Error(); strings.Contains(s, string(secret)) || strings.Contains(s, "636f7272") {
		t.Errorf("problems leak the secret: %s", s)
	}
}

func BenchmarkValidate(b *testing.B) {
	p := mustParse(b, desiredPolicy)
	snap := desiredSnapshot()
	for b.Loop() {
		p.Validate(snap, t0, 365*Day)
	}
}

// A TCP-MD5 peer (its chain's md5 password covers it) with no TCP-AO key
// yet has no send-key gap; with the password gone, or for a peer it does
// not cover, the gap is reported as before.
func TestValidateMD5PeerNoGap(t *testing.T) {
	p := mustParse(t, `key_chains:
  - name: core
peers:
  - neighbor: 10.0.0.1
    key_chain: core
  - neighbor: 10.0.0.9
    key_chain: core
`)
	pw := &keystore.MD5Password{Secret: tcpao.NewSecret([]byte("md5-pw")), Peers: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}}
	snap := &keystore.Snapshot{Chains: map[string]*keystore.Chain{"core": {Name: "core", MD5: pw}}}
	probs := p.Validate(snap, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 24*time.Hour)
	var gaps []string
	for _, pr := range probs {
		if errors.Is(pr.Err, ErrGap) {
			gaps = append(gaps, pr.Err.Error())
		}
	}
	if len(gaps) != 1 || !strings.Contains(gaps[0], "10.0.0.9") {
		t.Fatalf("gaps %q, want only 10.0.0.9's (10.0.0.1 runs TCP-MD5)", gaps)
	}
}
