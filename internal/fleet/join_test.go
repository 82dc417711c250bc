package fleet

import (
	"encoding/json"
	"net/netip"
	"slices"
	"testing"
	"time"

	peerkey "github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func key(name string, send, recv uint8, cur, rnext bool) Key {
	return Key{Chain: "core", Name: name, SendID: send, RecvID: recv, Alg: "hmac(sha256)", IncludeTCPOptions: true,
		Current: cur, RNext: rnext, State: "installed"}
}

// router is a reporting router with one peer per (address, keys) given.
func router(id, addr string, peers ...Peer) Document {
	return Document{Schema: Schema, RouterID: id, Addresses: []netip.Addr{netip.MustParseAddr(addr)}, PublishedAt: t0.Add(-5 * time.Second),
		Refresh: Duration(30 * time.Second), SwitchTimeout: Duration(5 * time.Minute), Peers: peers}
}

func peer(addr string, keys ...Key) Peer {
	p := Peer{ID: peerkey.KeyOf(netip.MustParseAddr(addr), ""), Session: "established", Chain: "core", Keys: keys, CurrentSince: t0.Add(-time.Hour)}
	for _, k := range keys {
		if k.Current {
			p.Current = k.Ref()
		}
		if k.RNext {
			p.RNext = k.Ref()
		}
	}
	return p
}

func kinds(l Link) []string {
	var out []string
	for _, f := range l.Flags {
		out = append(out, f.Kind.String()+"@"+f.Router+":"+f.Key)
	}
	slices.Sort(out)
	return out
}

func TestJoinFlags(t *testing.T) {
	good := func() (Document, Document) {
		return router("r1", "10.0.0.1", peer("10.0.0.2", key("k1", 1, 2, true, true))),
			router("r2", "10.0.0.2", peer("10.0.0.1", key("k1", 2, 1, true, true)))
	}
	tests := []struct {
		name  string
		docs  func() []Document
		links int
		want  []string // flags of the first link
	}{
		{"both ends agree", func() []Document { a, b := good(); return []Document{a, b} }, 1, nil},
		{"far end not reporting (a BIRD end)", func() []Document { a, _ := good(); return []Document{a} }, 1,
			[]string{"far-end-not-reporting@:"}},
		{"far router has no peer for this one", func() []Document {
			a, b := good()
			b.Peers[0].ID = peerkey.KeyOf(netip.MustParseAddr("10.0.0.9"), "")
			return []Document{a, b}
		}, 2, []string{"far-end-not-reporting@:"}},
		{"stale router", func() []Document {
			a, b := good()
			b.PublishedAt = t0.Add(-10 * time.Minute)
			return []Document{a, b}
		}, 1, []string{"stale@r2:"}},
		{"ids not mirrored", func() []Document {
			a, b := good()
			b.Peers[0].Keys[0].SendID = 1
			return []Document{a, b}
		}, 1, []string{"ids-not-mirrored@:core/k1"}},
		{"tcp options differ", func() []Document {
			a, b := good()
			b.Peers[0].Keys[0].IncludeTCPOptions = false
			return []Document{a, b}
		}, 1, []string{"tcp-options-differ@:core/k1"}},
		{"announced key the other end does not hold (lagging end)", func() []Document {
			a, b := good()
			a.Peers[0] = peer("10.0.0.2", key("k1", 1, 2, true, false), key("k2", 3, 4, false, true))
			return []Document{a, b}
		}, 1, []string{"announced-not-held@r2:core/k2"}},
		{"rolling to a key the other end does not hold", func() []Document {
			a, b := good()
			a.Peers[0] = peer("10.0.0.2", key("k1", 1, 2, true, true), key("k2", 3, 4, false, false))
			a.Peers[0].Roll.PendingKey = "core/k2"
			return []Document{a, b}
		}, 1, []string{"announced-not-held@r2:core/k2"}},
		{"different current keys for longer than a roll", func() []Document {
			a, b := good()
			a.Peers[0] = peer("10.0.0.2", key("k1", 1, 2, false, false), key("k2", 3, 4, true, true))
			b.Peers[0] = peer("10.0.0.1", key("k1", 2, 1, true, true), key("k2", 4, 3, false, false))
			return []Document{a, b}
		}, 1, []string{"current-differs@:core/k2 / core/k1"}},
		{"different current keys within a roll", func() []Document {
			a, b := good()
			a.Peers[0] = peer("10.0.0.2", key("k1", 1, 2, false, false), key("k2", 3, 4, true, true))
			a.Peers[0].CurrentSince = t0.Add(-time.Minute)
			b.Peers[0] = peer("10.0.0.1", key("k1", 2, 1, true, true), key("k2", 4, 3, false, false))
			return []Document{a, b}
		}, 1, nil},
		{"expiring with no successor", func() []Document {
			a, b := good()
			a.Peers[0].Keys[0].SendEnd = t0.Add(24 * time.Hour)
			return []Document{a, b}
		}, 1, []string{"expiring-no-successor@r1:core/k1"}},
		{"expiring with a successor", func() []Document {
			a, b := good()
			a.Peers[0].Keys[0].SendEnd = t0.Add(24 * time.Hour)
			a.Peers[0].Keys = append(a.Peers[0].Keys, key("k2", 3, 4, false, false))
			b.Peers[0].Keys = append(b.Peers[0].Keys, key("k2", 4, 3, false, false))
			return []Document{a, b}
		}, 1, nil},
		{"one end on tcp-md5, the other on tcp-ao", func() []Document {
			a, b := good()
			a.Peers[0].Auth, b.Peers[0].Auth = control.AuthMD5, control.AuthAO
			return []Document{a, b}
		}, 1, []string{"auth-differs@:"}},
		{"one end migrating", func() []Document {
			a, b := good()
			a.Peers[0].Auth, b.Peers[0].Auth = control.AuthMigrating+" (prepared)", control.AuthMD5
			return []Document{a, b}
		}, 1, nil},
		{"expiring beyond the horizon", func() []Document {
			a, b := good()
			a.Peers[0].Keys[0].SendEnd = t0.Add(30 * 24 * time.Hour)
			return []Document{a, b}
		}, 1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			links := Join(tc.docs(), JoinOptions{Now: t0})
			if len(links) != tc.links {
				t.Fatalf("%d links, want %d: %+v", len(links), tc.links, links)
			}
			if got := kinds(links[0]); !slices.Equal(got, tc.want) {
				t.Errorf("flags %v, want %v", got, tc.want)
			}
		})
	}
}

