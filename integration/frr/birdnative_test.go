package frr

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
)

// TestFRRBirdNative (issue 33): FRR (A, passive, keyed by aokeyd on bgpd's
// sockets) and BIRD (B) driven by a second aokeyd's native BIRD driver:
// ten scheduled rolls, both key sources written at once as an operator's
// automation would, and aokeyd alone changing either router. After each
// roll only the new key is on FRR's and BIRD's established and listening
// sockets (read from the kernel), both ends send with it, pkt_bad stays 0
// and the session never drops. It prints
// "bird-native: peer=frr rotations=N flaps=0 pkt_bad=B".
func TestFRRBirdNative(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	n := rounds(t, 10)
	lab.RequireNetns(t)
	l := &birdLab{t: t, dir: t.TempDir()}
	a, b := lab.Pair(t, netip.PrefixFrom(addrA, 30), netip.PrefixFrom(addrB, 30))
	k1 := key{i: 1}
	writeKeys(t, l.dir, addrB, []key{k1}, false)
	l.frr = Start(t, a, l.dir, frrConfig(true), Options{})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bgpd logs:\n%s", l.frr.LogTail())
		}
	})
	l.aokeyd = startAokeyd(t, a, l.dir, addrB, speakerFRR(l.frr), "")
	bdir, birdDir := t.TempDir(), t.TempDir()
	writeKeys(t, bdir, addrA, []key{k1}, true)
	nb := lab.StartNativeBird(t, b, bdir, birdDir, "", []string{addrA.String()})
	bc := birdConfig(nil, false)
	bc.Include = nb.File(addrA.String())
	l.bird = bird.StartIn(t, b, birdDir, bc)
	s := l.waitEstablished(90 * time.Second)
	cur := k1
	for r := 1; r <= n; r++ {
		next := key{i: cur.i + 1}
		now := time.Now()
		old := cur
		old.sendEnd, old.acceptEnd = now.Add(2*time.Second), now.Add(3*time.Second)
		next.sendStart, next.acceptStart = now.Add(-time.Second), now.Add(-time.Second)
		writeKeys(t, l.dir, addrB, []key{old, next}, false)
		writeKeys(t, bdir, addrA, []key{old, next}, true)
		want := []string{fmt.Sprintf("%d/%d", next.recvID(), next.sendID())}
		lab.Eventually(t, 90*time.Second, fmt.Sprintf("round %d: only k%d on both ends, sent with", r, next.i), func() (bool, string) {
			st, err := l.aokeyd.status()
			if err != nil {
				return false, err.Error()
			}
			bs, _ := l.bird.Protocol()
			lis, sess := lab.BirdKeys(t, filepath.Join(birdDir, "bird.pid"), addrA)
			lk := listenerKeys(t, l.frr.PID)
			ok := hasOnly(st, next.sendID()) && len(lk) == 1 && lk[0].SendID == next.sendID() &&
				slices.Equal(lis, want) && slices.Equal(sess, want) && bs.CurrentKey == int(next.recvID())
			return ok, fmt.Sprintf("A keys %v (%s), listener %d keys; BIRD listener %v session %v current %d", lab.KeyList(st.Keys), st.Rotation.State, len(lk), lis, sess, bs.CurrentKey)
		})
		st := l.aokeyd.mustStatus(t)
		bs, _ := l.bird.Protocol()
		if st.Counters.PktBad != 0 || bs.PktBad != 0 {
			t.Fatalf("round %d: pkt_bad A=%d B=%d, want 0", r, st.Counters.PktBad, bs.PktBad)
		}
		l.checkNoFlap(s, fmt.Sprintf("round %d", r))
		cur = next
	}
	fmt.Printf("bird-native: peer=frr rotations=%d flaps=%d pkt_bad=%d\n", n, int(l.peer().Flops-s.flops), l.pktBad())
}
