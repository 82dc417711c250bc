package frr

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
)

// birdLab is FRR (A, managed by aokeyd) and BIRD (B).
type birdLab struct {
	t      *testing.T
	dir    string
	frr    *Router
	aokeyd *aokeyd
	bird   *bird.Router
	active bool // A opens the connection under `aokeyd exec`; B is passive
}

// newBirdLab starts A (bgpd and aokeyd with keys) and B (BIRD with
// birdCfg).
func newBirdLab(t *testing.T, active bool, keys []key, birdCfg bird.Config) *birdLab {
	t.Helper()
	lab.RequireNetns(t)
	l := &birdLab{t: t, dir: t.TempDir(), active: active}
	a, b := lab.Pair(t, netip.PrefixFrom(addrA, 30), netip.PrefixFrom(addrB, 30))
	writeKeys(t, l.dir, addrB, keys, false)
	var opt Options
	cg := ""
	if active {
		cg = filepath.Join(l.dir, "cg.sock")
		opt = wrapOptions(t, cg, l.dir)
	}
	l.frr = Start(t, a, l.dir, frrConfig(!active), opt)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bgpd logs:\n%s", l.frr.LogTail())
		}
	})
	l.aokeyd = startAokeyd(t, a, l.dir, addrB, speakerFRR(l.frr), cg)
	if opt.Later {
		l.frr.WaitReady()
	}
	l.bird = bird.Start(t, b, birdCfg)
	return l
}

// session is what must never change while rotations run.
type session struct {
	uptime    time.Time
	flops     uint32
	local     uint16
	birdSince string
}

func (l *birdLab) peer() bgp.PeerInfo {
	l.t.Helper()
	p, err := l.frr.Peer(addrB)
	if err != nil {
		l.t.Fatalf("FRR's view of B: %v", err)
	}
	return p
}

// waitEstablished waits for the session on both sides with all routes both
// ways and TCP-AO on A's socket.
func (l *birdLab) waitEstablished(timeout time.Duration) session {
	l.t.Helper()
	var s session
	lab.Eventually(l.t, timeout, "session established with TCP-AO, routes both ways", func() (bool, string) {
		p, err := l.frr.Peer(addrB)
		if err != nil {
			return false, err.Error()
		}
		st, err := l.bird.Protocol()
		if err != nil {
			return false, err.Error()
		}
		rb, _ := l.bird.Routes()
		acc, _, _ := l.frr.Routes(addrB)
		ast, aerr := l.aokeyd.status()
		s = session{uptime: p.Uptime, flops: p.Flops, local: p.LocalPort, birdSince: st.Since}
		ok := p.Established() && st.BGPState == "Established" && rb == len(routesA) && acc == len(routesB) &&
			aerr == nil && len(ast.Keys) > 0 && slices.ContainsFunc(ast.Keys, func(k control.Key) bool { return k.PktGood > 0 })
		return ok, fmt.Sprintf("FRR %s, BIRD %s (%s), routes at B %d, at A %d, A keys %v %v", p.State, st.BGPState, st.LastError, rb, acc, lab.KeyList(ast.Keys), aerr)
	})
	return s
}

// checkNoFlap fails the test when the session went down since s.
func (l *birdLab) checkNoFlap(s session, when string) {
	l.t.Helper()
	p := l.peer()
	st, err := l.bird.Protocol()
	if err != nil {
		l.t.Fatal(err)
	}
	if !p.Established() || !p.Uptime.Equal(s.uptime) || p.Flops != s.flops || p.LocalPort != s.local {
		l.t.Fatalf("%s: FRR session flapped: %s uptime %v (was %v) flops %d (was %d) local port %d (was %d)",
			when, p.State, p.Uptime, s.uptime, p.Flops, s.flops, p.LocalPort, s.local)
	}
	if st.BGPState != "Established" || !bird.SameSince(st.Since, s.birdSince) {
		l.t.Fatalf("%s: BIRD session flapped: %s since %s (was %s)", when, st.BGPState, st.Since, s.birdSince)
	}
	rb, err := l.bird.Routes()
	acc, _, aerr := l.frr.Routes(addrB)
	if err != nil || aerr != nil || rb != len(routesA) || acc != len(routesB) {
		l.t.Fatalf("%s: routes at B %d (want %d), at A %d (want %d): %v %v", when, rb, len(routesA), acc, len(routesB), err, aerr)
	}
}

