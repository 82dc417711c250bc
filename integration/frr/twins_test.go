package frr

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The VRF twins: one neighbor address in two VRFs of router A, each link
// its own world (A 10.255.17.1/30 on both, B 10.255.17.2/30 on both).
var (
	twinA = netip.MustParseAddr("10.255.17.1")
	twinB = netip.MustParseAddr("10.255.17.2")
)

// blueKey is blue's one key for the whole test (send 61, recv 161, its
// own secret). Red's keys count up from k1 (1/101) and stay below it, so
// that a key's IDs name its chain.
const blueKey = 61

// twin is one VRF of router A and the BIRD at the far end of its link.
type twin struct {
	vrf  string
	idx  int // the VRF device's ifindex in A's namespace
	ns   *netns.NS
	bird *bird.Router
	keys []key // the VRF's chain in A's key file, as last written
	// ids are the (send, recv) IDs the chain holds in the whole test,
	// known before it starts (the sampler reads them concurrently).
	ids map[[2]uint8]bool
}

func (tw *twin) String() string { return tw.vrf }

// twinLab is router A (bgpd with `router bgp 65001 vrf red` and `vrf blue`
// under watchfrr, aokeyd with a chain per VRF) and two BIRDs.
type twinLab struct {
	t         *testing.T
	dir       string
	frr       *Router
	ctl       *control.Client
	red, blue *twin
	cross     crossKeys
}

