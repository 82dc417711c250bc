package fleet

import (
	"context"
	"testing"
	"time"

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
		byVRF[pr.VRF] = pr
	}
	r, b := byVRF["red"], byVRF["blue"]
	if r.Address != "10.255.17.2" || b.Address != "10.255.17.2" || len(r.Keys) != 1 || len(b.Keys) != 1 ||
		r.Keys[0].Name != "k2" || b.Keys[0].Name != "k61" || r.Counters.PktGood != 10 || b.Counters.PktGood != 20 {
		t.Fatalf("the twins were mixed up: red %+v, blue %+v", r, b)
	}
	if !r.CurrentSince.Equal(now) || !b.CurrentSince.Equal(now.Add(-time.Minute)) {
		t.Fatalf("current key since: red %v (want %v), blue %v (want %v)", r.CurrentSince, now, b.CurrentSince, now.Add(-time.Minute))
	}
}
