package frr

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The FRR lab: router A is FRR's bgpd managed by aokeyd (speaker type frr),
// router B is BIRD 2.17 with `authentication ao` (or gobgpd with its own
// aokeyd), in two namespaces joined by veth.
var (
	addrA = netip.MustParseAddr("10.255.16.1")
	addrB = netip.MustParseAddr("10.255.16.2")
)

const (
	asA = 65001
	asB = 65002
)

var (
	routesA = []string{"198.51.100.0/26", "198.51.100.64/26", "198.51.100.128/26"}
	routesB = []string{"203.0.113.0/26", "203.0.113.64/26", "203.0.113.128/26"}
)

// The rotations each scenario runs in `make test`: the counts, 20
// with BIRD (passive and active) and 10 with gobgpd. AOKEYD_FRR_ROUNDS
// overrides both (a quick run while developing).
const (
	defaultRounds       = 20
	defaultGobgpdRounds = 10
)

// rounds is the number of rotations of a scenario: def, or
// AOKEYD_FRR_ROUNDS.
func rounds(t *testing.T, def int) int {
	if s := os.Getenv("AOKEYD_FRR_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return def
}

// key is round i's MKT. A sends with SendID i and receives RecvID 100+i;
// the other router holds the mirror image.
type key struct {
	i                       int
	sendStart, sendEnd      time.Time
	acceptStart, acceptEnd  time.Time
	birdPreferred, birdDepr bool
}

func secretOf(i int) []byte {
	s := sha256.Sum256([]byte("aokeyd frr round " + strconv.Itoa(i)))
	return s[:20]
}

func (k key) sendID() uint8 { return uint8(k.i) }
func (k key) recvID() uint8 { return uint8(100 + k.i) }
func (k key) name() string  { return fmt.Sprintf("k%d", k.i) }

// writeKeys writes an aokeyd key file in dir for peer with keys (mirrored:
// the IDs swapped, for the other end of the link).
func writeKeys(t *testing.T, dir string, peer netip.Addr, keys []key, mirrored bool) {
	t.Helper()
	lab.WriteKeyFile(t, dir, map[string]any{"core": map[string]any{"peers": []string{peer.String()}, "keys": mktEntries(keys, mirrored)}})
}

// mktEntries are keys as a chain's key list of the key file (mirrored: the
// IDs swapped).
func mktEntries(keys []key, mirrored bool) []map[string]any {
	var ks []map[string]any
	for _, k := range keys {
		send, recv := k.sendID(), k.recvID()
		if mirrored {
			send, recv = recv, send
		}
		ks = append(ks, map[string]any{"name": k.name(), "send_id": send, "recv_id": recv, "algorithm": "hmac(sha256)",
			"secret_hex": hex.EncodeToString(secretOf(k.i)), "send_lifetime": lab.KeyLifetime(k.sendStart, k.sendEnd),
			"accept_lifetime": lab.KeyLifetime(k.acceptStart, k.acceptEnd)})
	}
	return ks
}

// aokeyd is one aokeyd with its directory, config and control client.
type aokeyd struct {
	dir  string
	ns   *netns.NS
	args []string
	cmd  *exec.Cmd
	ctl  *control.Client
	peer netip.Addr
}

// speakerFRR and speakerGoBGP are aokeyd.yaml speaker sections.
func speakerFRR(r *Router) string {
	return fmt.Sprintf("speaker:\n  type: frr\n  frr:\n    vty_socket: %q\n    pid_file: %q\n    poll_interval: 250ms\n",
		r.VtySocket(), r.PIDFile())
}

func speakerGoBGP(api, pidFile string) string {
	return fmt.Sprintf("gobgp:\n  address: %q\n  pid_file: %q\n", api, pidFile)
}

// startAokeyd writes policy and config into dir (keys.yaml is the caller's)
// and runs aokeyd in ns; connectguard, when set, is the socket of the
// `aokeyd exec` launcher whose connects it keys.
func startAokeyd(t *testing.T, ns *netns.NS, dir string, peer netip.Addr, speaker, connectguard string) *aokeyd {
	t.Helper()
	policy := fmt.Sprintf(`version: 1
key_chains:
  - name: core
%speers:
  - neighbor: %s
    key_chain: core
`, safetyPolicy, peer)
	return startAokeydPolicy(t, ns, dir, peer, policy, speaker, connectguard)
}

// safetyPolicy is the safety section of the labs' policies.
const safetyPolicy = `safety:
  switch_timeout: 15s
  on_switch_timeout: retry
  retry_after: 2s
  on_revoke_only_key: reset
`

// startAokeydPolicy is startAokeyd with the policy document given.
func startAokeydPolicy(t *testing.T, ns *netns.NS, dir string, peer netip.Addr, policy, speaker, connectguard string) *aokeyd {
	t.Helper()
	cfg := "key_source:\n  type: file\n  refresh: 250ms\n  file:\n    path: keys.yaml\npolicy:\n  path: policy.yaml\n" + speaker +
		"control:\n  socket: control.sock\nmetrics:\n  listen: \"off\"\nlog:\n  format: json\n  level: debug\n"
	for name, data := range map[string]string{"policy.yaml": policy, "aokeyd.yaml": cfg} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return launchAokeyd(t, ns, dir, peer, connectguard)
}

// launchAokeyd starts aokeyd in ns (nil: the guest's root namespace) with
// dir's aokeyd.yaml, with the connect guard's socket when given.
func launchAokeyd(t *testing.T, ns *netns.NS, dir string, peer netip.Addr, connectguard string) *aokeyd {
	t.Helper()
	a := &aokeyd{dir: dir, ns: ns, peer: peer, ctl: control.NewClient(filepath.Join(dir, "control.sock"), 10*time.Second),
		args: []string{"-config", filepath.Join(dir, "aokeyd.yaml"), "-state-dir", filepath.Join(dir, "state"),
			"-roll-grace", "1s", "-roll-poll", "250ms", "-roll-backoff", "2s"}}
	if connectguard != "" {
		a.args = append(a.args, "-connectguard", connectguard)
	}
	t.Cleanup(func() {
		if t.Failed() {
			lab.Dump(t, "aokeyd "+dir+" log (info and above, last 60)", lab.InfoLines(filepath.Join(dir, "aokeyd.log"), 60))
		}
	})
	a.cmd = lab.StartAokeyd(t, ns, filepath.Join(dir, "aokeyd.log"), a.ctl, a.args...)
	return a
}

func (a *aokeyd) status() (control.PeerStatus, error) {
	rep, err := a.ctl.Status(context.Background(), a.peer.String())
	if err != nil {
		return control.PeerStatus{}, fmt.Errorf("aoctl status: %w", err)
	}
	if len(rep.Peers) != 1 {
		return control.PeerStatus{}, fmt.Errorf("aoctl status: %d peers", len(rep.Peers))
	}
	return rep.Peers[0], nil
}

func (a *aokeyd) mustStatus(t *testing.T) control.PeerStatus {
	t.Helper()
	st, err := a.status()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// listenerKeys reads the keys on pid's listening sockets straight from the
// kernel (a pidfd_getfd duplicate), independently of aokeyd.
func listenerKeys(t *testing.T, pid int) []tcpao.KeyInfo {
	t.Helper()
	refs, err := sockets.System{}.Listeners(pid, 179)
	if err != nil {
		t.Fatalf("listeners of %d: %v", pid, err)
	}
	var out []tcpao.KeyInfo
	for _, r := range refs {
		err := sockets.System{}.With(r, func(fd int) error {
			ks, err := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{})
			out = append(out, ks...)
			return err
		})
		if err != nil && !strings.Contains(err.Error(), "no such file") {
			t.Fatalf("listener %s keys: %v", r, err)
		}
	}
	return out
}

// hasOnly reports whether st carries exactly the key with send id, current.
func hasOnly(st control.PeerStatus, send uint8) bool {
	return len(st.Keys) == 1 && st.Keys[0].SendID == send && st.Keys[0].Current
}

func hasSending(st control.PeerStatus, send uint8) bool {
	return slices.ContainsFunc(st.Keys, func(k control.Key) bool { return k.SendID == send && k.PktGood > 0 })
}

// birdConfig is B's BIRD configuration with keys (mirrored).
func birdConfig(keys []key, passive bool) bird.Config {
	cfg := bird.Config{RouterID: addrB.String(), LocalAddr: addrB.String(), LocalAS: asB,
		Neighbor: addrA.String(), PeerAS: asA, Routes: routesB, HoldTime: 3, Passive: passive}
	for _, k := range keys {
		cfg.Keys = append(cfg.Keys, bird.Key{SendID: k.recvID(), RecvID: k.sendID(), Secret: secretOf(k.i),
			Algorithm: "hmac sha256", Preferred: k.birdPreferred, Deprecated: k.birdDepr})
	}
	return cfg
}

// frrConfig is A's bgpd configuration with B as its neighbor.
func frrConfig(passive bool) Config {
	return Config{AS: asA, RouterID: addrA, LocalAddr: addrA, Routes: routesA,
		Neighbors: []Neighbor{{Addr: addrB, AS: asB, Passive: passive}}}
}

// frrLine is the one line each scenario prints, exactly in the form.
func frrLine(t *testing.T, peer, mode string, rotations, flaps int, pktBad uint64) {
	t.Logf("FRR %s", Version())
	fmt.Printf("frr: peer=%s mode=%s rotations=%d flaps=%d pkt_bad=%d\n", peer, mode, rotations, flaps, pktBad)
}

// wrapOptions start bgpd the way FRR's init script and watchfrr do with
// bgpd_wrap set to the documented wrapper: under `aokeyd exec` on socket
// cg, the launcher's output in dir.
func wrapOptions(t *testing.T, cg, dir string) Options {
	return Options{Wrap: wrapScript, Env: []string{"AOKEYD=" + lab.MustBin(t, "aokeyd"), "AOKEYD_CONNECTGUARD=" + cg,
		"AOKEYD_WRAP_LOG=" + filepath.Join(dir, "aokeyd-exec.log")}, Later: true}
}