// TestFRRVRFTwins: the same neighbor address in two VRFs. A's namespace
// has VRF devices red and blue, each with a veth to its own B namespace
// running BIRD; both links are addressed identically. bgpd runs one
// instance per VRF, each peering 10.255.17.2 (passive), and aokeyd binds
// the address in vrf red to chain red and in vrf blue to chain blue. Red's
// chain is rolled N times (AOKEYD_FRR_ROUNDS, default 3); in each roll,
// the moment aokeyd has put red's new key on red's session (its install
// and announce steps, each between the guard's before and after checks,
// with the switch and retire steps to come), blue's BIRD restarts its
// session, so blue goes down and comes back while the guard checks red's
// steps. Red's session never flaps (FRR's connection counters, BIRD's
// since); blue comes back with TCP-AO and its own key; every kernel read of
// the VRF-bound listeners and sessions (sampled all along, bound device
// from sock_diag) shows only the VRF's own chain's IDs with the VRF's
// ifindex; aokeyd's status lists two peers for 10.255.17.2, in vrfs red
// and blue. The FRR lab has no Vault, so the fleet document is not part
// of this test. It prints `vrf-twins: rolls=N flaps=F cross_keys=C`: F
// counts red's flaps (blue's restarts are the test's own), C every
// distinct foreign key seen on a twin's socket.
func TestFRRVRFTwins(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	lab.RequireNetns(t)
	n := rounds(t, 3)
	if n+1 >= blueKey {
		t.Fatalf("%d rounds: red's keys would reach blue's IDs (%d)", n, blueKey)
	}
	l := newTwinLab(t, n)
	red, blue := l.red, l.blue
	base := map[*twin]twinSession{}
	for _, tw := range []*twin{red, blue} {
		s, err := l.up(tw, 90*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		base[tw] = s
	}
	stop := l.sample(100 * time.Millisecond)
	var rollErr error
	rolls := 0
	for r := 1; r <= n && rollErr == nil; r++ {
		if rollErr = l.roll(r, base[red]); rollErr == nil {
			rolls++
		}
	}
	stop()
	flaps, why := l.flaps(red, base[red])
	if flaps > 0 {
		t.Errorf("red's session flapped: %s", why)
	}
	if rollErr == nil {
		rollErr = l.checkStatus()
	}
	cross, reads, sampleErr := l.cross.result()
	t.Logf("%d kernel reads of bgpd's sockets while the rolls ran (last read error: %v)", reads, sampleErr)
	fmt.Printf("vrf-twins: rolls=%d flaps=%d cross_keys=%d\n", rolls, flaps, len(cross))
	if len(cross) > 0 {
		t.Errorf("keys of another VRF on a twin's socket:\n  %s", strings.Join(cross, "\n  "))
	}
	if reads < 10 {
		t.Errorf("only %d kernel reads of the twins' sockets", reads)
	}
	if rollErr != nil {
		t.Fatalf("%d of %d rolls completed: %v", rolls, n, rollErr)
	}
}

// newTwinLab builds the namespaces, starts aokeyd, FRR (under watchfrr)
// and both BIRDs with their first keys: red k1, blue k61.
func newTwinLab(t *testing.T, n int) *twinLab {
	t.Helper()
	na := netns.New(t, lab.NSName(t, "a"))
	l := &twinLab{t: t, dir: t.TempDir()}
	for i, vrf := range []string{"red", "blue"} {
		tw := &twin{vrf: vrf, ns: netns.New(t, lab.NSName(t, vrf)), ids: map[[2]uint8]bool{}}
		veth := "veth-" + vrf
		na.MustRun(t, "ip", "link", "add", vrf, "type", "vrf", "table", strconv.Itoa(10+i))
		na.MustRun(t, "ip", "link", "set", vrf, "up")
		na.MustRun(t, "ip", "link", "add", veth, "type", "veth", "peer", "name", "veth-b", "netns", tw.ns.Name)
		na.MustRun(t, "ip", "link", "set", veth, "master", vrf)
		na.MustRun(t, "ip", "addr", "add", netip.PrefixFrom(twinA, 30).String(), "dev", veth)
		tw.ns.MustRun(t, "ip", "addr", "add", netip.PrefixFrom(twinB, 30).String(), "dev", "veth-b")
		na.MustRun(t, "ip", "link", "set", veth, "up")
		tw.ns.MustRun(t, "ip", "link", "set", "veth-b", "up")
		idx, err := strconv.Atoi(strings.TrimSpace(na.MustRun(t, "cat", "/sys/class/net/"+vrf+"/ifindex")))
		if err != nil {
			t.Fatal(err)
		}
		tw.idx = idx
		if vrf == "red" {
			l.red = tw
			tw.keys = []key{{i: 1, birdPreferred: true}}
			for i := 1; i <= n+1; i++ {
				tw.ids[[2]uint8{key{i: i}.sendID(), key{i: i}.recvID()}] = true
			}
		} else {
			l.blue = tw
			tw.keys = []key{{i: blueKey, birdPreferred: true}}
			tw.ids[[2]uint8{tw.keys[0].sendID(), tw.keys[0].recvID()}] = true
		}
	}
	l.writeKeys()
	policy := fmt.Sprintf(`version: 1
key_chains:
  - name: red
  - name: blue
%speers:
  - neighbor: %[2]s
    vrf: red
    key_chain: red
  - neighbor: %[2]s
    vrf: blue
    key_chain: blue
`, safetyPolicy, twinB)
	pathspace := fmt.Sprintf("aokeydtw%d", os.Getpid())
	cg := filepath.Join(l.dir, "cg.sock")
	a := startAokeydPolicy(t, na, l.dir, twinB, policy,
		fmt.Sprintf("speaker:\n  type: frr\n  frr:\n    pathspace: %q\n    poll_interval: 250ms\n", pathspace), cg)
	l.ctl = a.ctl
	cfg := Config{AS: asA, RouterID: twinA, LocalAddr: twinA, Routes: routesA,
		Neighbors: []Neighbor{{Addr: twinB, AS: asB, Passive: true}}, VRFs: []string{"red", "blue"}}
	l.frr = StartWatchfrr(t, na, l.dir, pathspace, cfg, cg)
	l.frr.WaitUp(t)
	for _, tw := range []*twin{l.red, l.blue} {
		tw.bird = bird.Start(t, tw.ns, twinBird(tw.keys))
	}
	t.Logf("VRF red ifindex %d, blue ifindex %d; FRR %s", l.red.idx, l.blue.idx, Version())
	return l
}

// writeKeys writes A's key file: a chain per VRF, bound to the neighbor in
// that VRF.
func (l *twinLab) writeKeys() {
	chains := map[string]any{}
	for _, tw := range []*twin{l.red, l.blue} {
		chains[tw.vrf] = map[string]any{"peers": []string{twinB.String()}, "vrf": tw.vrf, "keys": mktEntries(tw.keys, false)}
	}
	lab.WriteKeyFile(l.t, l.dir, chains)
}

// twinBird is the BIRD of a twin's link with keys (mirrored), connecting.
func twinBird(keys []key) bird.Config {
	cfg := birdConfig(keys, false)
	cfg.RouterID, cfg.LocalAddr, cfg.Neighbor = twinB.String(), twinB.String(), twinA.String()
	return cfg
}

// frrView is bgpd's own view of the neighbor in one VRF (`show bgp vrf V
// neighbors ADDR json`), read without aokeyd's adapter.
type frrView struct {
	State       string `json:"bgpState"`
	Established uint32 `json:"connectionsEstablished"`
	Dropped     uint32 `json:"connectionsDropped"`
	PortForeign int32  `json:"portForeign"`
	AF          map[string]struct {
		Accepted int `json:"acceptedPrefixCounter"`
	} `json:"addressFamilyInfo"`
}

func (l *twinLab) view(tw *twin) (frrView, error) {
	out, err := l.frr.Vtysh("show bgp vrf " + tw.vrf + " neighbors " + twinB.String() + " json")
	if err != nil {
		return frrView{}, err
	}
	var m map[string]json.RawMessage
	var v frrView
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return v, fmt.Errorf("vrf %s neighbor json: %w: %.200s", tw, err, out)
	}
	if err := json.Unmarshal(m[twinB.String()], &v); err != nil {
		return v, fmt.Errorf("vrf %s neighbor %s: %w: %.200s", tw, twinB, err, out)
	}
	return v, nil
}

