package rotator

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/golden"
	"github.com/aokeyd/aokeyd/tcpao"
)

const peerA = "192.0.2.1/32"

func TestPlanSocket(t *testing.T) {
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	a2 := mkKey(peerA, 1, 1, "alpha-new")
	b2 := mkKey("192.0.2.2/32", 2, 2, "bravo")
	// a as an accepted socket inherits it from a listener that holds it
	// for the binding's prefix.
	a64 := mkKey("192.0.2.0/24", 1, 1, "alpha")
	cases := []struct {
		name string
		sock func() *testSock
		d    Desired
		carr []tcpao.KeyRef // Observed.Carried
		want []string
	}{{
		name: "listener first keys",
		sock: func() *testSock { return newListener() },
		d:    Desired{Kind: Listening, Keys: []DesiredKey{dk(a), dk(b2)}},
		want: []string{
			"add send=1 recv=1 peer=192.0.2.1/32 alg=hmac(sha256) maclen=12 (new)",
			"add send=2 recv=2 peer=192.0.2.2/32 alg=hmac(sha256) maclen=12 (new)",
		},
	}, {
		name: "listener roll adds before async delete",
		sock: func() *testSock { s := newListener(); _ = s.AddKey(a, tcpao.AddOptions{}); return s },
		d:    Desired{Kind: Listening, Keys: []DesiredKey{dk(b)}, AORequired: true},
		want: []string{
			"add send=2 recv=2 peer=192.0.2.1/32 alg=hmac(sha256) maclen=12 (new)",
			"set ao-required=true (ao-required)",
			"del send=1 recv=1 peer=192.0.2.1/32 async (stale)",
		},
	}, {
		name: "listener secret edited in place is held back while a session carries it",
		sock: func() *testSock { s := newListener(); _ = s.AddKey(a, tcpao.AddOptions{}); return s },
		d:    Desired{Kind: Listening, Keys: []DesiredKey{dk(a2)}},
		carr: []tcpao.KeyRef{a.KeyRef},
		want: []string{"edit send=1 recv=1 peer=192.0.2.1/32 (held-in-use)", "kept send=1 recv=1 peer=192.0.2.1/32 (edited-in-place)"},
	}, {
		name: "listener secret edited in place that authenticated nothing is delete then add",
		sock: func() *testSock { s := newListener(); _ = s.AddKey(a, tcpao.AddOptions{}); return s },
		d:    Desired{Kind: Listening, Keys: []DesiredKey{dk(a2)}},
		want: []string{
			"del send=1 recv=1 peer=192.0.2.1/32 async (replace)",
			"add send=1 recv=1 peer=192.0.2.1/32 alg=hmac(sha256) maclen=12 (replace)",
			"edit send=1 recv=1 peer=192.0.2.1/32 (applied-unused)",
		},
	}, {
		name: "listener secret change an operator approved is delete then add",
		sock: func() *testSock { s := newListener(); _ = s.AddKey(a, tcpao.AddOptions{}); return s },
		d:    Desired{Kind: Listening, Keys: []DesiredKey{dk(a2)}, Replace: []tcpao.KeyRef{a.KeyRef}},
		carr: []tcpao.KeyRef{a.KeyRef},
		want: []string{
			"del send=1 recv=1 peer=192.0.2.1/32 async (replace)",
			"add send=1 recv=1 peer=192.0.2.1/32 alg=hmac(sha256) maclen=12 (replace)",
			"edit send=1 recv=1 peer=192.0.2.1/32 (applied-approved)",
		},
	}, {
		name: "listener key a session carries stays after its lifetime ends",
		sock: func() *testSock { s := newListener(); _ = s.AddKey(a64, tcpao.AddOptions{}); return s },
		d:    Desired{Kind: Listening, Keys: []DesiredKey{dk(b)}},
		carr: []tcpao.KeyRef{a.KeyRef},
		want: []string{
			"add send=2 recv=2 peer=192.0.2.1/32 alg=hmac(sha256) maclen=12 (new)",
			"kept send=1 recv=1 peer=192.0.2.0/24 (carried)",
		},
	}, {
		name: "listener key a session carries goes when revoked",
		sock: func() *testSock { s := newListener(); _ = s.AddKey(a, tcpao.AddOptions{}); return s },
		d:    Desired{Kind: Listening, Keys: []DesiredKey{dk(b)}, Revoked: revokedOf(a)},
		carr: []tcpao.KeyRef{a.KeyRef},
		want: []string{
			"add send=2 recv=2 peer=192.0.2.1/32 alg=hmac(sha256) maclen=12 (new)",
			"del send=1 recv=1 peer=192.0.2.1/32 async (revoked)",
		},
	}, {
		name: "listener key of another VRF's session is not carried",
		sock: func() *testSock { s := newListener(); _ = s.AddKey(a, tcpao.AddOptions{}); return s },
		d:    Desired{Kind: Listening},
		carr: []tcpao.KeyRef{{Peer: a.Peer, IfIndex: 7, SendID: 1, RecvID: 1}},
		want: []string{"del send=1 recv=1 peer=192.0.2.1/32 async (stale)"},
	}, {
		name: "established stale key the peer sent with is deferred, not deleted",
		sock: func() *testSock {
			s := newEstablished(b)
			_ = s.AddKey(a, tcpao.AddOptions{})
			s.peerSendsWith(a, 4) // the peer's last segments came with a
			return s
		},
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)},
		want: []string{"defer send=1 recv=1 peer=192.0.2.1/32 (in-use)"},
	}, {
		name: "established stale key the roll proved unused is retired",
		sock: func() *testSock {
			s := newEstablished(b)
			_ = s.AddKey(a, tcpao.AddOptions{})
			s.peerSendsWith(a, 4)
			return s
		},
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(b)}, WantCurrent: ID(2), WantRNext: ID(2), Retire: []tcpao.KeyRef{a.KeyRef}},
		want: []string{"del send=1 recv=1 peer=192.0.2.1/32 (stale)"},
	}, {
		name: "established only key past its lifetime carries the session: kept",
		sock: func() *testSock { s := newEstablished(a); s.peerSendsWith(a, 9); return s },
		d:    Desired{Kind: Established},
		want: []string{"kept send=1 recv=1 peer=192.0.2.1/32 (carried)"},
	}, {
		name: "established install and announce, current left to the peer",
		sock: func() *testSock { return newEstablished(a) },
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)},
		want: []string{
			"add send=2 recv=2 peer=192.0.2.1/32 alg=hmac(sha256) maclen=12 (new)",
			"set rnext=2 (rnext)",
		},
	}, {
		name: "established stale current is deferred",
		sock: func() *testSock { return newEstablished(a) },
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)},
		want: []string{
			"add send=2 recv=2 peer=192.0.2.1/32 alg=hmac(sha256) maclen=12 (new)",
			"set rnext=2 (rnext)",
			"defer send=1 recv=1 peer=192.0.2.1/32 (in-use)",
		},
	}, {
		name: "established revoked current is force-deleted naming its replacement",
		sock: func() *testSock { return newEstablished(a) },
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(b)}, Revoked: revokedOf(a)},
		want: []string{
			"add send=2 recv=2 peer=192.0.2.1/32 alg=hmac(sha256) maclen=12 (new)",
			"set rnext=2 (rnext)",
			"del send=1 recv=1 peer=192.0.2.1/32 force-current=2 (revoked)",
		},
	}, {
		name: "established approved secret change of current key with a spare the peer was seen to use",
		sock: func() *testSock {
			s := newEstablished(a)
			_ = s.AddKey(b, tcpao.AddOptions{})
			s.peerSendsWith(b, 3) // segments from the peer verified with b: the peer holds it
			return s
		},
		d: Desired{Kind: Established, Keys: []DesiredKey{dk(a2), dk(b)}, WantCurrent: ID(1), WantRNext: ID(1), Replace: []tcpao.KeyRef{a.KeyRef}},
		want: []string{
			"del send=1 recv=1 peer=192.0.2.1/32 force-current=2 force-rnext=2 (replace)",
			"add send=1 recv=1 peer=192.0.2.1/32 alg=hmac(sha256) maclen=12 (replace)",
			"set rnext=1 (rnext)",
			"edit send=1 recv=1 peer=192.0.2.1/32 (applied-approved)",
		},
	}, {
		name: "established approved secret change of current key naming a spare the peer was never seen to use is refused",
		sock: func() *testSock { s := newEstablished(a); _ = s.AddKey(b, tcpao.AddOptions{}); return s },
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(a2), dk(b)}, WantCurrent: ID(1), WantRNext: ID(1), Replace: []tcpao.KeyRef{a.KeyRef}},
		want: []string{"set rnext=2 (rnext)", "blocked send=1 recv=1 peer=192.0.2.1/32 (no-replacement)"},
	}, {
		name: "established secret edited in place is held back, the spare notwithstanding",
		sock: func() *testSock {
			s := newEstablished(a)
			_ = s.AddKey(b, tcpao.AddOptions{})
			s.peerSendsWith(b, 3)
			return s
		},
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(a2), dk(b)}, WantCurrent: ID(1), WantRNext: ID(1)},
		want: []string{"edit send=1 recv=1 peer=192.0.2.1/32 (held-in-use)", "kept send=1 recv=1 peer=192.0.2.1/32 (edited-in-place)"},
	}, {
		name: "established key inherited with the binding's prefix is the desired host key",
		sock: func() *testSock { return newEstablished(a64) },
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(a)}, WantCurrent: ID(1), WantRNext: ID(1)},
		want: nil,
	}, {
		name: "established key inherited with the binding's prefix is the desired prefix key",
		sock: func() *testSock { return newEstablished(a64) },
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(a64)}, WantCurrent: ID(1), WantRNext: ID(1)},
		want: nil,
	}, {
		name: "established roll under a prefix binding adds and announces, Current_key left to the peer",
		sock: func() *testSock { return newEstablished(a64) },
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)},
		want: []string{
			"add send=2 recv=2 peer=192.0.2.1/32 alg=hmac(sha256) maclen=12 (new)",
			"set rnext=2 (rnext)",
		},
	}, {
		name: "established revoked key inherited with the binding's prefix is force-deleted",
		sock: func() *testSock { return newEstablished(a64) },
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(b)}, Revoked: revokedOf(a)},
		want: []string{
			"add send=2 recv=2 peer=192.0.2.1/32 alg=hmac(sha256) maclen=12 (new)",
			"set rnext=2 (rnext)",
			"del send=1 recv=1 peer=192.0.2.0/24 force-current=2 (revoked)",
		},
	}, {
		name: "established approved secret change of the only key is refused",
		sock: func() *testSock { return newEstablished(a) },
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(a2)}, Replace: []tcpao.KeyRef{a.KeyRef}},
		want: []string{"blocked send=1 recv=1 peer=192.0.2.1/32 (no-replacement)"},
	}, {
		name: "established secret of the only key edited in place is held back",
		sock: func() *testSock { return newEstablished(a) },
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(a2)}},
		want: []string{"edit send=1 recv=1 peer=192.0.2.1/32 (held-in-use)", "kept send=1 recv=1 peer=192.0.2.1/32 (edited-in-place)"},
	}, {
		name: "established without TCP-AO",
		sock: func() *testSock { return newEstablished() },
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(a)}},
		want: []string{"blocked - (invalid)"},
	}, {
		name: "desired keys that collide",
		sock: func() *testSock { return newListener() },
		d:    Desired{Kind: Listening, Keys: []DesiredKey{dk(a), dk(mkKey(peerA, 1, 9, "x"))}},
		want: []string{"blocked - (invalid)"},
	}, {
		name: "current on an accept-only key is corrected",
		sock: func() *testSock { s := newEstablished(a); _ = s.AddKey(b, tcpao.AddOptions{}); return s },
		d:    Desired{Kind: Established, Keys: []DesiredKey{{Key: a, AcceptOnly: true}, dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)},
		want: []string{"set current=2 rnext=2 (rnext)"},
	}, {
		name: "current moved by the peer to another valid key is left alone",
		sock: func() *testSock {
			s := newEstablished(a)
			_ = s.AddKey(b, tcpao.AddOptions{})
			two := uint8(2)
			_ = s.SetInfo(tcpao.InfoChange{Current: &two})
			return s
		},
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(1), WantRNext: ID(1)},
		want: nil,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.sock()
			obs := observe(t, s)
			obs.Carried = c.carr
			sp := PlanSocket(c.d, obs)
			if got := opLines(sp); !slices.Equal(got, c.want) {
				t.Fatalf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if _, err := Apply(s, sp.Ops); err != nil {
				t.Fatalf("apply: %v", err)
			}
			obs = observe(t, s)
			obs.Carried = c.carr
			if again := PlanSocket(c.d, obs); !again.Empty() {
				t.Fatalf("replan not empty:\n%s", strings.Join(opLines(again), "\n"))
			}
		})
	}
}

