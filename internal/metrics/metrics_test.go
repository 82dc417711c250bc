package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// newTest makes metrics with every per-peer family on (Options.PerKey),
// on a pedantic registry.
func newTest(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, Options{PerKey: true})
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func u8(v uint8) *uint8 { return &v }

// series counts the series of the named metrics that carry label=value.
func series(t *testing.T, g prometheus.Gatherer, label, value string) int {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					n++
				}
			}
		}
	}
	return n
}

func TestDeletePeer(t *testing.T) {
	m, _ := newTest(t)
	reg := m.Gatherer()
	a := Peer{Addr: "192.0.2.1"}
	b := Peer{Addr: "192.0.2.2", VRF: "blue"}
	for _, p := range []Peer{a, b} {
		m.SetPeerKeys(p, u8(1), u8(101), 2)
		m.SetRotationState(p, "steady")
		m.RotationStarted(p)
		m.RotationCompleted(p)
		m.RotationAborted(p, "switch-timeout")
		m.ObserveKeys(p, []KeyCounters{{Key: "core/a", SendID: 1, RecvID: 101, PktGood: 5}, {Key: "core/b", SendID: 2, RecvID: 102}})
		m.ObserveSocket(p, "peer "+p.Addr, SocketCounters{PktGood: 5, PktKeyNotFound: 1})
	}
	// 3 peer gauges + state + 3 rotation counters + 2x2 key counters + 4 socket counters.
	const perPeer = 3 + 1 + 3 + 4 + 4
	if got := series(t, reg, LabelPeer, a.Addr); got != perPeer {
		t.Fatalf("peer a has %d series, want %d", got, perPeer)
	}
	m.DeletePeer(a)
	if got := series(t, reg, LabelPeer, a.Addr); got != 0 {
		t.Errorf("after DeletePeer(a): %d series of a remain", got)
	}
	// A peer that comes back gets its state series again.
	m.SetRotationState(a, "steady")
	if got := series(t, reg, LabelPeer, a.Addr); got != 1 {
		t.Errorf("after DeletePeer(a) and a new state: %d series of a, want 1", got)
	}
	m.DeletePeer(a)
	if got := series(t, reg, LabelPeer, b.Addr); got != perPeer {
		t.Errorf("after DeletePeer(a): peer b has %d series, want %d", got, perPeer)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP aokeyd_key_pkt_good_total Segments verified with the key (TCP_AO_GET_KEYS pkt_good).
# TYPE aokeyd_key_pkt_good_total counter
aokeyd_key_pkt_good_total{key="core/a",peer="192.0.2.2",recv_id="101",send_id="1",vrf="blue"} 5
aokeyd_key_pkt_good_total{key="core/b",peer="192.0.2.2",recv_id="102",send_id="2",vrf="blue"} 0
`), NameKeyPktGood); err != nil {
		t.Error(err)
	}
}

func TestPeerGauges(t *testing.T) {
	m, _ := newTest(t)
	p := Peer{Addr: "2001:db8::1"}
	m.SetPeerKeys(p, u8(7), nil, 3)
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(`
# HELP aokeyd_peer_current_key_id SendID of the peer's Current_key (-1: none).
# TYPE aokeyd_peer_current_key_id gauge
aokeyd_peer_current_key_id{peer="2001:db8::1",vrf=""} 7
# HELP aokeyd_peer_rnext_key_id RecvID of the peer's RNext_key (-1: none).
# TYPE aokeyd_peer_rnext_key_id gauge
aokeyd_peer_rnext_key_id{peer="2001:db8::1",vrf=""} -1
`), NamePeerCurrentKeyID, NamePeerRNextKeyID); err != nil {
		t.Error(err)
	}
	other := Peer{Addr: "2001:db8::2"}
	m.SetRotationState(other, "steady")
	for _, st := range []string{"announced", "grace", "grace", "announced"} {
		m.SetRotationState(p, st)
	}
	// The present state of each of two peers, and no other.
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(`
# HELP aokeyd_rotation_state 1 for the rotation state the peer is in.
# TYPE aokeyd_rotation_state gauge
aokeyd_rotation_state{peer="2001:db8::1",state="announced",vrf=""} 1
aokeyd_rotation_state{peer="2001:db8::2",state="steady",vrf=""} 1
`), NameRotationState); err != nil {
		t.Error(err)
	}
}

func TestObserveKeysReplaces(t *testing.T) {
	m, _ := newTest(t)
	p := Peer{Addr: "192.0.2.1"}
	m.ObserveKeys(p, []KeyCounters{{Key: "c/old", SendID: 1, RecvID: 1}, {Key: "c/new", SendID: 2, RecvID: 2}})
	m.ObserveKeys(p, []KeyCounters{{Key: "c/new", SendID: 2, RecvID: 2, PktGood: 9}, {Key: "c/new", SendID: 2, RecvID: 2, PktGood: 10}})
	if n, err := testutil.GatherAndCount(m.Gatherer(), NameKeyPktGood); err != nil || n != 1 {
		t.Errorf("key series = %d (%v), want 1 (old key gone, duplicate merged)", n, err)
	}
	m.ObserveSocket(p, "listen 0.0.0.0:179", SocketCounters{PktAORequired: 4})
	m.DeleteSocket(p, "listen 0.0.0.0:179")
	if n, err := testutil.GatherAndCount(m.Gatherer(), NameSocketPktAORequired); err != nil || n != 0 {
		t.Errorf("socket series after DeleteSocket = %d (%v)", n, err)
	}
}

func TestGlobal(t *testing.T) {
	m, reg := newTest(t)
	m.KeySourceSynced(time.Unix(1700000000, 500_000_000))
	m.KeySourceFailed()
	m.Revoked("deleted")
	m.Revoked("deleted")
	m.Revoked("kept")
	m.RevokeDone(20 * time.Millisecond)
	m.SetOptmem(20480, 30000)
	m.ControlRefused()
	if got := testutil.ToFloat64(m.lastSync); got != 1700000000.5 {
		t.Errorf("last sync = %v", got)
	}
	if got := testutil.ToFloat64(m.revokes.WithLabelValues("deleted")); got != 2 {
		t.Errorf("revokes deleted = %v", got)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP aokeyd_optmem_needed_bytes Socket option memory the largest TCP-AO key set needs.
# TYPE aokeyd_optmem_needed_bytes gauge
aokeyd_optmem_needed_bytes 30000
`), NameOptmemNeeded); err != nil {
		t.Error(err)
	}
	// Every metric uses the aokeyd_ prefix and lints clean.
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}

func TestRegisterTwiceFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg, Options{}); err == nil {
		t.Error("registering the metrics twice on one registry succeeded")
	}
}

// TestOnCollect: the hook runs once per scrape, before the per-peer series
// are collected, so a scrape sees what the hook just set.
func TestOnCollect(t *testing.T) {
	m, _ := newTest(t)
	reg := m.Gatherer()
	calls := 0
	m.OnCollect(func() {
		calls++
		m.SetPeerKeys(Peer{Addr: "192.0.2.1"}, u8(uint8(calls)), nil, calls)
	})
	for want := 1; want <= 2; want++ {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if calls != want {
			t.Fatalf("hook ran %d times after %d scrapes", calls, want)
		}
		got := -1.0
		for _, mf := range mfs {
			if mf.GetName() == NamePeerCurrentKeyID {
				got = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		if got != float64(want) {
			t.Fatalf("scrape %d: %s = %v, want the value the hook set in this scrape (%d)", want, NamePeerCurrentKeyID, got, want)
		}
	}
}

func TestFleetSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewFleet(reg, []string{"publish", "status"})
	if err != nil {
		t.Fatal(err)
	}
	m.FleetFailed("publish")
	m.FleetPublished(time.Unix(1700000000, 0))
	if n := testutil.ToFloat64(m.errors.WithLabelValues("publish")); n != 1 {
		t.Errorf("publish errors %v", n)
	}
	if n := testutil.ToFloat64(m.errors.WithLabelValues("status")); n != 0 {
		t.Errorf("status errors %v", n)
	}
	if v := testutil.ToFloat64(m.lastPublish); v != 1700000000 {
		t.Errorf("last publish %v", v)
	}
}