func (v frrView) accepted() (n int) {
	for _, af := range v.AF {
		n += af.Accepted
	}
	return n
}

// twinSession is what must not change while red rolls.
type twinSession struct {
	frr       frrView
	birdSince string
}

// up waits for tw's session: Established at both ends with all routes both
// ways and, on A's socket in tw's VRF, only tw's keys, one of them used.
func (l *twinLab) up(tw *twin, timeout time.Duration) (twinSession, error) {
	var s twinSession
	err := lab.Within(timeout, fmt.Sprintf("vrf %s: session established with TCP-AO (its own keys), routes both ways", tw), func() (bool, string) {
		v, err := l.view(tw)
		if err != nil {
			return false, err.Error()
		}
		st, err := tw.bird.Protocol()
		if err != nil {
			return false, err.Error()
		}
		rb, _ := tw.bird.Routes()
		socks, err := readSockets(l.frr.PID, twinB)
		sk := on(socks, tw, false)
		used := len(sk) == 1 && len(sk[0].keys) > 0 && sk[0].info.PktGood > 0
		for _, k := range keysOf(sk) {
			used = used && tw.ids[[2]uint8{k.SendID, k.RecvID}] && k.IfIndex == tw.idx
		}
		s = twinSession{frr: v, birdSince: st.Since}
		ok := err == nil && v.State == "Established" && st.BGPState == "Established" && rb == len(routesA) && v.accepted() == len(routesB) && used
		return ok, fmt.Sprintf("FRR %s (accepted %d), BIRD %s (%s, %d routes), A's sessions in %s: %v %v",
			v.State, v.accepted(), st.BGPState, st.LastError, rb, tw, sk, err)
	})
	return s, err
}

// flaps is how often tw's session went down since s, with what shows it.
func (l *twinLab) flaps(tw *twin, s twinSession) (int, string) {
	v, err := l.view(tw)
	st, berr := tw.bird.Protocol()
	if err != nil || berr != nil {
		return 1, fmt.Sprintf("cannot read the session: %v %v", err, berr)
	}
	n := max(int(v.Dropped)-int(s.frr.Dropped), int(v.Established)-int(s.frr.Established), 0)
	if n == 0 && (v.State != "Established" || v.PortForeign != s.frr.PortForeign || st.BGPState != "Established" || !bird.SameSince(st.Since, s.birdSince)) {
		n = 1
	}
	return n, fmt.Sprintf("FRR %s, connections established %d dropped %d, remote port %d (were %d, %d, %d); BIRD %s since %s (was %s)",
		v.State, v.Established, v.Dropped, v.PortForeign, s.frr.Established, s.frr.Dropped, s.frr.PortForeign, st.BGPState, st.Since, s.birdSince)
}

// status is aokeyd's status of the neighbor in tw's VRF, from the list of
// every peer.
func (l *twinLab) status(tw *twin) (control.PeerStatus, error) {
	rep, err := l.ctl.Status(context.Background(), "")
	if err != nil {
		return control.PeerStatus{}, err
	}
	var out []control.PeerStatus
	for _, p := range rep.Peers {
		if p.Peer == twinB.String() && p.VRF == tw.vrf {
			out = append(out, p)
		}
	}
	if len(out) != 1 {
		return control.PeerStatus{}, fmt.Errorf("aoctl status: %d peers %s in vrf %s, want 1 (of %d peers)", len(out), twinB, tw, len(rep.Peers))
	}
	return out[0], nil
}

