package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
)

// The far end's files in `aoctl peer-config --for aokeyd` output: the key
// file is the whole output (everything but the keys is a comment), the
// policy and aokeyd.yaml lines follow their markers, commented out.
const (
	markPolicy = "# --- policy.yaml of the far end ---"
	markConfig = "# --- aokeyd.yaml of the far end ---"
)

// farEnd is router B: gobgpd under `aokeyd exec` (it connects to A) and its
// own aokeyd, configured from A's `aoctl peer-config --for aokeyd`.
type farEnd struct {
	dir    string
	gobgp  *lab.Gobgpd
	aokeyd *exec.Cmd
	ctl    *control.Client
}

// peerConfigAokeyd runs `aoctl peer-config B --for aokeyd --with-secrets`
// on A's config, as B's operator would.
func (l *testbed) peerConfigAokeyd() string {
	l.t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(lab.MustBin(l.t, "aoctl"), "peer-config", addrB.String(), "--for", "aokeyd",
		"--config", filepath.Join(l.dir, "aokeyd.yaml"), "--local", addrA.String(), "--with-secrets")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		l.t.Fatalf("aoctl peer-config --for aokeyd: %v\n%s", err, errb.String())
	}
	return out.String()
}

// uncomment is the lines of the rendering's section after mark, without
// their "# " (up to the next section marker).
func uncomment(t *testing.T, r, mark string) string {
	t.Helper()
	i := strings.Index(r, mark)
	if i < 0 {
		t.Fatalf("the rendering has no %q:\n%s", mark, r)
	}
	var out []string
	for _, line := range strings.Split(r[i+len(mark):], "\n")[1:] {
		if strings.HasPrefix(line, "# ---") {
			break
		}
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "# ") {
			t.Fatalf("section %q: line %q is not a commented line", mark, line)
		}
		out = append(out, strings.TrimPrefix(line, "# "))
	}
	return strings.Join(out, "\n") + "\n"
}

// writeFarKeys writes the rendering as B's key file (atomically: B's
// aokeyd may be reading it).
func (f *farEnd) writeKeys(t *testing.T, r string) {
	t.Helper()
	p := filepath.Join(f.dir, "keys.yaml")
	if err := os.WriteFile(p+".tmp", []byte(r), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		t.Fatal(err)
	}
}

// startFarEnd configures router B from the rendering r and starts it.
func (l *testbed) startFarEnd(r string) *farEnd {
	t := l.t
	t.Helper()
	f := &farEnd{dir: t.TempDir()}
	f.writeKeys(t, r)
	// The rendering's two aokeyd.yaml lines, and B's own site settings.
	conf := uncomment(t, r, markConfig) + fmt.Sprintf(`gobgp:
  address: %q
  pid_file: gobgpd.pid
control:
  socket: control.sock
metrics:
  listen: "off"
log:
  format: json
  level: debug
`, "unix://"+filepath.Join(f.dir, "gobgpd.sock"))
	for n, data := range map[string]string{"policy.yaml": uncomment(t, r, markPolicy), "aokeyd.yaml": conf} {
		if err := os.WriteFile(filepath.Join(f.dir, n), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			lab.Dump(t, "B's aokeyd.yaml and aokeyd.log (tail)", conf+"\n"+lab.Tail(filepath.Join(f.dir, "aokeyd.log"), 20000))
		}
	})
	f.gobgp = lab.StartGobgpd(t, l.b, "gobgpd", lab.GobgpdConfig{
		AS: asB, RouterID: addrB, LocalAddrs: []netip.Addr{addrB},
		Neighbors: []lab.Neighbor{{Addr: addrA, AS: asA}}, HoldTime: 3, Keepalive: 1,
	}, lab.GobgpdOptions{Dir: f.dir, Launcher: []string{lab.MustBin(t, "aokeyd"), "exec", "-socket", filepath.Join(f.dir, "cg.sock"), "--"}})
	f.ctl = control.NewClient(filepath.Join(f.dir, "control.sock"), 10*time.Second)
	f.aokeyd = lab.StartAokeyd(t, l.b, filepath.Join(f.dir, "aokeyd.log"), f.ctl,
		"-config", filepath.Join(f.dir, "aokeyd.yaml"), "-state-dir", filepath.Join(f.dir, "state"),
		"-connectguard", filepath.Join(f.dir, "cg.sock"), "-roll-grace", "2s", "-roll-poll", "250ms")
	return f
}

