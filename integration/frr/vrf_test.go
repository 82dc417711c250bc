package frr

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestFRRVRF: a VRF neighbor. In A's namespace veth-a is enslaved to the
// VRF device blue; bgpd (under watchfrr, beside zebra, which tells bgpd
// about VRFs) runs `router bgp 65001 vrf blue` with the neighbor passive,
// so BIRD connects to bgpd's listener in blue. aokeyd's policy binds the
// neighbor in VRF blue: the keys on bgpd's VRF listener and on the
// session, read from the kernel, carry blue's ifindex
// (TCP_AO_KEYF_IFINDEX), and one rotation is hitless.
func TestFRRVRF(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	lab.RequireNetns(t)
	const vrf = "blue"
	na, nb := lab.Pair(t, netip.PrefixFrom(addrA, 30), netip.PrefixFrom(addrB, 30))
	na.MustRun(t, "ip", "link", "add", vrf, "type", "vrf", "table", "10")
	na.MustRun(t, "ip", "link", "set", vrf, "up")
	na.MustRun(t, "ip", "link", "set", "veth-a", "master", vrf)
	idx, err := strconv.Atoi(strings.TrimSpace(na.MustRun(t, "cat", "/sys/class/net/"+vrf+"/ifindex")))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pathspace := fmt.Sprintf("aokeydvrf%d", os.Getpid())
	k1 := key{i: 1, birdPreferred: true}
	writeKeys(t, dir, addrB, []key{k1}, false)
	cg := filepath.Join(dir, "cg.sock")
	a := startAokeyd(t, na, dir, addrB, fmt.Sprintf("speaker:\n  type: frr\n  frr:\n    pathspace: %q\n    poll_interval: 250ms\n", pathspace), cg)
	// The neighbor is bound in VRF blue (startAokeyd's policy binds it in
	// the default VRF): rewrite the policy and reload it.
	pol := filepath.Join(dir, "policy.yaml")
	b, err := os.ReadFile(pol)
	if err != nil {
		t.Fatal(err)
	}
	vrfPolicy := strings.Replace(string(b), "    key_chain: core\n", "    vrf: "+vrf+"\n    key_chain: core\n", 1)
	if vrfPolicy == string(b) {
		t.Fatalf("policy.yaml has no peer to put in VRF %s:\n%s", vrf, b)
	}
	if err := os.WriteFile(pol, []byte(vrfPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	hup := time.Now()
	if err := a.cmd.Process.Signal(unix.SIGHUP); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 20*time.Second, "aokeyd reloads the policy with the VRF binding", func() (bool, string) {
		_, err := logTime(filepath.Join(dir, "aokeyd.log"), "reloaded", hup)
		return err == nil, fmt.Sprint(err)
	})

	cfg := frrConfig(true)
	cfg.VRF = vrf
	r := StartWatchfrr(t, na, dir, pathspace, cfg, cg)
	r.WaitUp(t)
	l := &birdLab{t: t, dir: dir, frr: r, aokeyd: a, bird: bird.Start(t, nb, birdConfig([]key{k1}, false))}
	s := l.waitEstablished(90 * time.Second)
	if p := l.peer(); p.VRF != vrf {
		t.Fatalf("FRR's neighbor %s is in VRF %q, want %q", addrB, p.VRF, vrf)
	}
	onVRF := func(when string, k key) {
		t.Helper()
		lab.Eventually(t, 20*time.Second, fmt.Sprintf("%s: k%d with ifindex %d (%s) on bgpd's listener and session, in the kernel", when, k.i, idx, vrf), func() (bool, string) {
			lk := listenerKeys(t, r.PID)
			sk, _, err := sessionSocket(r.PID, addrB)
			ok := err == nil && len(lk) == 1 && len(sk) == 1
			for _, ki := range append(lk, sk...) {
				ok = ok && ki.SendID == k.sendID() && ki.IfIndex == idx
			}
			return ok, fmt.Sprintf("listener %v, session %v %v", refs(lk), refs(sk), err)
		})
	}
	onVRF("established", k1)
	st := l.aokeyd.mustStatus(t)
	t.Logf("VRF %s (ifindex %d): session up with TCP-AO, A keys %v sockets %v", vrf, idx, lab.KeyList(st.Keys), st.Sockets)
	k2 := l.roll(1, k1, s)
	onVRF("after the rotation", k2)
	lk := listenerKeys(t, r.PID)
	sk, info, err := sessionSocket(r.PID, addrB)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel keys after the rotation: listener %v, session %v (pkt_bad %d)", refs(lk), refs(sk), info.PktBad)
	frrLine(t, "bird", "passive", 1, int(l.peer().Flops-s.flops), l.pktBad())
}

// refs lists the keys' references (peer, ifindex, ids) for the logs.
func refs(ks []tcpao.KeyInfo) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.KeyRef.String())
	}
	return out
}
