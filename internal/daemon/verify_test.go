package daemon_test

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// A session that goes down and whose reconnects fail verification on the
// listener (here: the peer's key excludes TCP options, ours includes them,
// which an established session does not notice) is visible in status:
// the key's tcp_options, the listener's per-key and socket counters for the
// peer, and the warning, as soon as one failing segment is counted. A good
// reconnect clears it.
func TestStatusShowsVerifyFailingOnListener(t *testing.T) {
	synctest.Test(t, testStatusShowsVerifyFailingOnListener)
}

func testStatusShowsVerifyFailingOnListener(t *testing.T) {
	_, k1, _, _ := testKeys()
	reg := prometheus.NewRegistry()
	mx, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{keys: []testKey{k1}, metrics: mx})
	verifyGauge := func() float64 { return gauge(t, mx.Gatherer(), peerAddr.String()) }
	e.waitKeys("listener", e.lis, ids(k1))
	e.up(ids(k1), k1)
	warn := control.WarnVerifyFailing(peerAddr.String())

	ps := e.peerStatus()
	if len(ps.Keys) != 1 || ps.Keys[0].TCPOptions != control.TCPOptionsInclude {
		t.Fatalf("status keys %+v: want k1 with tcp_options include", ps.Keys)
	}
	if ps.Listener == nil || len(ps.Listener.Keys) != 1 || ps.Listener.Keys[0].TCPOptions != control.TCPOptionsInclude ||
		ps.Listener.Keys[0].Shared || ps.Listener.VerifyFailing {
		t.Fatalf("status listener %+v: want k1 (include, unshared), not failing", ps.Listener)
	}

	// The session drops; the peer reconnects with the same secret and IDs
	// but tcp_options exclude.
	e.sp.Set(bgp.PeerInfo{Neighbor: peerAddr, Local: localAddr, State: bgp.StateActive, Passive: true, PeerASN: 65002})
	// Down as the daemon has taken it in (OnDown recorded the listener's
	// counters and let go of the socket), not only as the speaker says:
	// status reads the state from the speaker before the event arrives.
	e.waitFor("session down in the daemon", func() bool {
		ps := e.peerStatus()
		return ps.SessionState != "established" &&
			!slices.ContainsFunc(ps.Sockets, func(s control.Socket) bool { return s.Kind == control.KindEstablished })
	})
	if ps := e.peerStatus(); slices.Contains(ps.Warnings, warn) {
		t.Fatalf("warning before any failing segment: %v", ps.Warnings)
	}
	if v := verifyGauge(); v != 0 {
		t.Fatalf("%s = %v before any failing segment, want 0", metrics.NamePeerVerifyFailing, v)
	}
	bad, err := e.net.Socket(peerAddr)
	if err != nil {
		t.Fatal(err)
	}
	m := k1.mirror()
	m.ExcludeOptions = true
	if err := bad.AddKey(m, tcpao.AddOptions{}); err != nil {
		t.Fatal(err)
	}
	m.Secret.Zero()
	if _, err := e.net.Connect(bad, e.lis); !errors.Is(err, tcpaotest.ErrTimeout) {
		t.Fatalf("reconnect with tcp_options exclude: %v, want the SYN dropped", err)
	}
	if v := verifyGauge(); v != 1 {
		t.Errorf("%s = %v after a failing reconnect, want 1", metrics.NamePeerVerifyFailing, v)
	}
	ps = e.peerStatus()
	if !slices.Contains(ps.Warnings, warn) {
		t.Fatalf("status warnings %q: want %q", ps.Warnings, warn)
	}
	l := ps.Listener
	if l == nil || !l.VerifyFailing || len(l.Keys) != 1 || l.Keys[0].PktBad != 1 || l.PktBad != 1 ||
		l.Keys[0].Prefix != netip.PrefixFrom(peerAddr, 32).String() || l.Keys[0].SendID != k1.send {
		t.Fatalf("status listener %+v: want k1's listener key with pkt_bad 1, socket pkt_bad 1, failing", l)
	}

	// A reconnect with the right key clears it.
	e.up(ids(k1), k1)
	if ps := e.peerStatus(); slices.Contains(ps.Warnings, warn) || ps.Listener.VerifyFailing {
		t.Fatalf("warning after a good reconnect: %v", ps.Warnings)
	}
	if v := verifyGauge(); v != 0 {
		t.Errorf("%s = %v after a good reconnect, want 0", metrics.NamePeerVerifyFailing, v)
	}
}

// gauge scrapes reg and returns peer's verify-failing gauge (-1: no
// series).
func gauge(t *testing.T, reg prometheus.Gatherer, peer string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metrics.NamePeerVerifyFailing {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == metrics.LabelPeer && l.GetValue() == peer {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
