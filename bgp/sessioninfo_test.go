package bgp_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
)

type infoObs struct {
	got chan [2]*bgp.PeerInfo // the report OnEstablished got, and SessionInfo of its handle
}

func (o *infoObs) OnEstablished(_ context.Context, p bgp.PeerInfo, s bgp.SocketHandle) {
	o.got <- [2]*bgp.PeerInfo{&p, bgp.SessionInfo(s)}
}
func (o *infoObs) OnDown(context.Context, bgp.PeerInfo) {}

// TestSessionInfo: the handle OnEstablished gets leads to the tracker's
// own report of the session, equal to the one OnEstablished got, so the
// observer can keep it rather than a copy (the daemon's peer table); a
// listener's handle has none.
func TestSessionInfo(t *testing.T) {
	sp := bgptest.NewScriptedSpeaker("fake", 100, 0)
	disc := bgptest.NewDiscoverer(100, 7)
	connect(disc, 179, 40000)
	disc.Add(nil, netip.MustParseAddrPort("0.0.0.0:179"), netip.AddrPort{}, true)
	obs := &infoObs{got: make(chan [2]*bgp.PeerInfo, 4)}
	tr := bgp.NewTracker(sp, disc, obs, bgp.TrackerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- tr.Run(ctx) }()
	defer func() { cancel(); sp.Close(); <-done }()
	sp.Send(bgp.Event{Kind: bgp.EventSync, Peers: []bgp.PeerInfo{up(0, t0, 40000)}})
	select {
	case got := <-obs.got:
		if got[1] == nil || *got[1] != *got[0] {
			t.Fatalf("SessionInfo of the session's handle: %+v, want %+v", got[1], *got[0])
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no session handed over")
	}
	hs, err := tr.Listeners(context.Background())
	if err != nil || len(hs) != 1 {
		t.Fatalf("listeners %v %v", hs, err)
	}
	if p := bgp.SessionInfo(hs[0]); p != nil {
		t.Errorf("a listener's handle has a session's report: %+v", *p)
	}
}
