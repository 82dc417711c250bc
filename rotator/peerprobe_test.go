package rotator

import (
	"testing"
	"testing/synctest"
	"time"
)

// silence steps both machines of l for up to limit on the manual clock,
// with no segment between the sockets but what the machines' keepalive
// probes bring, until done holds; it reports whether it did.
func (l *link) silence(limit time.Duration, done func() bool) bool {
	for end := l.now.Add(limit); !done(); {
		if !l.now.Before(end) {
			return false
		}
		l.now = l.now.Add(250 * time.Millisecond)
		if !l.now.Before(l.nextX) {
			l.nextX = l.mx.step(l.now)
		}
		if !l.now.Before(l.nextY) {
			l.nextY = l.my.step(l.now)
		}
	}
	return true
}

// TestRollProbesASilentPeer: a roll's two waits for the peer's segment
// (its switch to the announced key; its segment with it after the grace
// period) are ended by the answers to the machines' keepalive probes, with
// no BGP traffic at all, and each socket's keepalive settings are as
// found once the roll is done (the owner's, when it turned keepalive on).
// Before, and with kernel.keepalive_probe false, the roll waited for the
// peer's own segments: with a silent peer it timed out.
func TestRollProbesASilentPeer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ownerKeep bool // the sockets' owner turned SO_KEEPALIVE on: its idle time alone changes
		noProbe   bool // kernel.keepalive_probe false
	}{{"probed", false, false}, {"owner's keepalive", true, false}, {"probes off", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
			l := newLink(t, a, want(a), want(a), nil)
			for range 8 {
				l.tick()
			}
			if tc.ownerKeep {
				l.x.SetKeepalive(true)
				l.y.SetKeepalive(true)
			}
			l.mx.cfg.NoPeerProbe, l.my.cfg.NoPeerProbe = tc.noProbe, tc.noProbe
			type ka struct {
				on               bool
				idle, intvl, cnt int
			}
			keep := func(s *testSock) ka {
				on, idle, intvl, cnt := s.Keepalive()
				return ka{on, idle, intvl, cnt}
			}
			x0, y0 := keep(l.x), keep(l.y)
			l.mx.setDesired(want(b), l.now)
			l.my.setDesired(farDesired(want(b)), l.now)
			rolled := l.silence(2*time.Minute, func() bool { return l.mx.st.Rolls > 0 && l.my.st.Rolls > 0 })
			switch {
			case tc.noProbe && rolled:
				t.Fatalf("the roll completed with no segment and no probe: x %+v", l.mx.st)
			case !tc.noProbe && !rolled:
				t.Fatalf("x %s %q, y %s %q after two silent minutes: want both rolled by the probes' answers",
					l.mx.st.State, l.mx.st.NextAction, l.my.st.State, l.my.st.NextAction)
			}
			if rolled && (l.mx.st.Current != ID(2) || l.my.st.Current != ID(2)) {
				t.Fatalf("rolled: x current %v, y current %v, want 2", l.mx.st.Current, l.my.st.Current)
			}
			if got := keep(l.x); got != x0 {
				t.Errorf("x's keepalive %+v, want %+v as found", got, x0)
			}
			if got := keep(l.y); got != y0 {
				t.Errorf("y's keepalive %+v, want %+v as found", got, y0)
			}
			if l.mx.probe != nil && !tc.noProbe {
				t.Errorf("x keeps a probe after its roll: %+v", l.mx.probe)
			}
		})
	}
}

// TestStopEndsTheProbe: a machine stopped while its wait's probe is armed
// (the peer lacks the announced key: its answers keep the old one) puts
// the socket's keepalive settings back as it stops.
func TestStopEndsTheProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
		ctl := NewController(Options{Config: Config{Poll: 100 * time.Millisecond, SwitchTimeout: time.Minute}})
		ctl.SetDesired(pid("p"), want(a))
		s := newEstablished(a) // the far end holds a alone
		type ka struct {
			on               bool
			idle, intvl, cnt int
		}
		keep := func() ka {
			on, idle, intvl, cnt := s.Keepalive()
			return ka{on, idle, intvl, cnt}
		}
		found := keep()
		if _, err := ctl.Accepted(pid("p"), s); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		ctl.SetDesired(pid("p"), Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)})
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		if st := ctl.Status()[0]; st.State != StateAnnounced {
			t.Fatalf("state %s, want announced (waiting for a peer that lacks key 2)", st.State)
		}
		if keep() == found {
			t.Fatal("no probe armed while the roll waits: nothing tested")
		}
		ctl.Close()
		if got := keep(); got != found {
			t.Fatalf("keepalive %+v after the machine stopped, want %+v as found", got, found)
		}
	})
}
