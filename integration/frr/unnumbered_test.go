package frr

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	bgpfrr "github.com/aokeyd/aokeyd/bgp/frr"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// defaultUnnumRounds is the scheduled rolls of TestFRRUnnumbered in `make
// test` (AOKEYD_FRR_ROUNDS overrides it).
const defaultUnnumRounds = 4

// TestFRRUnnumbered is issue 53's proof, written before the feature: a
// BGP unnumbered fabric (unnumbered_lab_test.go: three FRR routers in a
// triangle of veth links, IPv6 link-local only, RAs on, `neighbor swpX
// interface remote-as external`), each router's bgpd under watchfrr
// through bgpd_wrap (`aokeyd exec`) and under its own aokeyd (speaker
// type frr), keyed and rolled like any peer.
//
// The policy form issue 53 adds (docs/wip/unnumbered.md, plan item 2),
// which binds a chain to every interface neighbor of the router's bgpd:
//
//	peers:
//	  - neighbor_interface: "*"
//	    key_chain: fabric
//
// The chain's keys in the key file have `peers: [fe80::/64]` (keys carry
// no zone: the kernel matches a link-local key on every link), send_id =
// recv_id (one key serves both directions of every link of the ring).
//
// Steps, each waiting on its event with a bound:
//  1. lab: the fabric's six sessions Established unsigned (aokeyd runs
//     with a policy that binds nothing, so bgpd's connects and listen
//     pass its connect guard unkeyed); AOKEYD_UNNUM_LAB_ONLY=1 stops
//     here, with FRR started bare (no aokeyd at all);
//  2. the interface binding applied (SIGHUP): every aokeyd reloads it;
//  3. every listener keyed for the learned neighbor addresses, one `clear
//     bgp *` per router (the kernel takes no first key on an established
//     socket), every session back with k1 on its socket, read from the
//     kernel;
//  4. scheduled rolls (half of them), every router's key file written at
//     once per roll;
//  5. one revoke: `aoctl revoke` of the current key on each router, a
//     backup key present: the sessions move to it without a flap;
//  6. r2's swp1 flapped with a new MAC (a new link-local address): both
//     ends relearn their neighbor and come back keyed (relearned=2);
//  7. r1's bgpd killed (SIGKILL); watchfrr restarts it through bgpd_wrap;
//     its two sessions come back keyed;
//  8. the other half of the rolls; no session reset beyond the deliberate
//     ones (FRR's connectionsEstablished per neighbor), pkt_bad 0 on every
//     session socket seen.
//
// Only when everything held it prints, exactly (N: AOKEYD_FRR_ROUNDS, 4 by
// default):
//
//	unnumbered: routers=3 links=3 rotations=N flaps=0 pkt_bad=0 relearned=2
//
// On today's main (b5725c6) it fails at step 2, the first assertion that
// depends on the feature, after step 1 logged the six unsigned sessions
// ("lab: 3 routers, 3 links, 6 sessions up unsigned over IPv6
// link-local"); the policy decoder is strict, so the reload is refused:
//
//	unnumbered_test.go:NNN: r1: aokeyd refused the policy binding its chain to FRR's interface neighbours
//	    (`neighbor_interface: "*"`, the form issue 53 adds; not built yet): "…/policy.yaml:10:5: peers[0]:
//	    unknown field (its name is not shown) in peer; allowed: neighbor, vrf, key_chain,
//	    include_tcp_options, ao_required, safety"
//
// (the refusal's text as `aoctl validate` gives it for the same policy on
// main; aokeyd logs it as "reload refused; the running configuration
// stays"). With the policy form built and the speaker still skipping
// interface neighbors (bgp/frr/decode.go), step 3 fails instead: "r1's
// bgpd listener holds no TCP-AO key for its neighbour on swp1 (fe80::…)".
func TestFRRUnnumbered(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	lab.RequireNetns(t)
	f := newFabric(t, unnumRouters)
	if labOnly() {
		f.startFRR(false)
		f.waitUnsigned()
		t.Log("AOKEYD_UNNUM_LAB_ONLY=1: the lab alone held; nothing of issue 53 was run")
		return
	}
	n := rounds(t, defaultUnnumRounds)
	cur := fabKey{i: 1, sendStart: time.Now().Add(-time.Minute), acceptStart: time.Now().Add(-time.Hour)}
	f.writeKeys(cur)
	f.startAokeyds()
	f.startFRR(true)
	f.waitUnsigned()

	// From here on, everything depends on issue 53.
	f.bindInterfaces()
	f.switchToAO(cur)
	f.baseline()
	rotations := 0
	for ; rotations < n/2; rotations++ {
		cur = f.roll(rotations+1, cur)
	}
	cur = f.revoke(cur)
	relearned := f.flap(cur)
	f.restart(cur)
	for ; rotations < n; rotations++ {
		cur = f.roll(rotations+1, cur)
	}
	flaps, detail := f.flaps()
	bad := f.pktBad()
	for _, r := range f.routers {
		out, err := exec.Command(lab.MustBin(t, "aoctl"), "--socket", r.ad.ctl.Socket(), "status").CombinedOutput()
		t.Logf("%s: aoctl status (%v):\n%s", r.name, err, out)
	}
	if flaps != 0 || bad != 0 || relearned != 2 {
		t.Fatalf("flaps %d (%s), pkt_bad %d, relearned %d (want 0, 0, 2)", flaps, detail, bad, relearned)
	}
	t.Logf("FRR %s", Version())
	fmt.Printf("unnumbered: routers=%d links=%d rotations=%d flaps=%d pkt_bad=%d relearned=%d\n",
		len(f.routers), f.links, rotations, flaps, bad, relearned)
}

