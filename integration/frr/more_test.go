package frr

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestFRRGobgpd: FRR (active, under `aokeyd exec`, with its aokeyd) and
// gobgpd (passive, with its own aokeyd) roll their keys together, each
// aokeyd from its own key file: rotations without a flap (10 with
// AOKEYD_FRR_ROUNDS=10).
func TestFRRGobgpd(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	lab.RequireNetns(t)
	n := rounds(t, defaultGobgpdRounds)
	na, nb := lab.Pair(t, netip.PrefixFrom(addrA, 30), netip.PrefixFrom(addrB, 30))
	dirA, dirB := t.TempDir(), t.TempDir()
	cur := key{i: 1}
	writeKeys(t, dirA, addrB, []key{cur}, false)
	writeKeys(t, dirB, addrA, []key{cur}, true)
	// B: gobgpd, passive, keyed on its listener by its aokeyd.
	g := lab.StartGobgpd(t, nb, "gobgpd", lab.GobgpdConfig{
		AS: asB, RouterID: addrB, LocalAddrs: []netip.Addr{addrB},
		Neighbors: []lab.Neighbor{{Addr: addrA, AS: asA, Passive: true}},
		HoldTime:  3, Keepalive: 1,
	}, lab.GobgpdOptions{Dir: dirB})
	ab := startAokeyd(t, nb, dirB, addrA, speakerGoBGP(g.API, g.PIDFile), "")
	// A: FRR, opening the connection under aokeyd exec.
	cg := filepath.Join(dirA, "cg.sock")
	r := Start(t, na, dirA, frrConfig(false), wrapOptions(t, cg, dirA))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bgpd logs:\n%s", r.LogTail())
		}
	})
	aa := startAokeyd(t, na, dirA, addrB, speakerFRR(r), cg)
	r.WaitReady()

	type sess struct {
		uptimeA, uptimeB time.Time
		flopsA, flopsB   uint32
	}
	var s sess
	lab.Eventually(t, 90*time.Second, "FRR ↔ gobgpd established with TCP-AO on both ends", func() (bool, string) {
		pa, err := r.Peer(addrB)
		if err != nil {
			return false, err.Error()
		}
		pb, err := gobgpPeer(g, addrA)
		if err != nil {
			return false, err.Error()
		}
		sa, erra := aa.status()
		sb, errb := ab.status()
		_, sent, _ := r.Routes(addrB)
		s = sess{pa.Uptime, pb.Uptime, pa.Flops, pb.Flops}
		ok := pa.Established() && pb.Established() && erra == nil && errb == nil && hasSending(sa, cur.sendID()) && hasSending(sb, cur.recvID()) && sent == len(routesA)
		return ok, fmt.Sprintf("FRR %s gobgpd %s, A keys %v %v, B keys %v %v, FRR sent %d", pa.State, pb.State, lab.KeyList(sa.Keys), erra, lab.KeyList(sb.Keys), errb, sent)
	})
	noFlap := func(when string) {
		pa, erra := r.Peer(addrB)
		pb, errb := gobgpPeer(g, addrA)
		if erra != nil || errb != nil || !pa.Established() || !pb.Established() || !pa.Uptime.Equal(s.uptimeA) || !pb.Uptime.Equal(s.uptimeB) ||
			pa.Flops != s.flopsA || pb.Flops != s.flopsB {
			t.Fatalf("%s: session flapped: FRR %s uptime %v (was %v) flops %d; gobgpd %s uptime %v (was %v) flops %d; %v %v",
				when, pa.State, pa.Uptime, s.uptimeA, pa.Flops, pb.State, pb.Uptime, s.uptimeB, pb.Flops, erra, errb)
		}
	}
	start := time.Now()
	for i := 1; i <= n; i++ {
		next := key{i: cur.i + 1}
		now := time.Now()
		t0 := now
		old := cur
		old.sendEnd, old.acceptEnd = now.Add(2*time.Second), now.Add(3*time.Second)
		next.sendStart, next.acceptStart = now.Add(-time.Second), now.Add(-time.Second)
		writeKeys(t, dirA, addrB, []key{old, next}, false)
		writeKeys(t, dirB, addrA, []key{old, next}, true)
		lab.Eventually(t, 40*time.Second, fmt.Sprintf("round %d: only k%d left on both ends, current", i, next.i), func() (bool, string) {
			sa, erra := aa.status()
			sb, errb := ab.status()
			ok := erra == nil && errb == nil && hasOnly(sa, next.sendID()) && hasOnly(sb, next.recvID())
			return ok, fmt.Sprintf("A keys %v (%s) %v, B keys %v (%s) %v", lab.KeyList(sa.Keys), sa.Rotation.State, erra, lab.KeyList(sb.Keys), sb.Rotation.State, errb)
		})
		cur = next
		noFlap(fmt.Sprintf("round %d", i))
		t.Logf("round %d: %v", i, time.Since(t0).Round(10*time.Millisecond))
	}
	sa, sb := aa.mustStatus(t), ab.mustStatus(t)
	if bad := sa.Counters.PktBad + sb.Counters.PktBad; bad != 0 {
		t.Fatalf("pkt_bad A=%d B=%d, want 0", sa.Counters.PktBad, sb.Counters.PktBad)
	}
	t.Logf("FRR ↔ gobgpd: %d rotations in %v", n, time.Since(start).Round(time.Second))
	pa, _ := r.Peer(addrB)
	pb, _ := gobgpPeer(g, addrA)
	frrLine(t, "gobgpd", "active", n, int(pa.Flops-s.flopsA+pb.Flops-s.flopsB), sa.Counters.PktBad+sb.Counters.PktBad)
}

