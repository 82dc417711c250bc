package rotator

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestPlanEditInPlace: new material under an installed key's IDs (an
// edit in place) replaces the installed key at once where it
// authenticated nothing, or, on a listener, where only peers that are
// down carry it and their connections fail against it; it is held back
// (kept, edited-in-place) where the installed key authenticated
// something (good segments, Current_key or RNext_key, a session that
// carries it), while the start-up gate does not know yet, and on a
// session until the peer is seen to choose Current_key. Each plan says
// which rule decided (edit lines).
func TestPlanEditInPlace(t *testing.T) {
	const peer6 = "2001:db8::1/128"
	a, a2 := mkKey(peer6, 1, 1, "alpha"), mkKey(peer6, 1, 1, "alpha-new")
	b := mkKey(peer6, 2, 2, "bravo")
	// listener holds a and b; prep drives SYNs at it and returns the
	// Observed.Down it plans with.
	listener := func(prep func(s *testSock) []DownKey) func() (*testSock, []DownKey) {
		return func() (*testSock, []DownKey) {
			s := newListener()
			setup(s.AddKey(a, tcpao.AddOptions{}))
			setup(s.AddKey(b, tcpao.AddOptions{}))
			if prep == nil {
				return s, nil
			}
			return s, prep(s)
		}
	}
	syn := func(s *testSock, wrong bool, n int) {
		for range n {
			if synTo(s, a, wrong) == wrong {
				panic("a SYN was accepted against the wrong material, or refused with the right one")
			}
		}
	}
	// base is a's DownKey as the listener counts it now (DownWatch's
	// first sight of it carried by no session up).
	base := func(s *testSock) DownKey {
		for _, k := range observe(t, s).Keys {
			if k.KeyRef == a.KeyRef {
				return DownKey{Ref: k.KeyRef, FP: k.Fingerprint, PktGood: k.PktGood, PktBad: k.PktBad}
			}
		}
		panic("no key a on the listener")
	}
	established := func(prep func(s *testSock)) func() (*testSock, []DownKey) {
		return func() (*testSock, []DownKey) {
			s := newEstablished(b)
			setup(s.AddKey(a, tcpao.AddOptions{}))
			s.peerSendsWith(b, 1)
			if prep != nil {
				prep(s)
			}
			return s, nil
		}
	}
	lisD := Desired{Kind: Listening, Keys: []DesiredKey{dk(a2), dk(b)}}
	estD := Desired{Kind: Established, Keys: []DesiredKey{dk(a2), dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)}
	replaced := func(async, rule string) []string {
		return []string{
			"del send=1 recv=1 peer=2001:db8::1/128" + async + " (replace)",
			"add send=1 recv=1 peer=2001:db8::1/128 alg=hmac(sha256) maclen=12 (replace)",
			"edit send=1 recv=1 peer=2001:db8::1/128 (" + rule + ")",
		}
	}
	held := func(rule string) []string {
		return []string{"edit send=1 recv=1 peer=2001:db8::1/128 (" + rule + ")", "kept send=1 recv=1 peer=2001:db8::1/128 (edited-in-place)"}
	}
	carriedA := []tcpao.KeyRef{a.KeyRef}
	for _, c := range []struct {
		name    string
		sock    func() (*testSock, []DownKey)
		d       Desired
		carr    []tcpao.KeyRef
		settled bool
		want    []string
	}{{
		name: "listener key that verified nothing and no session carries: replaced",
		sock: listener(nil),
		d:    lisD,
		want: replaced(" async", "applied-unused"),
	}, {
		name: "listener key whose connects all failed: replaced",
		sock: listener(func(s *testSock) []DownKey { syn(s, true, 2); return nil }),
		d:    lisD,
		want: replaced(" async", "applied-unused"),
	}, {
		name: "listener key that verified a SYN: held",
		sock: listener(func(s *testSock) []DownKey { syn(s, false, 1); return nil }),
		d:    lisD,
		want: held("held-in-use"),
	}, {
		name: "listener key a session carries: held",
		sock: listener(nil),
		d:    lisD,
		carr: carriedA,
		want: held("held-in-use"),
	}, {
		name: "listener key under the start-up gate: held",
		sock: listener(nil),
		d: Desired{Kind: Listening, Keys: lisD.Keys,
			Frozen: []KeyRange{{Prefix: netip.MustParsePrefix("::/0"), AnyDevice: true}}},
		want: held("held-unread"),
	}, {
		name: "listener key only a peer that is down carries, its connects failing since: replaced",
		sock: listener(func(s *testSock) []DownKey {
			syn(s, false, 1) // the session that ended
			d := base(s)
			syn(s, true, 2) // the peer's connects with other material
			return []DownKey{d}
		}),
		d:    lisD,
		carr: carriedA,
		want: replaced(" async", "applied-peer-down"),
	}, {
		name: "listener key only a peer that is down carries, no connect failing since: held",
		sock: listener(func(s *testSock) []DownKey {
			syn(s, false, 1)
			syn(s, true, 2) // failures before the base: not since the session ended
			return []DownKey{base(s)}
		}),
		d:    lisD,
		carr: carriedA,
		want: held("held-in-use"),
	}, {
		name: "listener key only a peer that is down carries, a connect verified since: held",
		sock: listener(func(s *testSock) []DownKey {
			d := base(s)
			syn(s, true, 2)
			syn(s, false, 1) // the peer came back with the installed material
			return []DownKey{d}
		}),
		d:    lisD,
		carr: carriedA,
		want: held("held-in-use"),
	}, {
		name: "listener key whose base names other material: held",
		sock: listener(func(s *testSock) []DownKey {
			d := base(s)
			d.FP = tcpao.Fingerprint{0xff}
			syn(s, true, 2)
			return []DownKey{d}
		}),
		d:    lisD,
		carr: carriedA,
		want: held("held-in-use"),
	}, {
		name: "listener key only a peer that is down carries, under the start-up gate: held",
		sock: listener(func(s *testSock) []DownKey {
			d := base(s)
			syn(s, true, 2)
			return []DownKey{d}
		}),
		d: Desired{Kind: Listening, Keys: lisD.Keys,
			Frozen: []KeyRange{{Prefix: netip.MustParsePrefix("::/0"), AnyDevice: true}}},
		carr: carriedA,
		want: held("held-unread"),
	}, {
		name: "session key that is Current_key: held",
		sock: func() (*testSock, []DownKey) {
			s := newEstablished(a)
			setup(s.AddKey(b, tcpao.AddOptions{}))
			return s, nil
		},
		d:       Desired{Kind: Established, Keys: estD.Keys, WantCurrent: ID(1), WantRNext: ID(1)},
		settled: true,
		want:    held("held-in-use"),
	}, {
		name: "session key that is RNext_key: held",
		sock: established(func(s *testSock) {
			one := uint8(1)
			setup(s.SetInfo(tcpao.InfoChange{RNext: &one}))
		}),
		d:       estD,
		settled: true,
		want:    append([]string{"set rnext=2 (rnext)"}, held("held-in-use")...),
	}, {
		name:    "session key the peer sent with: held",
		sock:    established(func(s *testSock) { s.peerSendsWith(a, 2); s.peerSendsWith(b, 1) }),
		d:       estD,
		settled: true,
		want:    held("held-in-use"),
	}, {
		name: "session key that authenticated nothing, before the peer is seen to choose: held",
		sock: established(nil),
		d:    estD,
		want: held("held-unsettled"),
	}, {
		name:    "session key that authenticated nothing, the peer seen to choose: replaced",
		sock:    established(nil),
		d:       estD,
		settled: true,
		want:    replaced("", "applied-unused"),
	}} {
		t.Run(c.name, func(t *testing.T) {
			s, down := c.sock()
			obs := observe(t, s)
			obs.Carried, obs.Down, obs.Settled = c.carr, down, c.settled
			sp := PlanSocket(c.d, obs)
			if got := opLines(sp); !slices.Equal(got, c.want) {
				t.Fatalf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if _, err := Apply(s, sp.Ops); err != nil {
				t.Fatalf("apply: %v", err)
			}
			obs = observe(t, s)
			// The machine's own write of RNext_key (or Current_key)
			// makes it see the peer choose again (settle.go).
			obs.Carried, obs.Down, obs.Settled = c.carr, down, c.settled && !setsCurrentOrRNext(sp.Ops)
			if again := PlanSocket(c.d, obs); len(again.Ops) > 0 {
				t.Fatalf("replan not empty:\n%s", strings.Join(opLines(again), "\n"))
			}
		})
	}
}