// roll is red's round r, done as birdLab.roll does it, with blue's session
// restarted from BIRD the moment red's new key is on red's session.
func (l *twinLab) roll(r int, redBase twinSession) error {
	t, red, blue := l.t, l.red, l.blue
	cur := red.keys[len(red.keys)-1]
	next := key{i: cur.i + 1}
	if err := red.bird.Configure(twinBird([]key{cur, next})); err != nil {
		return err
	}
	blueBefore, err := l.view(blue)
	if err != nil {
		return err
	}
	now := time.Now()
	old := cur
	old.sendEnd, old.acceptEnd = now.Add(2*time.Second), now.Add(3*time.Second)
	next.sendStart, next.acceptStart = now.Add(-time.Second), now.Add(-time.Second)
	red.keys = []key{old, next}
	written := time.Now()
	l.writeKeys()
	// Blue's restart: the moment aokeyd shows red's new key installed
	// (polled every 10ms), i.e. right after red's install and announce
	// steps, before its switch and retire steps.
	var seen time.Time
	for deadline := time.Now().Add(20 * time.Second); seen.IsZero(); time.Sleep(10 * time.Millisecond) {
		if st, err := l.status(red); err == nil && slices.ContainsFunc(st.Keys, func(k control.Key) bool { return k.SendID == next.sendID() }) {
			seen = time.Now()
		} else if time.Now().After(deadline) {
			return fmt.Errorf("round %d: red's k%d not on its session after 20s: %v %v", r, next.i, lab.KeyList(st.Keys), err)
		}
	}
	if out, err := blue.bird.Birdc("restart", "peer_a"); err != nil {
		return fmt.Errorf("birdc restart peer_a (blue): %v: %s", err, out)
	}
	restarted := time.Now()
	if err := lab.Within(40*time.Second, fmt.Sprintf("round %d: red's session carries k%d and red's BIRD sends with it", r, next.i), func() (bool, string) {
		st, err := l.status(red)
		return err == nil && hasSending(st, next.sendID()), fmt.Sprintf("red keys %v %v", lab.KeyList(st.Keys), err)
	}); err != nil {
		return err
	}
	prefNext := next
	prefNext.birdPreferred = true
	depOld := cur
	depOld.birdPreferred, depOld.birdDepr = false, true
	if err := red.bird.Configure(twinBird([]key{depOld, prefNext})); err != nil {
		return err
	}
	if err := lab.Within(40*time.Second, fmt.Sprintf("round %d: only k%d of red's keys left on red's session and listener, current at both ends", r, next.i), func() (bool, string) {
		st, err := l.status(red)
		bs, _ := red.bird.Protocol()
		socks, serr := readSockets(l.frr.PID, twinB)
		lk := keysOf(on(socks, red, true))
		// Another chain's keys on red's listener are the sampler's to
		// count; here only red's own old keys must be gone.
		ok := err == nil && serr == nil && hasOnly(st, next.sendID()) && bs.CurrentKey == int(next.recvID()) &&
			slices.ContainsFunc(lk, func(k tcpao.KeyInfo) bool { return k.SendID == next.sendID() }) &&
			!slices.ContainsFunc(lk, func(k tcpao.KeyInfo) bool { return red.ids[[2]uint8{k.SendID, k.RecvID}] && k.SendID != next.sendID() })
		return ok, fmt.Sprintf("red keys %v (%s) %v, red's listener keys %v %v, BIRD current %d", lab.KeyList(st.Keys), st.Rotation.State, err, refs(lk), serr, bs.CurrentKey)
	}); err != nil {
		return err
	}
	completed := time.Now()
	if err := red.bird.Configure(twinBird([]key{prefNext})); err != nil {
		return err
	}
	red.keys = []key{prefNext}
	if n, why := l.flaps(red, redBase); n > 0 {
		return fmt.Errorf("round %d: red's session flapped: %s", r, why)
	}
	s, err := l.up(blue, 60*time.Second)
	if err != nil {
		return fmt.Errorf("round %d: blue did not come back: %w", r, err)
	}
	if s.frr.Dropped <= blueBefore.Dropped {
		return fmt.Errorf("round %d: blue's restart did not take its session down (FRR dropped %d, was %d)", r, s.frr.Dropped, blueBefore.Dropped)
	}
	st, err := l.status(blue)
	if err != nil || !hasOnly(st, blue.keys[0].sendID()) {
		return fmt.Errorf("round %d: blue back, aokeyd shows keys %v, want only k%d: %v", r, lab.KeyList(st.Keys), blueKey, err)
	}
	t.Logf("round %d: red k%d done %v after the key file write; blue restarted %v after it (%v after aokeyd showed red's new key), back with k%d after %v",
		r, next.i, completed.Sub(written).Round(10*time.Millisecond), restarted.Sub(written).Round(time.Millisecond),
		restarted.Sub(seen).Round(time.Millisecond), blueKey, time.Since(restarted).Round(10*time.Millisecond))
	t.Logf("round %d timeline (aokeyd's log, from the key file write): %s", r, l.timeline(written, restarted))
	return nil
}

