package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
)

// router is one gobgpd started through `aokeyd exec`, with its own aokeyd
// (-connectguard) keying its outgoing connects.
type router struct {
	name    string
	ns      *netns.NS
	dir     string
	self    netip.Addr
	peer    netip.Addr
	as, pas uint32
	gobgp   *lab.Gobgpd
	aokeyd  *exec.Cmd
	ctl     *control.Client
	speaker bgp.Speaker
}

// startRouter writes the router's mirrored key file (send SendID, recv
// RecvID), policy and config, then starts `aokeyd exec -- gobgpd` (an
// active, non-passive neighbor) and aokeyd with -connectguard.
func startRouter(t *testing.T, name string, ns *netns.NS, self, peer netip.Addr, as, pas uint32, send, recv uint8, secret []byte) *router {
	t.Helper()
	r := &router{name: name, ns: ns, dir: t.TempDir(), self: self, peer: peer, as: as, pas: pas}
	files := map[string]string{
		"keys.yaml": fmt.Sprintf("chains:\n  core:\n    peers: [%s]\n    keys:\n      - name: k1\n        send_id: %d\n        recv_id: %d\n        algorithm: hmac(sha256)\n        secret_hex: %q\n",
			peer, send, recv, hex.EncodeToString(secret)),
		"policy.yaml": fmt.Sprintf("version: 1\nkey_chains:\n  - name: core\npeers:\n  - neighbor: %s\n    key_chain: core\n", peer),
		"aokeyd.yaml": fmt.Sprintf("key_source:\n  type: file\n  refresh: 1s\n  file:\n    path: keys.yaml\npolicy:\n  path: policy.yaml\ngobgp:\n  address: %q\n  pid_file: gobgpd.pid\ncontrol:\n  socket: control.sock\nmetrics:\n  listen: \"off\"\nlog:\n  format: json\n  level: debug\n",
			"unix://"+filepath.Join(r.dir, "gobgpd.sock")), // lab.StartGobgpd's API socket

	}
	for n, data := range files {
		if err := os.WriteFile(filepath.Join(r.dir, n), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			lab.Dump(t, "router "+name+" aokeyd.log (tail)", lab.Tail(filepath.Join(r.dir, "aokeyd.log"), 8000))
		}
	})
	// gobgpd is the child of `aokeyd exec` (which stays as a small parent).
	r.gobgp = lab.StartGobgpd(t, ns, "gobgpd", lab.GobgpdConfig{
		AS: as, RouterID: self, LocalAddrs: []netip.Addr{self},
		Neighbors: []lab.Neighbor{{Addr: peer, AS: pas}},
		HoldTime:  3, Keepalive: 1,
	}, lab.GobgpdOptions{Dir: r.dir, Launcher: []string{lab.MustBin(t, "aokeyd"), "exec", "-socket", filepath.Join(r.dir, "cg.sock"), "--"}})
	r.speaker = r.gobgp.Speaker
	r.ctl = control.NewClient(filepath.Join(r.dir, "control.sock"), 10*time.Second)
	r.startAokeyd(t)
	return r
}

func (r *router) startAokeyd(t *testing.T) {
	t.Helper()
	r.aokeyd = lab.StartAokeyd(t, r.ns, filepath.Join(r.dir, "aokeyd.log"), r.ctl,
		"-config", filepath.Join(r.dir, "aokeyd.yaml"), "-state-dir", filepath.Join(r.dir, "state"),
		"-connectguard", filepath.Join(r.dir, "cg.sock"), "-roll-grace", "2s", "-roll-poll", "250ms")
}

func (r *router) peerInfo(t *testing.T) bgp.PeerInfo {
	ps, err := r.speaker.Peers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Neighbor == r.peer {
			return p
		}
	}
	t.Fatalf("%s: no neighbor %s", r.name, r.peer)
	return bgp.PeerInfo{}
}

func (r *router) peerStatus() (control.PeerStatus, error) {
	rep, err := r.ctl.Status(context.Background(), r.peer.String())
	if err != nil {
		return control.PeerStatus{}, err
	}
	if len(rep.Peers) != 1 {
		return control.PeerStatus{}, fmt.Errorf("%d peers", len(rep.Peers))
	}
	return rep.Peers[0], nil
}

// TestActiveOpensBothSides is issue 9's proof with the real daemon: two
// routers, each gobgpd v3.37 started through `aokeyd exec` with its own
// aokeyd, AO neighbors active on both sides, keys from the key file. The
// session comes up with TCP-AO on both sockets (pkt_good rising). Then one
// aokeyd is killed and restarted while the session is re-established: it
// comes up again after the restart.
func TestActiveOpensBothSides(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	a4, b4 := netip.MustParseAddr("10.255.2.1"), netip.MustParseAddr("10.255.2.2")
	na, nb := lab.Pair(t, netip.PrefixFrom(a4, 30), netip.PrefixFrom(b4, 30))
	secret := secretOf(42)
	ra := startRouter(t, "A", na, a4, b4, asA, asB, 1, 101, secret)
	rb := startRouter(t, "B", nb, b4, a4, asB, asA, 101, 1, secret)

	// Both sides active is a random wait on gobgpd: a neighbor whose
	// connection failed (the first ones do, before both aokeyds have keyed
	// their listeners) sits in Idle for 5 s and closes every connection
	// that arrives meanwhile ("Closed an accepted connection"), then dials
	// after a random 1-2 s. Each side's dial lands in the other's Idle about
	// three times in four, so the two can miss each other cycle after
	// cycle: one CI run saw fourteen such 6.5 s cycles in a row (both
	// logs alternating, 4 s apart) and ran out of 90 s. 180 s makes that
	// about 0.77^28, under one in a thousand.
	up := func(what string) {
		lab.Eventually(t, 180*time.Second, what, func() (bool, string) {
			var detail []string
			ok := true
			for _, r := range []*router{ra, rb} {
				p := r.peerInfo(t)
				st, err := r.peerStatus()
				good := err == nil && len(st.Keys) == 1 && st.Keys[0].Current && st.Keys[0].PktGood > 0
				ok = ok && p.Established() && good
				detail = append(detail, fmt.Sprintf("%s: %s keys %v err %v", r.name, p.State, lab.KeyList(st.Keys), err))
			}
			return ok, strings.Join(detail, "; ")
		})
	}
	up("both sessions established with TCP-AO through active opens")
	sa, _ := ra.peerStatus()
	sb, _ := rb.peerStatus()
	t.Logf("active opens: A sockets %v keys %v; B sockets %v keys %v", sa.Sockets, lab.KeyList(sa.Keys), sb.Sockets, lab.KeyList(sb.Keys))

	// Kill B's aokeyd: the established session does not depend on it;
	// a restarted aokeyd takes the session over again. (A connect made
	// while the supervisor is down and answered after its restart is
	// proved in integration/activeopen's TestGuestActiveOpen.)
	s0 := ra.peerInfo(t)
	_ = rb.aokeyd.Process.Kill()
	_, _ = rb.aokeyd.Process.Wait()
	time.Sleep(3 * time.Second)
	rb.startAokeyd(t)
	if p := ra.peerInfo(t); !p.Established() || p.Uptime != s0.Uptime || p.Flops != s0.Flops {
		t.Fatalf("session dropped while B's aokeyd was down: %s uptime %v (was %v)", p.State, p.Uptime, s0.Uptime)
	}
	up("B's restarted aokeyd manages the session again")
}