// fabKey is one key of the fabric's chain: the same on every router, its
// send and recv IDs equal (10+i), so that one key file serves each end of
// every link.
type fabKey struct {
	i                      int
	sendStart, sendEnd     time.Time
	acceptStart, acceptEnd time.Time
}

func (k fabKey) id() uint8    { return uint8(10 + k.i) }
func (k fabKey) name() string { return fmt.Sprintf("k%d", k.i) }
func (k fabKey) secret() []byte {
	s := sha256.Sum256(fmt.Appendf(nil, "aokeyd unnumbered key %d", k.i))
	return s[:20]
}

// writeKeys replaces every router's keys.yaml at once with chain fabric
// holding keys, for every link-local neighbor.
func (f *fabric) writeKeys(keys ...fabKey) {
	f.t.Helper()
	var entries []map[string]any
	for _, k := range keys {
		entries = append(entries, map[string]any{"name": k.name(), "send_id": k.id(), "recv_id": k.id(), "algorithm": "hmac(sha256)",
			"secret_hex": hex.EncodeToString(k.secret()), "send_lifetime": lab.KeyLifetime(k.sendStart, k.sendEnd),
			"accept_lifetime": lab.KeyLifetime(k.acceptStart, k.acceptEnd)})
	}
	for _, r := range f.routers {
		lab.WriteKeyFile(f.t, r.dir, map[string]any{"fabric": map[string]any{"peers": []string{"fe80::/64"}, "keys": entries}})
	}
}

// barePolicy defines the chain and binds nothing: aokeyd runs, bgpd's
// connect guard lets everything through unkeyed.
const barePolicy = "version: 1\nkey_chains:\n  - name: fabric\n" + safetyPolicy

// interfacePolicy binds the chain to every interface neighbor of the
// router's bgpd, in the form issue 53 adds.
const interfacePolicy = barePolicy + "peers:\n  - neighbor_interface: \"*\"\n    key_chain: fabric\n"

// startAokeyds starts every router's aokeyd in its namespace with
// barePolicy, speaker frr on its pathspace, and its connect guard.
func (f *fabric) startAokeyds() {
	f.t.Helper()
	lab.All(f.t, len(f.routers), func(i int) {
		r := f.routers[i]
		r.cg = filepath.Join(r.dir, "cg.sock")
		speaker := fmt.Sprintf("speaker:\n  type: frr\n  frr:\n    pathspace: %q\n    poll_interval: 250ms\n", r.pathspace)
		// No peer address: the routers' aokeyds are read with aoctl, not
		// aokeyd.status (an interface neighbor has no address to ask by).
		r.ad = startAokeydPolicy(f.t, r.ns, r.dir, netip.Addr{}, barePolicy, speaker, r.cg)
	})
}

// reloadRefused is aokeyd's log message for a reload it refuses.
const reloadRefused = "reload refused; the running configuration stays"