// checkStatus checks that aokeyd reports two peers for the address, one in
// each VRF, each with its own keys, both in the list of all peers and when
// asked about the address, and logs `aoctl status`.
func (l *twinLab) checkStatus() error {
	for _, which := range []string{"", twinB.String()} {
		rep, err := l.ctl.Status(context.Background(), which)
		if err != nil {
			return err
		}
		var vrfs []string
		for _, p := range rep.Peers {
			if p.Peer != twinB.String() {
				continue
			}
			vrfs = append(vrfs, p.VRF)
			tw := l.red
			if p.VRF == "blue" {
				tw = l.blue
			}
			if !hasOnly(p, tw.keys[0].sendID()) || p.SessionState != "established" {
				return fmt.Errorf("aoctl status %q: %s in vrf %q: %s, keys %v, want only k%d", which, p.Peer, p.VRF, p.SessionState, lab.KeyList(p.Keys), tw.keys[0].i)
			}
		}
		sort.Strings(vrfs)
		if !slices.Equal(vrfs, []string{"blue", "red"}) {
			return fmt.Errorf("aoctl status %q: peers %s in vrfs %q, want blue and red", which, twinB, vrfs)
		}
	}
	out, err := exec.Command(lab.MustBin(l.t, "aoctl"), "--socket", l.ctl.Socket(), "status").CombinedOutput()
	if err != nil {
		return fmt.Errorf("aoctl status: %v: %s", err, out)
	}
	l.t.Logf("aoctl status:\n%s", out)
	return nil
}

// timeline lists aokeyd's log lines about either twin after since (red's
// roll steps, both sessions' events, any drop or abort) with their offset
// from since, and the test's restart of blue among them.
func (l *twinLab) timeline(since, restarted time.Time) string {
	b, err := os.ReadFile(filepath.Join(l.dir, "aokeyd.log"))
	if err != nil {
		return err.Error()
	}
	type mark struct {
		at   time.Time
		what string
	}
	marks := []mark{{restarted, "test: birdc restart peer_a on blue's BIRD"}}
	for _, line := range strings.Split(string(b), "\n") {
		var e struct {
			Time time.Time       `json:"time"`
			Msg  string          `json:"msg"`
			Peer json.RawMessage `json:"peer"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || !e.Time.After(since) {
			continue
		}
		peer := strings.Trim(string(e.Peer), `"`)
		twinLine := strings.Contains(peer, twinB.String()) && (strings.HasPrefix(e.Msg, "rotator: announced") || strings.HasPrefix(e.Msg, "rotator: peer sends") ||
			strings.HasPrefix(e.Msg, "rotator: roll") || strings.HasPrefix(e.Msg, "session "))
		if twinLine || strings.Contains(e.Msg, "dropped") || strings.Contains(e.Msg, "abort") {
			marks = append(marks, mark{e.Time, e.Msg + " [" + peer + "]"})
		}
	}
	sort.SliceStable(marks, func(i, j int) bool { return marks[i].at.Before(marks[j].at) })
	var out []string
	for _, m := range marks {
		out = append(out, fmt.Sprintf("+%v %s", m.at.Sub(since).Round(time.Millisecond), m.what))
	}
	return strings.Join(out, "; ")
}
