package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestForeignKeys (issue 33): keys a third process puts on gobgpd's
// listener (90/91) and on its established session with BIRD (80/81), as
// an operator's emergency setsockopt would, are not aokeyd's. They are
// still there after ten full passes (SIGHUP), a roll (k1 to k2, BIRD
// following) and an aokeyd restart; status and plan list them. A foreign
// key under the IDs of the key aokeyd would roll to next (k3's, other
// material) freezes that roll: nothing is deleted or replaced, the
// session keeps k2, status says why. Once its agent removes it, `aoctl
// adopt` hands the other two to aokeyd, which retires them. The session
// never drops. It prints "foreign-keys: kept=N deleted=0 adopted=M":
// kept counts the foreign keys (per socket) still in place before the
// adopt, deleted those gone, adopted what aoctl adopt reported.
func TestForeignKeys(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	k1 := key{i: 1, birdPreferred: true}
	l := newLab(t, []key{k1}, nil)
	s := l.waitEstablished(90 * time.Second)
	l.foreign = map[[2]uint8]bool{{90, 91}: true, {80, 81}: true}

	lis, sess := l.gobgpSockets()
	secret := []byte("an operator's emergency TCP-AO key")
	foreign := func(ref sockets.Ref, send, recv uint8) {
		t.Helper()
		k := tcpao.Key{KeyRef: tcpao.KeyRef{Peer: hostPrefixOf(l.ipB()), SendID: send, RecvID: recv}, Algorithm: tcpao.HMACSHA1, Secret: tcpao.NewSecret(secret)}
		defer k.Secret.Zero()
		if err := (sockets.System{}).With(ref, func(fd int) error { return tcpao.FromFD(fd).AddKey(k, tcpao.AddOptions{}) }); err != nil {
			t.Fatalf("the third process's add of %d/%d on %s: %v", send, recv, ref, err)
		}
	}
	foreign(lis, 90, 91)
	foreign(sess, 80, 81)
	type placed struct {
		ref        sockets.Ref
		send, recv uint8
	}
	all := []placed{{lis, 90, 91}, {sess, 80, 81}}
	present := func(p placed) bool {
		found := false
		err := (sockets.System{}).With(p.ref, func(fd int) error {
			ks, err := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{})
			found = slices.ContainsFunc(ks, func(k tcpao.KeyInfo) bool { return k.SendID == p.send && k.RecvID == p.recv })
			return err
		})
		if err != nil {
			t.Fatalf("read %s: %v", p.ref, err)
		}
		return found
	}
	check := func(when string) {
		t.Helper()
		for _, p := range all {
			if !present(p) {
				t.Fatalf("%s: the foreign key %d/%d is gone from %s", when, p.send, p.recv, p.ref)
			}
		}
	}

	// Ten full passes: a reload runs one each.
	passes := func() int { return strings.Count(lab.Tail(l.aokeydLog(), 1<<24), `"msg":"full reconcile pass"`) }
	before := passes()
	for range 10 {
		if err := l.aokeyd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	lab.Eventually(t, 20*time.Second, "ten full passes", func() (bool, string) {
		n := passes() - before
		return n >= 10, fmt.Sprintf("%d passes", n)
	})
	check("after ten passes")

	// A roll, BIRD following.
	k2 := l.roll(1, k1, s, nil)
	check("after a roll")

	l.restartAokeyd()
	lab.Eventually(t, 30*time.Second, "aokeyd back, the session managed", func() (bool, string) {
		st, err := l.tryStatus()
		if err != nil {
			return false, err.Error()
		}
		return st.Rotation.State == "steady", st.Rotation.State
	})
	time.Sleep(3 * time.Second) // its take-over and a listener sync
	check("after an aokeyd restart")

	// Listed in status and plan.
	lab.Eventually(t, 30*time.Second, "status warns of both foreign keys", func() (bool, string) {
		st := l.status()
		return hasWords(st.Warnings, "send=90 recv=91", "not installed by aokeyd") && hasWords(st.Warnings, "send=80 recv=81", "not installed by aokeyd"),
			fmt.Sprintf("warnings %q", st.Warnings)
	})
	plan, err := l.ctl.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kept send=80 recv=81", "kept send=90 recv=91"} {
		if !slices.ContainsFunc(plan.Plan, func(line string) bool { return strings.Contains(line, want) && strings.Contains(line, "(foreign)") }) {
			t.Errorf("aoctl plan lacks %q ... (foreign):\n%s", want, strings.Join(plan.Plan, "\n"))
		}
	}

	// A foreign key under k3's IDs freezes the roll to k3.
	k3 := key{i: 3}
	clash := []placed{{lis, k3.sendID(), k3.recvID()}, {sess, k3.sendID(), k3.recvID()}}
	for _, p := range clash {
		foreign(p.ref, p.send, p.recv)
	}
	l.foreign[[2]uint8{k3.sendID(), k3.recvID()}] = true
	all = append(all, clash...)
	if err := l.bird.Configure(l.birdConfig([]key{k2, k3})); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Second) // one reading: a send lifetime must lie within the accept lifetime
	k3.sendStart, k3.acceptStart = start, start
	l.writeKeys([]key{k2, k3})
	lab.Eventually(t, 30*time.Second, "status says the roll waits for the foreign key", func() (bool, string) {
		st := l.status()
		return hasWords(st.Warnings, "core/k3", "another agent installed a key under the same IDs"), fmt.Sprintf("warnings %q", st.Warnings)
	})
	time.Sleep(5 * time.Second)
	check("with a clashing foreign key")
	fp := tcpao.NewSecret(secret).Fingerprint()
	for _, p := range clash {
		_ = (sockets.System{}).With(p.ref, func(fd int) error {
			ks, _ := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{})
			for _, k := range ks {
				if k.SendID == p.send && k.Fingerprint != fp {
					t.Errorf("%s: the foreign key under k3's IDs was replaced", p.ref)
				}
			}
			return nil
		})
	}
	if st := l.status(); !slices.ContainsFunc(st.Keys, func(k control.Key) bool { return k.SendID == k2.sendID() && k.Current }) {
		t.Errorf("A stopped sending with k2 while the roll to k3 is frozen: %s", lab.KeyList(st.Keys))
	}
	kept, deleted := 0, 0
	for _, p := range all {
		if present(p) {
			kept++
		} else {
			deleted++
		}
	}
	l.checkNoFlap(s, "with the foreign keys")

	// Its agent takes the clashing key away and the key source drops k3;
	// the operator adopts the other two, which aokeyd then retires.
	for _, p := range clash {
		err := (sockets.System{}).With(p.ref, func(fd int) error {
			return tcpao.FromFD(fd).DelKey(tcpao.DelKey{KeyRef: tcpao.KeyRef{Peer: hostPrefixOf(l.ipB()), SendID: p.send, RecvID: p.recv}})
		})
		if err != nil {
			t.Fatalf("the third process's delete on %s: %v", p.ref, err)
		}
	}
	l.writeKeys([]key{k2})
	out, err := exec.Command(lab.MustBin(t, "aoctl"), "--socket", l.ctl.Socket(), "--json", "adopt", l.ipB().String()).Output()
	if err != nil {
		t.Fatalf("aoctl adopt: %v: %s", err, out)
	}
	var res control.AdoptResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("aoctl adopt --json: %v: %s", err, out)
	}
	t.Logf("aoctl adopt: %+v", res.Adopted)
	lab.Eventually(t, 40*time.Second, "the adopted keys retired", func() (bool, string) {
		l.foreign = nil
		lk := l.listenerKeys()
		st := l.status()
		return len(lk) == 1 && lk[0].SendID == k2.sendID() && len(st.Keys) == 1, fmt.Sprintf("listener %s, session %s", listenerIDs(lk), lab.KeyList(st.Keys))
	})
	l.checkNoFlap(s, "after the adopted keys were retired")
	fmt.Printf("foreign-keys: kept=%d deleted=%d adopted=%d\n", kept, deleted, len(res.Adopted))
	if kept != 4 || deleted != 0 || len(res.Adopted) != 2 {
		t.Fatalf("foreign keys: kept %d deleted %d adopted %d, want 4, 0, 2", kept, deleted, len(res.Adopted))
	}
}

func hostPrefixOf(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// gobgpSockets are gobgpd's listener (the one of the session's family)
// and its established session with B.
func (l *testbed) gobgpSockets() (lis, sess sockets.Ref) {
	l.t.Helper()
	refs, err := sockets.System{}.Listeners(l.gobgp.PID, 179)
	if err != nil || len(refs) == 0 {
		l.t.Fatalf("gobgpd listeners: %v (%d)", err, len(refs))
	}
	lis = refs[0]
	for _, r := range refs {
		if r.Local.Addr().Unmap().Is4() == l.ipB().Is4() {
			lis = r
		}
	}
	conns, err := sockets.System{}.Connections(l.gobgp.PID, l.ipB())
	if err != nil || len(conns) != 1 {
		l.t.Fatalf("gobgpd's sessions with B: %v (%d)", err, len(conns))
	}
	return lis, conns[0]
}