// TestPlanGolden renders the plan for a small fleet so a reviewer sees what
// the planner decides. Run with -update to rewrite testdata/fleet.plan.
func TestPlanGolden(t *testing.T) {
	in := fleetInputs(t)
	got := renderString(t, PlanAll(in))
	golden.Check(t, filepath.Join("testdata", "fleet.plan"), got)
	if strings.Contains(got, "alpha") || strings.Contains(got, "bravo") {
		t.Fatal("rendered plan leaks key material")
	}
}

// fleetInputs is a listener serving five peers plus the sessions of four,
// each in a different situation; the fifth never came up, and its key is
// edited in place.
func fleetInputs(t *testing.T) []Input {
	old := func(p string) tcpao.Key { return mkKey(p, 1, 1, "alpha-"+p) }
	nw := func(p string) tcpao.Key { return mkKey(p, 2, 2, "bravo-"+p) }
	pRoll, pSteady, pRevoke, pLeak, pNew := "192.0.2.1/32", "192.0.2.2/32", "192.0.2.3/32", "2001:db8::4/128", "2001:db8::5/128"

	lis := newListener()
	for _, p := range []string{pRoll, pSteady, pRevoke, pLeak, pNew} {
		_ = lis.AddKey(old(p), tcpao.AddOptions{})
	}
	_ = lis.AddKey(mkKey("198.51.100.0/24", 7, 7, "gone"), tcpao.AddOptions{})
	lisD := Desired{Socket: "listen [::]:179", Kind: Listening, AORequired: true, Keys: []DesiredKey{
		dk(old(pRoll)), dk(nw(pRoll)), dk(old(pSteady)), dk(nw(pRevoke)), dk(mkKey(pLeak, 1, 1, "alpha-rotated")),
		dk(mkKey(pNew, 1, 1, "alpha-corrected")),
	}, Revoked: revokedOf(old(pRevoke))}

	roll := newEstablished(old(pRoll))
	steady := newEstablished(old(pSteady))
	revoke := newEstablished(old(pRevoke))
	leak := newEstablished(old(pLeak))
	_ = leak.AddKey(nw(pLeak), tcpao.AddOptions{})
	leak.peerSendsWith(nw(pLeak), 5) // the peer was seen sending with it: it may become current
	lisObs := observe(t, lis)
	for _, s := range []*testSock{roll, steady, revoke, leak} {
		lisObs.Carried = append(lisObs.Carried, CarriedKeys(observe(t, s))...)
	}
	return []Input{
		{Desired: lisD, Observed: lisObs},
		{Desired: Desired{Socket: SocketID("peer " + pRoll), Keys: []DesiredKey{dk(old(pRoll)), dk(nw(pRoll))}, WantCurrent: ID(2), WantRNext: ID(2)}, Observed: observe(t, roll)},
		{Desired: Desired{Socket: SocketID("peer " + pSteady), Keys: []DesiredKey{dk(old(pSteady))}, WantCurrent: ID(1), WantRNext: ID(1)}, Observed: observe(t, steady)},
		{Desired: Desired{Socket: SocketID("peer " + pRevoke), Keys: []DesiredKey{dk(nw(pRevoke))}, WantCurrent: ID(2), WantRNext: ID(2), Revoked: revokedOf(old(pRevoke))}, Observed: observe(t, revoke)},
		{Desired: Desired{Socket: SocketID("peer " + pLeak), Keys: []DesiredKey{dk(mkKey(pLeak, 1, 1, "alpha-rotated")), dk(nw(pLeak))}, WantCurrent: ID(1), WantRNext: ID(1)}, Observed: observe(t, leak)},
	}
}