// roll performs round r from cur to the next key the way an operator's
// automation and a BIRD operator do it, and checks the result: only the new
// key on A's established and listening sockets, current on both ends, pkt_bad
// 0, no flap since s, routes both ways. It returns the new key.
func (l *birdLab) roll(r int, cur key, s session) key {
	t := l.t
	t.Helper()
	next := key{i: cur.i + 1}
	t0 := time.Now()
	if err := l.bird.Configure(birdConfig([]key{cur, next}, l.active)); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old := cur
	old.sendEnd, old.acceptEnd = now.Add(2*time.Second), now.Add(3*time.Second)
	next.sendStart, next.acceptStart = now.Add(-time.Second), now.Add(-time.Second)
	writeKeys(t, l.dir, addrB, []key{old, next}, false)
	lab.Eventually(t, 40*time.Second, fmt.Sprintf("round %d: A's session carries k%d and B sends with it", r, next.i), func() (bool, string) {
		st, err := l.aokeyd.status()
		if err != nil {
			return false, err.Error()
		}
		bs, _ := l.bird.Protocol()
		return hasSending(st, next.sendID()), fmt.Sprintf("A keys %v, BIRD current %d", lab.KeyList(st.Keys), bs.CurrentKey)
	})
	t1 := time.Now()
	prefNext := next
	prefNext.birdPreferred = true
	depOld := cur
	depOld.birdPreferred, depOld.birdDepr = false, true
	if err := l.bird.Configure(birdConfig([]key{depOld, prefNext}, l.active)); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 40*time.Second, fmt.Sprintf("round %d: only k%d left on A, current on both sides", r, next.i), func() (bool, string) {
		st, err := l.aokeyd.status()
		if err != nil {
			return false, err.Error()
		}
		bs, _ := l.bird.Protocol()
		lk := listenerKeys(t, l.frr.PID)
		ok := hasOnly(st, next.sendID()) && bs.CurrentKey == int(next.recvID()) && len(lk) == 1 && lk[0].SendID == next.sendID()
		return ok, fmt.Sprintf("A keys %v (%s), listener %d keys, BIRD current %d rnext %d", lab.KeyList(st.Keys), st.Rotation.State, len(lk), bs.CurrentKey, bs.RNextKey)
	})
	t2 := time.Now()
	if err := l.bird.Configure(birdConfig([]key{prefNext}, l.active)); err != nil {
		t.Fatal(err)
	}
	st := l.aokeyd.mustStatus(t)
	bs, _ := l.bird.Protocol()
	if st.Counters.PktBad != 0 || bs.PktBad != 0 {
		t.Fatalf("round %d: pkt_bad A=%d B=%d, want 0", r, st.Counters.PktBad, bs.PktBad)
	}
	l.checkNoFlap(s, fmt.Sprintf("round %d", r))
	t.Logf("round %d: %v (B sends with k%d after %v, only k%d left after %v more)", r, time.Since(t0).Round(10*time.Millisecond),
		next.i, t1.Sub(t0).Round(10*time.Millisecond), next.i, t2.Sub(t1).Round(10*time.Millisecond))
	return prefNext
}

// pktBad is A's and B's pkt_bad together.
func (l *birdLab) pktBad() uint64 {
	st := l.aokeyd.mustStatus(l.t)
	bs, _ := l.bird.Protocol()
	return st.Counters.PktBad + bs.PktBad
}

// rotateScenario is the FRR ↔ BIRD proof in one mode: a wrong key is
// refused, the right one establishes, then n scheduled rotations run with
// routes both ways, FRR's uptime and BIRD's since unchanged and pkt_bad 0.
func rotateScenario(t *testing.T, active bool, n int) {
	t.Helper()
	mode := "passive"
	if active {
		mode = "active"
	}
	k1 := key{i: 1, birdPreferred: true}
	wrong := birdConfig([]key{k1}, active)
	wrong.Keys[0].Secret = secretOf(99)
	l := newBirdLab(t, active, []key{k1}, wrong)
	// Passive: BIRD's SYNs, signed with the wrong secret, are dropped by
	// bgpd's listener (its key counts them as bad). Active: bgpd's SYNs
	// reach BIRD's listener, whose wrong key drops them; birdc may show no
	// counters without a session, so the proof there is that no session
	// comes up while FRR keeps trying.
	refusedSince := time.Now()
	lab.Eventually(t, 30*time.Second, "the wrong key is refused", func() (bool, string) {
		var bad uint64
		for _, k := range listenerKeys(t, l.frr.PID) {
			bad += k.PktBad
		}
		bs, _ := l.bird.Protocol()
		p := l.peer()
		if p.Established() || bs.BGPState == "Established" {
			refusedSince = time.Now()
		}
		evidence := bad > 0 || bs.PktBad > 0 || (active && time.Since(refusedSince) > 8*time.Second)
		return evidence && !p.Established() && bs.BGPState != "Established",
			fmt.Sprintf("A listener pkt_bad %d, BIRD bad %d %s (%s), FRR %s", bad, bs.PktBad, bs.BGPState, bs.LastError, p.State)
	})
	t.Logf("%s: wrong key refused (FRR %s)", mode, l.peer().State)
	if err := l.bird.Configure(birdConfig([]key{k1}, active)); err != nil {
		t.Fatal(err)
	}
	_, _ = l.bird.Birdc("restart", "peer_a")
	s := l.waitEstablished(60 * time.Second)
	st := l.aokeyd.mustStatus(t)
	t.Logf("%s: session up with TCP-AO, A keys %v sockets %v", mode, lab.KeyList(st.Keys), st.Sockets)
	start := time.Now()
	cur := k1
	for r := 1; r <= n; r++ {
		cur = l.roll(r, cur, s)
	}
	t.Logf("%s: %d rotations in %v", mode, n, time.Since(start).Round(time.Second))
	frrLine(t, "bird", mode, n, int(l.peer().Flops-s.flops), l.pktBad())
}

// TestFRRBirdPassive: FRR passive (BIRD connects), keyed on bgpd's listener
// by aokeyd.
func TestFRRBirdPassive(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	rotateScenario(t, false, rounds(t, defaultRounds))
}

// TestFRRBirdActive: FRR opens the connection under `aokeyd exec` (the
// bgpd_wrap of /etc/frr/daemons), BIRD is passive.
func TestFRRBirdActive(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	rotateScenario(t, true, rounds(t, defaultRounds))
}