func (f *farEnd) peer(t *testing.T) bgp.PeerInfo {
	t.Helper()
	p, err := f.tryPeer()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tryPeer is B's gobgpd's neighbor A, or why not: while B starts (its
// gobgpd under aokeyd exec waits for its aokeyd to key its listener
// before it serves its API) there is none yet.
func (f *farEnd) tryPeer() (bgp.PeerInfo, error) {
	ps, err := f.gobgp.Speaker.Peers(context.Background())
	if err != nil {
		return bgp.PeerInfo{}, fmt.Errorf("B's gobgpd ListPeer: %w", err)
	}
	for _, p := range ps {
		if p.Neighbor == addrA {
			return p, nil
		}
	}
	return bgp.PeerInfo{}, fmt.Errorf("B's gobgpd has no neighbor %s", addrA)
}

func (f *farEnd) status(t *testing.T) control.PeerStatus {
	t.Helper()
	st, err := f.tryStatus()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// tryStatus is B's aokeyd's status of A, or why not (while B starts,
// its aokeyd knows no peer until its gobgpd lists them).
func (f *farEnd) tryStatus() (control.PeerStatus, error) {
	rep, err := f.ctl.Status(context.Background(), addrA.String())
	if err != nil || len(rep.Peers) != 1 {
		return control.PeerStatus{}, fmt.Errorf("B's aokeyd status: %v (%d peers)", err, len(rep.Peers))
	}
	return rep.Peers[0], nil
}

// currentSend is the send ID of a status's Current_key with good
// segments (0: none).
func currentSend(ks []control.Key) uint8 {
	for _, k := range ks {
		if k.Current && k.PktGood > 0 {
			return k.SendID
		}
	}
	return 0
}

// TestAokeydFromPeerConfig: router B (gobgpd and its own aokeyd) is
// configured from nothing but `aoctl peer-config --for aokeyd` rendered
// from router A's config: its key file is the rendering itself, its policy
// and the key_source/policy lines of its aokeyd.yaml are the rendering's
// commented sections. The session comes up with TCP-AO, and a roll in
// A's chain, followed at B by rendering again (B's operator: write the key
// file, reload aokeyd), completes with no flap and no bad segment.
func TestAokeydFromPeerConfig(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	now := time.Now()
	k1 := key{i: 1, sendStart: now.Add(-time.Hour), acceptStart: now.Add(-time.Hour)}
	l := &testbed{t: t, dir: t.TempDir()}
	t.Cleanup(func() {
		if t.Failed() {
			lab.Dump(t, "A's aokeyd.log (tail)", lab.Tail(l.aokeydLog(), 20000))
		}
	})
	l.a, l.b = lab.Pair(t, netip.PrefixFrom(addrA, 30), netip.PrefixFrom(addrB, 30))
	l.writeKeys([]key{k1})
	l.startGobgpd()
	l.startAokeyd()
	r := l.peerConfigAokeyd()
	if !strings.Contains(r, fmt.Sprintf("send_id: %d\n        recv_id: %d", k1.recvID(), k1.sendID())) {
		t.Fatalf("the rendering does not swap k1's IDs:\n%s", keyLinesYAML(r))
	}
	f := l.startFarEnd(r)

	var upA, upB bgp.PeerInfo
	lab.Eventually(t, 40*time.Second, "the session established with TCP-AO on k1 at both ends", func() (bool, string) {
		var err error
		upA = l.peerA()
		if upB, err = f.tryPeer(); err != nil {
			return false, err.Error()
		}
		sa := l.status()
		sb, err := f.tryStatus()
		if err != nil {
			return false, err.Error()
		}
		ok := upA.Established() && upB.Established() && currentSend(sa.Keys) == k1.sendID() && currentSend(sb.Keys) == k1.recvID()
		return ok, fmt.Sprintf("A %s keys %s; B %s keys %s", upA.State, lab.KeyList(sa.Keys), upB.State, lab.KeyList(sb.Keys))
	})

	// The roll: k1 sends until sw and is accepted 10s longer; k2 is
	// accepted at once and sends from sw. A reads its key file every
	// second; B's operator renders again, writes B's key file and reloads.
	sw := time.Now().Add(8 * time.Second)
	old := k1
	old.sendEnd, old.acceptEnd = sw, sw.Add(10*time.Second)
	k2 := key{i: 2, sendStart: sw, acceptStart: time.Now().Add(-time.Second)}
	l.writeKeys([]key{old, k2})
	f.writeKeys(t, l.peerConfigAokeyd())
	if err := f.aokeyd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 30*time.Second, "both ends sending with k2", func() (bool, string) {
		sa, sb := l.status(), f.status(t)
		ok := currentSend(sa.Keys) == k2.sendID() && currentSend(sb.Keys) == k2.recvID() && sa.Rotation.State == "steady" && sb.Rotation.State == "steady"
		return ok, fmt.Sprintf("A %s %s; B %s %s", lab.KeyList(sa.Keys), sa.Rotation.State, lab.KeyList(sb.Keys), sb.Rotation.State)
	})
	pa, pb := l.peerA(), f.peer(t)
	sa, sb := l.status(), f.status(t)
	flaps := 0
	for _, x := range [][2]bgp.PeerInfo{{upA, pa}, {upB, pb}} {
		if !x[1].Established() || x[1].Uptime != x[0].Uptime || x[1].Flops != x[0].Flops {
			flaps++
		}
	}
	fmt.Printf("peer-config-aokeyd: flaps=%d pkt_bad_a=%d pkt_bad_b=%d a_current=%d b_current=%d\n",
		flaps, sa.Counters.PktBad, sb.Counters.PktBad, currentSend(sa.Keys), currentSend(sb.Keys))
	if flaps != 0 || sa.Counters.PktBad != 0 || sb.Counters.PktBad != 0 {
		t.Errorf("the roll: %d sessions flapped (A %+v, B %+v), pkt_bad A %d B %d, want none", flaps, pa, pb, sa.Counters.PktBad, sb.Counters.PktBad)
	}
}

// keyLinesYAML is the rendering without its secrets, for a failure message.
func keyLinesYAML(r string) string {
	var out []string
	for _, line := range strings.Split(r, "\n") {
		if strings.Contains(line, "secret_hex:") {
			line = "        secret_hex: (redacted)"
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