// TestPlanRefusesBareObserved: a read without fingerprints cannot tell a
// key whose secret changed from the desired one, so the planner plans
// nothing from it (here it would have kept alpha where alpha-new is
// wanted) and says why.
func TestPlanRefusesBareObserved(t *testing.T) {
	a, a2 := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 1, 1, "alpha-new")
	s := newListener()
	if err := s.AddKey(a, tcpao.AddOptions{}); err != nil {
		t.Fatal(err)
	}
	d := Desired{Kind: Listening, Keys: []DesiredKey{dk(a2)}, Replace: []tcpao.KeyRef{a.KeyRef}}
	full, err := Observe(s, ReadFull)
	if err != nil {
		t.Fatal(err)
	}
	if sp := PlanSocket(d, full); len(sp.Ops) == 0 {
		t.Fatalf("full read: no ops, want the replacement of alpha")
	}
	bare, err := Observe(s, ReadBare)
	if err != nil {
		t.Fatal(err)
	}
	sp := PlanSocket(d, bare)
	if len(sp.Ops) != 0 || len(sp.Blocked) != 1 || sp.Blocked[0].Why != ReasonInvalid {
		t.Fatalf("bare read planned %v (blocked %v), want nothing and one invalid hold", sp.Ops, sp.Blocked)
	}
}
