package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
)

// peerA is gobgpd's view of B.
func (l *testbed) peerA() bgp.PeerInfo {
	ps, err := l.speaker.Peers(context.Background())
	if err != nil {
		l.t.Fatalf("gobgpd ListPeer: %v", err)
	}
	for _, p := range ps {
		if p.Neighbor == l.ipB() {
			return p
		}
	}
	l.t.Fatalf("gobgpd has no neighbor %s", l.ipB())
	return bgp.PeerInfo{}
}

func (l *testbed) routesAtA() int {
	n, err := l.rib.size(context.Background())
	if err != nil {
		l.t.Fatalf("gobgpd GetTable: %v", err)
	}
	return n
}

func (l *testbed) status() control.PeerStatus {
	l.t.Helper()
	st, err := l.tryStatus()
	if err != nil {
		l.t.Fatal(err)
	}
	return st
}

// tryStatus is status that tolerates a daemon being restarted.
func (l *testbed) tryStatus() (control.PeerStatus, error) {
	rep, err := l.ctl.Status(context.Background(), l.ipB().String())
	if err != nil {
		return control.PeerStatus{}, fmt.Errorf("aoctl status: %w", err)
	}
	if len(rep.Peers) != 1 {
		return control.PeerStatus{}, fmt.Errorf("aoctl status: %d peers", len(rep.Peers))
	}
	return rep.Peers[0], nil
}

// notForeign is ks without the keys the test installed as another agent.
func (l *testbed) notForeign(ks []tcpao.KeyInfo) []tcpao.KeyInfo {
	return slices.DeleteFunc(ks, func(k tcpao.KeyInfo) bool { return l.foreign[[2]uint8{k.SendID, k.RecvID}] })
}

// listenerKeys reads gobgpd's listening sockets' keys straight from the
// kernel (through a pidfd_getfd duplicate), independently of aokeyd.
func (l *testbed) listenerKeys() []tcpao.KeyInfo {
	refs, err := sockets.System{}.Listeners(l.gobgp.PID, 179)
	if err != nil {
		l.t.Fatalf("gobgpd listeners: %v", err)
	}
	var out []tcpao.KeyInfo
	for _, r := range refs {
		err := sockets.System{}.With(r, func(fd int) error {
			ks, err := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{})
			out = append(out, ks...)
			return err
		})
		if err != nil && !strings.Contains(err.Error(), "no such file") {
			l.t.Fatalf("listener %s keys: %v", r, err)
		}
	}
	return out
}

// session is what must never change while rotations run.
type session struct {
	uptime    time.Time
	flops     uint32
	birdSince string
}

func (l *testbed) waitEstablished(timeout time.Duration) session {
	l.t.Helper()
	var s session
	lab.Eventually(l.t, timeout, "session established on both sides with all routes", func() (bool, string) {
		p := l.peerA()
		st, err := l.bird.Protocol()
		if err != nil {
			return false, err.Error()
		}
		rb, _ := l.bird.Routes()
		ra := l.routesAtA()
		s = session{uptime: p.Uptime, flops: p.Flops, birdSince: st.Since}
		ok := p.Established() && st.BGPState == "Established" && rb == len(routesA) && ra >= len(routesA)+len(routesB)
		return ok, fmt.Sprintf("gobgpd %s, bird %s (%s), routes at B %d, at A %d", p.State, st.BGPState, st.LastError, rb, ra)
	})
	return s
}

// checkNoFlap fails the test when the session went down since s.
func (l *testbed) checkNoFlap(s session, when string) {
	l.t.Helper()
	p := l.peerA()
	st, err := l.bird.Protocol()
	if err != nil {
		l.t.Fatal(err)
	}
	if !p.Established() || p.Uptime != s.uptime || p.Flops != s.flops {
		l.t.Fatalf("%s: gobgpd session flapped: state %s uptime %v (was %v) flops %d (was %d)", when, p.State, p.Uptime, s.uptime, p.Flops, s.flops)
	}
	if st.BGPState != "Established" || !bird.SameSince(st.Since, s.birdSince) {
		l.t.Fatalf("%s: BIRD session flapped: %s since %s (was %s)", when, st.BGPState, st.Since, s.birdSince)
	}
	rb, err := l.bird.Routes()
	if err != nil || rb != len(routesA) {
		l.t.Fatalf("%s: BIRD has %d routes from A (want %d): %v", when, rb, len(routesA), err)
	}
	if ra := l.routesAtA(); ra < len(routesA)+len(routesB) {
		l.t.Fatalf("%s: gobgpd has %d routes (want %d)", when, ra, len(routesA)+len(routesB))
	}
}

// aKey is A's key of send ID id on its session with B, from A's status
// (zero when A does not list it).
func (l *testbed) aKey(id uint8) control.Key {
	l.t.Helper()
	st, err := l.tryStatus()
	if err != nil {
		return control.Key{}
	}
	for _, k := range st.Keys {
		if k.SendID == id {
			return k
		}
	}
	return control.Key{}
}
