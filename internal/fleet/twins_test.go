package fleet

import (
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"testing"
	"time"

	peerkey "github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
)

// TestDocumentVRFTwins: one neighbor address in two VRFs is two peers in
// the fleet document, each with its own VRF, key and current-key age (the
// document's "since" is kept per peer identity, address and VRF).
func TestDocumentVRFTwins(t *testing.T) {
	twin := func(vrf, key string, send uint8, good uint64) control.PeerStatus {
		return control.PeerStatus{Peer: "10.255.17.2", VRF: vrf, SessionState: "established",
			Sockets: []control.Socket{{Kind: control.KindEstablished, Local: "10.255.17.1:179", Remote: "10.255.17.2:40000"}},
			Keys: []control.Key{{Chain: vrf, Name: key, SendID: send, RecvID: send + 100, Alg: "hmac(sha256)",
				Current: true, RNext: true, State: control.KeyInstalled}},
			Rotation: control.Rotation{State: "steady"}, Counters: control.Counters{PktGood: good}}
	}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	red, blue := "k1", "k61"
	p := NewPublisher(Options{RouterID: "a", Now: func() time.Time { return now },
		Status: func(context.Context) (control.StatusReport, error) {
			return control.StatusReport{Peers: []control.PeerStatus{twin("red", red, 1, 10), twin("blue", blue, 61, 20)}}, nil
		}})
	doc, err := p.document(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	red = "k2" // red rolls; blue's current key must keep its age
	doc2, err := p.document(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []Document{doc, doc2} {
		if len(d.Peers) != 2 {
			t.Fatalf("%d peers in the document, want 2 (one per VRF): %+v", len(d.Peers), d.Peers)
		}
	}
	byVRF := map[string]Peer{}
	for _, pr := range doc2.Peers {
		byVRF[pr.ID.VRF] = pr
	}
	r, b := byVRF["red"], byVRF["blue"]
	if r.ID.Addr.String() != "10.255.17.2" || b.ID.Addr.String() != "10.255.17.2" || len(r.Keys) != 1 || len(b.Keys) != 1 ||
		r.Keys[0].Name != "k2" || b.Keys[0].Name != "k61" || r.Counters.PktGood != 10 || b.Counters.PktGood != 20 {
		t.Fatalf("the twins were mixed up: red %+v, blue %+v", r, b)
	}
	if !r.CurrentSince.Equal(now) || !b.CurrentSince.Equal(now.Add(-time.Minute)) {
		t.Fatalf("current key since: red %v (want %v), blue %v (want %v)", r.CurrentSince, now, b.CurrentSince, now.Add(-time.Minute))
	}
}

// twinPeer is a peer of a VRF twin: the peer at addr in vrf, whose
// session runs from local, holding one key of the chain named after the
// VRF.
func twinPeer(addr, vrf, local string, k Key) Peer {
	p := peer(addr, k)
	p.ID.VRF, p.Local, p.Chain = vrf, netip.MustParseAddr(local), k.Chain
	return p
}

func twinKey(chain, name string, send, recv uint8) Key {
	k := key(name, send, recv, true, true)
	k.Chain = chain
	return k
}

// TestJoinVRFTwins: one address in two VRFs is two sessions, so two
// links, each joining the ends of its own VRF: two routers peering over
// the same addresses in VRFs red and blue, and a provider edge whose two
// customers (their routers' own default VRF) use the same addresses.
// Neither link is flagged: each end's keys are the mirror of its own far
// end's, and only a pairing across the VRFs would see different keys.
func TestJoinVRFTwins(t *testing.T) {
	red := func(send, recv uint8) Key { return twinKey("red", "k1", send, recv) }
	blue := func(send, recv uint8) Key { return twinKey("blue", "k61", send, recv) }
	tests := []struct {
		name  string
		docs  []Document
		links []string // each link as "A-router A-peer <-> B-router B-peer"
	}{
		{"two routers, two VRFs", []Document{
			router("r1", "10.0.0.1", twinPeer("10.0.0.2", "red", "10.0.0.1", red(1, 101)), twinPeer("10.0.0.2", "blue", "10.0.0.1", blue(61, 161))),
			router("r2", "10.0.0.2", twinPeer("10.0.0.1", "blue", "10.0.0.2", blue(161, 61)), twinPeer("10.0.0.1", "red", "10.0.0.2", red(101, 1))),
		}, []string{"r1 10.0.0.2 vrf blue <-> r2 10.0.0.1 vrf blue", "r1 10.0.0.2 vrf red <-> r2 10.0.0.1 vrf red"}},
		{"two routers, two VRFs, listed in another order", []Document{
			router("r1", "10.0.0.1", twinPeer("10.0.0.2", "red", "10.0.0.1", red(1, 101)), twinPeer("10.0.0.2", "blue", "10.0.0.1", blue(61, 161))),
			router("r2", "10.0.0.2", twinPeer("10.0.0.1", "red", "10.0.0.2", red(101, 1)), twinPeer("10.0.0.1", "blue", "10.0.0.2", blue(161, 61))),
		}, []string{"r1 10.0.0.2 vrf blue <-> r2 10.0.0.1 vrf blue", "r1 10.0.0.2 vrf red <-> r2 10.0.0.1 vrf red"}},
		{"a provider edge, two customers with one address", []Document{
			router("pe", "10.0.0.1", twinPeer("10.0.0.2", "red", "10.0.0.1", red(1, 101)), twinPeer("10.0.0.2", "blue", "10.0.0.1", blue(61, 161))),
			router("cust-b", "10.0.0.2", twinPeer("10.0.0.1", "", "10.0.0.2", blue(161, 61))),
			router("cust-r", "10.0.0.2", twinPeer("10.0.0.1", "", "10.0.0.2", red(101, 1))),
		}, []string{"cust-b 10.0.0.1 <-> pe 10.0.0.2 vrf blue", "cust-r 10.0.0.1 <-> pe 10.0.0.2 vrf red"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			backward := slices.Clone(tc.docs)
			slices.Reverse(backward)
			for _, order := range [][]Document{tc.docs, backward} {
				links := Join(order, JoinOptions{Now: t0})
				var got []string
				for _, l := range links {
					if l.B == nil {
						got = append(got, l.A.Router+" "+endPeer(l.A)+" (one end)")
						continue
					}
					got = append(got, l.A.Router+" "+endPeer(l.A)+" <-> "+l.B.Router+" "+endPeer(*l.B))
					if len(l.Flags) > 0 {
						t.Errorf("%s flagged: %v", got[len(got)-1], kinds(l))
					}
				}
				if !slices.Equal(got, tc.links) {
					t.Errorf("links\n  %q\nwant\n  %q", got, tc.links)
				}
			}
		})
	}
}

// endPeer is an end's peer as aoctl fleet status shows it.
func endPeer(e End) string {
	return e.Peer.ID.String()
}

// TestDocumentWireForm: a document as every aokeyd has written it (a
// peer's identity as the fields address and vrf, addresses and the local
// address as text) reads into peer identities, and is written back byte
// for byte: routers of any version read each other's documents.
func TestDocumentWireForm(t *testing.T) {
	const doc = `{"schema":1,"router_id":"pe","addresses":["10.0.0.1","2001:db8::1"],"published_at":"2026-12-03T12:00:00Z",` +
		`"refresh":"30s","switch_timeout":"5m0s","key_source":{"stale":false},"peers":[` +
		`{"address":"10.0.0.2","vrf":"red","local":"10.0.0.1","session":"established","keys":[],"roll":{"state":"steady"},` +
		`"counters":{"pkt_good":1,"pkt_bad":0,"pkt_key_not_found":0}},` +
		`{"address":"2001:db8::2","session":"idle","keys":[],"roll":{"state":""},"counters":{"pkt_good":0,"pkt_bad":0,"pkt_key_not_found":0}}]}`
	var d Document
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatal(err)
	}
	red := peerkey.KeyOf(netip.MustParseAddr("10.0.0.2"), "red")
	v6 := peerkey.KeyOf(netip.MustParseAddr("2001:db8::2"), "")
	if len(d.Peers) != 2 || d.Peers[0].ID != red || d.Peers[0].Local != netip.MustParseAddr("10.0.0.1") ||
		d.Peers[1].ID != v6 || d.Peers[1].Local.IsValid() || len(d.Addresses) != 2 {
		t.Fatalf("read %+v", d)
	}
	b, err := json.Marshal(d)
	if err != nil || string(b) != doc {
		t.Fatalf("written back as\n%s (%v)\nwant\n%s", b, err, doc)
	}
	var bad Peer
	if err := json.Unmarshal([]byte(`{"address":"nonsense"}`), &bad); err == nil {
		t.Error("a peer whose address is none was read")
	}
	if _, err := json.Marshal(Peer{}); err == nil {
		t.Error("a peer without an address was written")
	}
}