func gobgpPeer(g *lab.Gobgpd, n netip.Addr) (bgp.PeerInfo, error) {
	return g.Speaker.Peer(context.Background(), peer.KeyOf(n, ""))
}

// TestFRRRevoke: revoking the current key with a backup is hitless;
// revoking the only key resets the session through FRR (clear bgp), and
// it comes back once both sides have a new key.
func TestFRRRevoke(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	now := time.Now()
	k1 := key{i: 1, birdPreferred: true, sendStart: now.Add(-time.Minute), acceptStart: now.Add(-time.Hour)}
	k2 := key{i: 2, sendStart: now.Add(-time.Hour), acceptStart: now.Add(-time.Hour)}
	l := newBirdLab(t, false, []key{k1, k2}, birdConfig([]key{k1, k2}, false))
	s := l.waitEstablished(60 * time.Second)
	lab.Eventually(t, 20*time.Second, "both keys on A's session, k1 current", func() (bool, string) {
		st := l.aokeyd.mustStatus(t)
		ok := len(st.Keys) == 2 && slices.ContainsFunc(st.Keys, func(k control.Key) bool { return k.SendID == k1.sendID() && k.Current })
		return ok, lab.KeyList(st.Keys)
	})
	out, err := exec.Command(lab.MustBin(t, "aoctl"), "--socket", l.aokeyd.ctl.Socket(), "--json", "revoke", "core/k1").Output()
	if err != nil {
		t.Fatalf("aoctl revoke core/k1: %v: %s", err, out)
	}
	var res control.RevokeResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("aoctl revoke --json: %v: %s", err, out)
	}
	if !slices.ContainsFunc(res.Sockets, func(s control.RevokeSocket) bool { return s.Action == control.ActionForcedReplaced && s.Error == "" }) {
		t.Fatalf("revoke of the current key with a backup: %+v, want a forced replace", res.Sockets)
	}
	if st := l.aokeyd.mustStatus(t); !hasOnly(st, k2.sendID()) {
		t.Fatalf("after revoke A keys %v, want only k2, current", lab.KeyList(st.Keys))
	}
	if slices.ContainsFunc(listenerKeys(t, l.frr.PID), func(k tcpao.KeyInfo) bool { return k.SendID == k1.sendID() }) {
		t.Fatal("revoked k1 still on bgpd's listener")
	}
	time.Sleep(3 * time.Second) // keepalives flow, signed with k2
	l.checkNoFlap(s, "after revoking the current key with a backup")
	if out, err := exec.Command(lab.MustBin(t, "aoctl"), "--socket", l.aokeyd.ctl.Socket(), "status", addrB.String()).CombinedOutput(); err != nil {
		t.Fatalf("aoctl status: %v: %s", err, out)
	} else {
		t.Logf("aoctl status (FRR's view) after the revoke:\n%s", out)
	}
	pktBad, flaps := l.pktBad(), int(l.peer().Flops-s.flops)
	// k2 is now the only key: revoking it resets the session through FRR.
	res, err = l.aokeyd.ctl.Revoke(context.Background(), control.RevokeRequest{Chain: "core", Key: "k2"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Sockets, func(s control.RevokeSocket) bool { return s.Action == control.ActionReset }) {
		t.Fatalf("revoke of the only key: %+v, want a session reset", res.Sockets)
	}
	lab.Eventually(t, 20*time.Second, "FRR's session reset after revoking the only key", func() (bool, string) {
		p := l.peer()
		return !p.Established() || p.Flops > s.flops, p.State.String()
	})
	k3 := key{i: 3, birdPreferred: true}
	writeKeys(t, l.dir, addrB, []key{k3}, false)
	if err := l.bird.Configure(birdConfig([]key{k3}, false)); err != nil {
		t.Fatal(err)
	}
	l.waitEstablished(90 * time.Second)
	if st := l.aokeyd.mustStatus(t); !hasOnly(st, k3.sendID()) {
		t.Fatalf("after re-keying A keys %v, want only k3", lab.KeyList(st.Keys))
	}
	// Flaps and pkt_bad are those of the hitless revoke; the reset that
	// follows is the one the operator asked for.
	frrLine(t, "bird", "passive", 0, flaps, pktBad)
}

// TestFRRRestart: bgpd is killed and started again (as watchfrr would): a
// new process with new sockets. aokeyd takes the new listener over, the
// session comes back with TCP-AO, and a rotation on it is hitless.
func TestFRRRestart(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	k1 := key{i: 1, birdPreferred: true}
	l := newBirdLab(t, false, []key{k1}, birdConfig([]key{k1}, false))
	l.waitEstablished(60 * time.Second)
	oldPID := l.frr.PID
	l.frr.Restart()
	if l.frr.PID == oldPID {
		t.Fatalf("bgpd pid %d after the restart, want a new process", l.frr.PID)
	}
	s := l.waitEstablished(90 * time.Second)
	lab.Eventually(t, 30*time.Second, "aokeyd keys the new bgpd's listener and session", func() (bool, string) {
		st, err := l.aokeyd.status()
		if err != nil {
			return false, err.Error()
		}
		lk := listenerKeys(t, l.frr.PID)
		ok := hasOnly(st, k1.sendID()) && st.Keys[0].PktGood > 0 && len(lk) == 1
		return ok, fmt.Sprintf("A keys %v, sockets %v, new listener keys %d", lab.KeyList(st.Keys), st.Sockets, len(lk))
	})
	l.roll(1, k1, s)
	frrLine(t, "bird", "passive", 1, int(l.peer().Flops-s.flops), l.pktBad())
}