// Each link appears once, from both ends, whichever router lists it first;
// a router with two sessions to two routers makes two links.
func TestJoinPairsEachLinkOnce(t *testing.T) {
	r1 := router("r1", "10.0.0.1", peer("10.0.0.2", key("a", 1, 2, true, true)), peer("10.0.1.3", key("b", 5, 6, true, true)))
	r1.Addresses = append(r1.Addresses, netip.MustParseAddr("10.0.1.1"))
	r2 := router("r2", "10.0.0.2", peer("10.0.0.1", key("a", 2, 1, true, true)))
	r3 := router("r3", "10.0.1.3", peer("10.0.1.1", key("b", 6, 5, true, true)))
	for _, order := range [][]Document{{r1, r2, r3}, {r3, r2, r1}, {r2, r3, r1}} {
		links := Join(order, JoinOptions{Now: t0})
		var names []string
		for _, l := range links {
			names = append(names, l.Name())
			if len(l.Flags) > 0 {
				t.Errorf("%s flagged: %+v", l.Name(), l.Flags)
			}
		}
		if !slices.Equal(names, []string{"r1 <-> r2", "r1 <-> r3"}) {
			t.Errorf("links %v", names)
		}
	}
}

func TestFlagKindText(t *testing.T) {
	for k := range flagNames {
		b, err := json.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		var back FlagKind
		if err := json.Unmarshal(b, &back); err != nil || back != k {
			t.Errorf("%v: round trip %s -> %v (%v)", k, b, back, err)
		}
	}
	var k FlagKind
	if err := k.UnmarshalText([]byte("nonsense")); err == nil {
		t.Error("unknown flag kind accepted")
	}
}

func TestParsePath(t *testing.T) {
	for _, tc := range []struct {
		in, mount, prefix string
		ok                bool
	}{
		{"secret/aokeyd/fleet", "secret", "aokeyd/fleet", true},
		{"/kv/fleet/", "kv", "fleet", true},
		{"secret", "", "", false},
		{"secret//x", "", "", false},
		{"secret/../x", "", "", false},
		{"", "", "", false},
	} {
		m, p, err := ParsePath(tc.in)
		if (err == nil) != tc.ok || m != tc.mount || p != tc.prefix {
			t.Errorf("ParsePath(%q) = %q, %q, %v", tc.in, m, p, err)
		}
	}
}