// bindInterfaces writes interfacePolicy on every router and reloads its
// aokeyd (SIGHUP), then waits for each to log the reload or its refusal:
// a refusal fails the test with aokeyd's own words.
func (f *fabric) bindInterfaces() {
	t := f.t
	t.Helper()
	hup := time.Now()
	for _, r := range f.routers {
		if err := os.WriteFile(filepath.Join(r.dir, "policy.yaml"), []byte(interfacePolicy), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := r.ad.cmd.Process.Signal(unix.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range f.routers {
		var msg, why string
		lab.Eventually(t, 30*time.Second, r.name+": aokeyd reloads or refuses the interface binding", func() (bool, string) {
			var err error
			msg, why, err = logEvent(filepath.Join(r.dir, "aokeyd.log"), hup, "reloaded", reloadRefused)
			return err == nil, fmt.Sprint(err)
		})
		if msg == reloadRefused {
			t.Fatalf("%s: aokeyd refused the policy binding its chain to FRR's interface neighbours (`neighbor_interface: \"*\"`, the form issue 53 adds; not built yet): %s",
				r.name, why)
		}
	}
	t.Logf("every aokeyd reloaded the interface binding")
}

// logEvent finds the first line of aokeyd's JSON log at or after since
// whose message is one of msgs: the message and the line's err field
// (its whole line when it has none).
func logEvent(path string, since time.Time, msgs ...string) (msg, why string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		var e struct {
			Time time.Time       `json:"time"`
			Msg  string          `json:"msg"`
			Err  json.RawMessage `json:"err"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Time.Before(since) || !slices.Contains(msgs, e.Msg) {
			continue
		}
		if len(e.Err) > 0 {
			return e.Msg, string(e.Err), nil
		}
		return e.Msg, line, nil
	}
	return "", "", fmt.Errorf("none of %q logged since %s", msgs, since.Format(time.RFC3339Nano))
}

// keyed checks e's session and e's bgpd's listener, read from the kernel:
// the session Established with the far interface's address learned, its
// socket holding exactly the keys with ids want (every one when only is
// false: at least them), Current_key k and k's pkt_good above 0 (the far
// end signs with it); the listener holding k for the learned address. It
// records the socket's pkt_bad.
func (f *fabric) keyed(e fabEnd, k fabKey, want []uint8, only bool) (bool, string) {
	v, ok, detail := e.up()
	if !ok {
		return false, detail
	}
	ref, ks, info, err := e.session(v.Addr)
	if err != nil || len(ks) == 0 {
		return false, fmt.Sprintf("the session over %s to %s has no TCP-AO key (%v): aokeyd does not key FRR's interface neighbours", e, v.Addr, err)
	}
	f.recordBad(ref.Inode, info.PktBad)
	var ids []uint8
	good := false
	for _, ki := range ks {
		ids = append(ids, ki.SendID)
		good = good || ki.SendID == k.id() && ki.PktGood > 0
	}
	lk, err := listenerKeysOf(e.r.frr.PID)
	if err != nil {
		return false, fmt.Sprintf("%s's bgpd listener: %v", e.r.name, err)
	}
	onListener := slices.ContainsFunc(lk, func(ki tcpao.KeyInfo) bool { return ki.SendID == k.id() && ki.Peer.Contains(v.Addr) })
	have := func(id uint8) bool { return slices.Contains(ids, id) }
	complete := !slices.ContainsFunc(want, func(id uint8) bool { return !have(id) }) && (!only || len(ids) == len(want))
	ok = complete && info.HaveCurrent && info.CurrentKey == k.id() && good && onListener
	return ok, fmt.Sprintf("%s (%s): session keys %v (want %v, only %v), current %d (%v), k%d verified %v; listener keys %v, k%d for %s %v",
		e, v, ids, want, only, info.CurrentKey, info.HaveCurrent, k.i, good, refs(lk), k.i, v.Addr, onListener)
}

// allKeyed waits until every end is keyed (see keyed).
func (f *fabric) allKeyed(timeout time.Duration, what string, k fabKey, want []uint8, only bool) {
	f.t.Helper()
	lab.Eventually(f.t, timeout, what, func() (bool, string) {
		for _, e := range f.ends {
			if ok, detail := f.keyed(e, k, want, only); !ok {
				return false, detail
			}
		}
		return true, ""
	})
}

// switchToAO moves the fabric from unsigned to TCP-AO with k: first every
// listener holds k for each learned neighbor address (so that no end
// takes an unsigned SYN any more), then one `clear bgp *` per router
// brings each session back through keyed connects and listeners.
func (f *fabric) switchToAO(k fabKey) {
	t := f.t
	t.Helper()
	lab.Eventually(t, 30*time.Second, "every bgpd's listener keyed for its learned interface neighbours", func() (bool, string) {
		for _, e := range f.ends {
			v, err := e.view()
			if err != nil || !v.Addr.IsValid() {
				return false, fmt.Sprintf("%s: %s %v", e, v, err)
			}
			lk, err := listenerKeysOf(e.r.frr.PID)
			if err != nil {
				return false, fmt.Sprintf("%s's bgpd listener: %v", e.r.name, err)
			}
			if !slices.ContainsFunc(lk, func(ki tcpao.KeyInfo) bool { return ki.SendID == k.id() && ki.Peer.Contains(v.Addr) }) {
				return false, fmt.Sprintf("%s's bgpd listener holds no TCP-AO key for its neighbour on %s (%s): keys %v; aokeyd does not key FRR's interface neighbours",
					e.r.name, e.iface, v.Addr, refs(lk))
			}
		}
		return true, ""
	})
	for _, r := range f.routers {
		if out, err := r.frr.Vtysh("clear bgp *"); err != nil {
			t.Fatalf("%s: clear bgp *: %v: %s", r.name, err, out)
		}
	}
	f.allKeyed(fabricUp, "every unnumbered session back with TCP-AO (k1), read from the kernel", k, []uint8{k.id()}, true)
	t.Logf("TCP-AO on all %d sessions with k%d", len(f.ends), k.i)
}

// roll is round r of the scheduled rolls: every router's key file gets
// the next key, sendable from a second ago, cur's lifetimes ending in 2
// and 3 seconds; every session ends with only the next key, current and
// verified, with no flap.
func (f *fabric) roll(r int, cur fabKey) fabKey {
	f.t.Helper()
	t0 := time.Now()
	old, next := cur, fabKey{i: cur.i + 1, sendStart: t0.Add(-time.Second), acceptStart: t0.Add(-time.Second)}
	old.sendEnd, old.acceptEnd = t0.Add(2*time.Second), t0.Add(3*time.Second)
	f.writeKeys(old, next)
	f.allKeyed(60*time.Second, fmt.Sprintf("round %d: only k%d on every session, current, verified", r, next.i), next, []uint8{next.id()}, true)
	f.checkNoFlap(fmt.Sprintf("round %d", r))
	f.t.Logf("round %d: k%d -> k%d on %d sessions in %v", r, cur.i, next.i, len(f.ends), time.Since(t0).Round(10*time.Millisecond))
	return next
}

// revoke adds a backup key on every router (sendable, but with an
// earlier send start than cur, so cur stays current), then revokes cur
// with `aoctl revoke` on each router in turn: every session moves to the
// backup without a flap. The revoked key then leaves the key files.
func (f *fabric) revoke(cur fabKey) fabKey {
	t := f.t
	t.Helper()
	backup := fabKey{i: cur.i + 1, sendStart: cur.sendStart.Add(-time.Hour), acceptStart: cur.sendStart.Add(-time.Hour)}
	f.writeKeys(cur, backup)
	f.allKeyed(60*time.Second, fmt.Sprintf("backup k%d on every session, k%d current", backup.i, cur.i), cur, []uint8{cur.id(), backup.id()}, true)
	for _, r := range f.routers {
		out, err := exec.Command(lab.MustBin(t, "aoctl"), "--socket", r.ad.ctl.Socket(), "--json", "revoke", "fabric/"+cur.name()).Output()
		if err != nil {
			t.Fatalf("%s: aoctl revoke fabric/%s: %v: %s", r.name, cur.name(), err, out)
		}
		var res control.RevokeResult
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("%s: aoctl revoke --json: %v: %s", r.name, err, out)
		}
		if res.Failed() || !slices.ContainsFunc(res.Sockets, func(s control.RevokeSocket) bool { return s.Action == control.ActionForcedReplaced }) {
			t.Fatalf("%s: revoke of the current key with a backup: %s, want a forced replace on its sessions", r.name, out)
		}
		t.Logf("%s: aoctl revoke fabric/%s: %s", r.name, cur.name(), out)
	}
	f.allKeyed(60*time.Second, fmt.Sprintf("after the revoke: only k%d on every session, current, verified", backup.i), backup, []uint8{backup.id()}, true)
	f.writeKeys(backup)
	f.checkNoFlap("after the revoke")
	return backup
}

// flap takes r2's swp1 down, gives it a new MAC (so a new link-local
// address) and brings it up: link 2's sessions reset (both ends counted
// as deliberate), r3 learns r2's new address and r2 learns r3's again;
// both come back keyed with cur. It returns how many ends relearned
// their neighbor (2 when both did).
func (f *fabric) flap(cur fabKey) int {
	t := f.t
	t.Helper()
	r2, link := f.routers[1], f.ends[2:4] // link 2: r2 swp1 ↔ r3 swp2
	before, err := linkLocal(r2.ns, "swp1")
	if err != nil {
		t.Fatal(err)
	}
	f.sample()
	r2.ns.MustBatch(t, fmt.Sprintf("link set swp1 down\nlink set swp1 address %s\nlink set swp1 up\n", mac(2, 1, 1)))
	for _, e := range link {
		f.want[e.String()]++
	}
	var after string
	lab.Eventually(t, 30*time.Second, "r2 swp1's new link-local address past DAD", func() (bool, string) {
		a, err := linkLocal(r2.ns, "swp1")
		after = a.String()
		return err == nil && a != before, fmt.Sprintf("%s %v (was %s)", a, err, before)
	})
	f.allKeyed(fabricUp, fmt.Sprintf("after the flap of r2 swp1 (%s → %s): both ends relearned and keyed with k%d", before, after, cur.i),
		cur, []uint8{cur.id()}, true)
	relearned := 0
	for _, e := range link {
		v, _ := e.view()
		if v.Conns == f.want[e.String()] {
			relearned++
		}
		t.Logf("flap: %s relearned its neighbour: %s", e, v)
	}
	f.checkNoFlap("after the flap")
	return relearned
}

// restart kills r1's bgpd (SIGKILL, a crash); watchfrr starts a new one
// through bgpd_wrap, under `aokeyd exec`; r1's two sessions come back
// keyed with cur. r1's own counts start again at 1; the far ends count
// one deliberate reset each.
func (f *fabric) restart(cur fabKey) {
	t := f.t
	t.Helper()
	r1 := f.routers[0]
	old := r1.frr.PID
	f.sample()
	if err := unix.Kill(old, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, lab.ProcessStart, "watchfrr starts r1's new bgpd through bgpd_wrap (its pid file)", func() (bool, string) {
		pid, err := bgpfrr.FindPID(r1.frr.PIDFile(), "")
		return err == nil && pid != old, fmt.Sprintf("pid %d %v", pid, err)
	})
	r1.frr.WaitUp(t)
	if exe := parentExe(r1.frr.PID); filepath.Base(exe) != "aokeyd" {
		t.Fatalf("r1's new bgpd (pid %d) runs under %s, want `aokeyd exec` (bgpd_wrap)", r1.frr.PID, exe)
	}
	for _, e := range f.ends {
		switch {
		case e.r == r1:
			f.want[e.String()] = 1
		case e.far == r1:
			f.want[e.String()]++
		}
	}
	f.allKeyed(fabricUp, fmt.Sprintf("r1's bgpd restarted (pid %d → %d): its sessions back, keyed with k%d", old, r1.frr.PID, cur.i),
		cur, []uint8{cur.id()}, true)
	f.allowCollisions(r1)
	f.checkNoFlap("after r1's bgpd restarted")
}

// allowCollisions takes, for each far end of restarted r, one more
// establishment than expected when r's end of that link counts exactly
// what it should (one, its new bgpd's): both ends dial when r's new bgpd
// comes up, and the far end may take to Established a connection that r
// then closes before r's side of it is Established (a collision r
// resolves against it). Seen on 2c0361f in CI and on 4d584e6 alone in
// the guest: r3 counted two establishments after the restart and r1's
// new bgpd one, r3's bgpd log one End-of-RIB from r1, and FRR 10.3's JSON
// gives no reset reason ("lastReset": "never"). A reset of a session that
// reached Established at both ends shows at r's end too, and still fails.
func (f *fabric) allowCollisions(r *fabRouter) {
	f.t.Helper()
	views := map[string]nbrView{}
	for _, e := range f.ends {
		v, err := e.view()
		if err != nil {
			f.t.Fatal(err)
		}
		views[e.String()] = v
	}
	for _, e := range f.ends {
		if e.far != r {
			continue
		}
		near := fabEnd{r: r, iface: e.farIf, far: e.r, farIf: e.iface}.String()
		v, nv := views[e.String()], views[near]
		want, nearWant := f.want[e.String()], f.want[near]
		if v.Conns == want+1 && nv.Conns == nearWant && v.State == "Established" && nv.State == "Established" {
			f.t.Logf("%s: established %d times, %s %d: one establishment %s's new bgpd never had, counted as the restart's collision", e, v.Conns, near, nv.Conns, r.name)
			f.want[e.String()] = want + 1
		}
	}
}

// baseline takes every end's connectionsEstablished as the count to
// expect; deliberate resets add to it (flap, restart).
func (f *fabric) baseline() {
	f.t.Helper()
	f.want = map[string]uint32{}
	for _, e := range f.ends {
		v, err := e.view()
		if err != nil {
			f.t.Fatal(err)
		}
		f.want[e.String()] = v.Conns
	}
}

// flaps is how many establishments every end counts beyond those
// expected (a session that reset unasked counts at both its ends), with
// each end's count.
func (f *fabric) flaps() (int, string) {
	n := 0
	var detail []string
	for _, e := range f.ends {
		v, err := e.view()
		if err != nil {
			return -1, err.Error()
		}
		want := f.want[e.String()]
		if v.Conns != want || v.State != "Established" {
			n += max(int(v.Conns)-int(want), 1)
		}
		detail = append(detail, fmt.Sprintf("%s %s %d/%d", e, v.State, v.Conns, want))
	}
	return n, strings.Join(detail, ", ")
}

// checkNoFlap fails the test when a session reset that was not asked
// for, and records every session socket's pkt_bad.
func (f *fabric) checkNoFlap(when string) {
	f.t.Helper()
	if n, detail := f.flaps(); n != 0 {
		f.t.Fatalf("%s: %d unasked session resets (established counts, seen/expected: %s)", when, n, detail)
	}
	f.sample()
}

// sample records the pkt_bad of every session socket there is now (before
// a deliberate reset closes them).
func (f *fabric) sample() {
	for _, e := range f.ends {
		v, err := e.view()
		if err != nil || !v.Addr.IsValid() {
			continue
		}
		if ref, _, info, err := e.session(v.Addr); err == nil {
			f.recordBad(ref.Inode, info.PktBad)
		}
	}
}

// recordBad keeps the highest pkt_bad seen on the socket with inode (the
// test's goroutine only: waits poll on it).
func (f *fabric) recordBad(inode uint64, bad uint64) {
	if f.bad == nil {
		f.bad = map[uint64]uint64{}
	}
	f.bad[inode] = max(f.bad[inode], bad)
}

// pktBad is the sum of the pkt_bad seen on every session socket.
func (f *fabric) pktBad() uint64 {
	f.sample()
	var n uint64
	for _, b := range f.bad {
		n += b
	}
	return n
}

// listenerKeysOf is listenerKeys without failing the test: a wait polls
// it while bgpd restarts.
func listenerKeysOf(pid int) ([]tcpao.KeyInfo, error) {
	refs, err := sockets.System{}.Listeners(pid, 179)
	if err != nil {
		return nil, fmt.Errorf("listeners of %d: %w", pid, err)
	}
	var out []tcpao.KeyInfo
	for _, r := range refs {
		err := sockets.System{}.With(r, func(fd int) error {
			ks, err := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{SkipFingerprint: true})
			if errors.Is(err, unix.ENOENT) {
				return nil // a listener without TCP-AO (bgpd's IPv4 one): no key
			}
			out = append(out, ks...)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("listener %s keys: %w", r, err)
		}
	}
	return out, nil
}
