package revocation

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/tcpao"
)

// todaysRecord is a revocations.json as aokeyd wrote it before a peer
// was one field (the daemon's, and the BIRD driver's, which kept the
// request's spelling of the address): a global revocation, one scoped to
// a peer in the default VRF, one to the same address in VRF red, and one
// to a mapped spelling of another peer.
const todaysRecord = `[
  {
    "chain": "core",
    "key": "k1",
    "at": "2026-11-30T12:00:00Z"
  },
  {
    "chain": "core",
    "key": "k2",
    "peer": "192.0.2.2",
    "at": "2026-11-30T12:01:00Z"
  },
  {
    "chain": "core",
    "key": "k3",
    "peer": "192.0.2.2",
    "vrf": "red",
    "at": "2026-11-30T12:02:00Z"
  },
  {
    "chain": "core",
    "key": "k4",
    "peer": "::ffff:192.0.2.3",
    "at": "2026-11-30T12:03:00Z"
  }
]`

var (
	peerDefault = peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "")
	peerRed     = peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "red")
	peerOther   = peer.KeyOf(netip.MustParseAddr("192.0.2.3"), "")
)

// TestOpenTodaysRecord: a record in today's form reads, each scoped
// revocation to its own peer (address and VRF; a mapped address is the
// peer's), and applies to that peer alone; the next write keeps each peer
// in its one-field form, which reads back the same.
func TestOpenTodaysRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), File)
	if err := os.WriteFile(path, []byte(todaysRecord), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		want := []Revocation{
			{Chain: "core", Key: "k1", At: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)},
			{Chain: "core", Key: "k2", Peer: peerDefault, At: time.Date(2026, 11, 30, 12, 1, 0, 0, time.UTC)},
			{Chain: "core", Key: "k3", Peer: peerRed, At: time.Date(2026, 11, 30, 12, 2, 0, 0, time.UTC)},
			{Chain: "core", Key: "k4", Peer: peerOther, At: time.Date(2026, 11, 30, 12, 3, 0, 0, time.UTC)},
		}
		if got := s.List(); !equal(got[:4], want) {
			t.Fatalf("read %v, want %v", got, want)
		}
		for _, c := range []struct {
			id   peer.Key
			want []string
		}{
			{peerDefault, []string{"k1", "k2"}},
			{peerRed, []string{"k1", "k3"}},
			{peerOther, []string{"k1", "k4"}},
			{peer.KeyOf(netip.MustParseAddr("192.0.2.9"), ""), []string{"k1"}},
		} {
			if got := s.Revoked("core", c.id); !slices.Equal(got, c.want) {
				t.Errorf("revoked for %s: %v, want %v", c.id, got, c.want)
			}
			pk := peerKeys()
			s.Scope(&pk, c.id)
			if scoped, want := pk.Revoked, c.want[1:]; !slices.Equal(scoped, want) {
				t.Errorf("scoped for %s: %v revoked, want %v", c.id, scoped, want)
			}
		}
		snap := &keystore.Snapshot{Chains: map[string]*keystore.Chain{"core": {Name: "core", Keys: []keystore.MKT{{Name: "k1"}, {Name: "k2"}}}}}
		s.Apply(snap)
		if c := snap.Chains["core"]; !c.Keys[0].Revoked || c.Keys[1].Revoked {
			t.Errorf("Apply marked %+v, want the global k1 alone", c.Keys)
		}
	}
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	check(s)
	if ok, err := s.Add(Revocation{Chain: "edge", Key: "k5", Peer: peerRed}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	b, _ := os.ReadFile(path)
	for _, want := range []string{`"peer": "192.0.2.2 vrf red"`, `"peer": "192.0.2.3"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("written as\n%s\nwant %s", b, want)
		}
	}
	if strings.Contains(string(b), `"vrf"`) {
		t.Errorf("written as\n%s\nwant no vrf field: the peer is one", b)
	}
	if s, err = Open(path, nil); err != nil {
		t.Fatal(err)
	}
	check(s)
	if n := s.Count(); n != 5 {
		t.Errorf("%d revocations after the write, want 5", n)
	}
}

// peerKeys is the policy's answer for a peer of chain core holding keys
// k1 to k5, each sendable.
func peerKeys() policy.PeerKeys {
	pk := policy.PeerKeys{SourceChain: "core", Preferred: 0}
	for _, n := range []string{"k1", "k2", "k3", "k4", "k5"} {
		pk.Keys = append(pk.Keys, policy.ScheduledKey{MKT: keystore.MKT{Name: n, Algorithm: tcpao.HMACSHA256}, Sendable: true})
	}
	return pk
}

// TestRevocationJSON: an entry names a chain and a key, and a peer that
// is an address (a VRF alone scopes nothing); one scoped to a VRF twin
// round-trips as itself.
func TestRevocationJSON(t *testing.T) {
	for _, bad := range []string{
		`[{"chain":"core","key":"k1","peer":"router-2"}]`,
		`[{"chain":"core","key":"k1","vrf":"blue"}]`,
		`[{"chain":"core","key":"k1","peer":"192.0.2.2 vrf red","vrf":"blue"}]`,
		`[{"chain":"core","peer":"192.0.2.2"}]`,
		`null`,
	} {
		if _, err := parseRecord([]byte(bad)); err == nil {
			t.Errorf("parseRecord(%s) succeeded", bad)
		}
	}
	r := Revocation{Chain: "core", Key: "k1", Peer: peerRed, At: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	back, err := parseRecord(encodeRecord([]Revocation{r}))
	if err != nil || len(back) != 1 || !equal(back, []Revocation{r}) {
		t.Fatalf("round trip of %v: %v, %v", r, back, err)
	}
	if r.String() != "core/k1 for peer 192.0.2.2 (vrf red)" {
		t.Errorf("String() = %q", r.String())
	}
	// A revocation scoped to an interface neighbour (issue 53) is written
	// and read back by its interface.
	l := Revocation{Chain: "core", Key: "k1", Peer: peer.OnLink("swp1", "red"), At: r.At}
	b := encodeRecord([]Revocation{l})
	back, err = parseRecord(b)
	if err != nil || !equal(back, []Revocation{l}) || !strings.Contains(string(b), `"peer": "swp1 interface vrf red"`) {
		t.Fatalf("round trip of %v: %s read as %v, %v", l, b, back, err)
	}
	if l.String() != "core/k1 for peer swp1 (vrf red)" {
		t.Errorf("String() = %q", l.String())
	}
}
