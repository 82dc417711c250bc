package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// sessions32 is the number of sessions of TestMigrateBIRD32.
const sessions32 = 32

// addr32 are the two ends of session i: gobgpd's (A) and BIRD's (B), each
// session its own /30 on the link.
func addr32(i int) (a, b netip.Addr) {
	base := netip.MustParseAddr("10.255.1.0").As4()
	base[3] = byte(4*i + 1)
	a = netip.AddrFrom4(base)
	base[3]++
	return a, netip.AddrFrom4(base)
}

// TestMigrateBIRD32 (issue 34): one router, gobgpd+aokeyd with 32 TCP-MD5
// sessions to BIRD 2.17, moves them all with `aoctl migrate --all`: one
// re-establishment each, no session down for longer than the bound, no
// MD5 key left on gobgpd's listener, every session on TCP-AO with
// verified segments, and no unsigned or wrongly signed SYN from a peer's
// address taken (sampled every 100 ms). It prints "migrate: far=bird
// sessions=32 reconnects=R md5_left=0 ao_good=1 unsigned_accepted=0".
func TestMigrateBIRD32(t *testing.T) {
	kerneltest.Require(t)
	dir := t.TempDir()
	a, b := lab.Pair(t, netip.PrefixFrom(addrA, 30), netip.PrefixFrom(addrB, 30))
	var neighbors []lab.Neighbor
	var bindings, addrsA, addrsB strings.Builder
	for i := range sessions32 {
		ai, bi := addr32(i)
		fmt.Fprintf(&addrsA, "addr add %s/30 dev veth-a\n", ai)
		fmt.Fprintf(&addrsB, "addr add %s/30 dev veth-b\n", bi)
		neighbors = append(neighbors, lab.Neighbor{Addr: bi, AS: asB, Passive: true})
		fmt.Fprintf(&bindings, "  - neighbor: %s\n    key_chain: core\n", bi)
	}
	a.MustBatch(t, addrsA.String()) // one exec a side, not 32
	b.MustBatch(t, addrsB.String())
	g := lab.StartGobgpd(t, a, "gobgpd", lab.GobgpdConfig{AS: asA, RouterID: addrA, Neighbors: neighbors, HoldTime: 9, Keepalive: 3},
		lab.GobgpdOptions{Dir: dir})
	k1 := key{i: 1}
	files := map[string]string{
		"keys.yaml": fmt.Sprintf(`chains:
  core:
    peers: [10.255.1.0/24]
    md5: {secret_b64: %q}
    keys:
      - {name: %s, send_id: %d, recv_id: %d, algorithm: %s, secret_hex: %q}
`, base64.StdEncoding.EncodeToString([]byte(labMD5)), k1.name(), k1.sendID(), k1.recvID(), k1.algorithm(), hex.EncodeToString(k1.secretA())),
		"policy.yaml": "version: 1\nkey_chains:\n  - name: core\nsafety:\n  switch_timeout: 15s\npeers:\n" + bindings.String(),
		"aokeyd.yaml": fmt.Sprintf("key_source:\n  type: file\n  refresh: 1s\n  file:\n    path: keys.yaml\npolicy:\n  path: policy.yaml\n"+
			"gobgp:\n  address: %q\n  pid_file: gobgpd.pid\ncontrol:\n  socket: control.sock\nlog:\n  format: json\n  level: info\n", g.API),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctl := control.NewClient(filepath.Join(dir, "control.sock"), 20*time.Second)
	log := filepath.Join(dir, "aokeyd.log")
	t.Cleanup(func() {
		if t.Failed() {
			lab.Dump(t, "aokeyd.log (tail)", lab.Tail(log, 200000))
		}
	})
	lab.StartAokeyd(t, a, log, ctl, "-config", filepath.Join(dir, "aokeyd.yaml"), "-state-dir", filepath.Join(dir, "state"))

	// BIRD's password lines as aoctl peer-config renders them (one chain:
	// the same for every session).
	ai0, bi0 := addr32(0)
	render := func(migrate bool, at time.Time) string {
		args := []string{"peer-config", bi0.String(), "--for", "bird", "--config", filepath.Join(dir, "aokeyd.yaml"), "--local", ai0.String(),
			"--with-secrets", "--at", at.UTC().Format(time.RFC3339Nano)}
		if migrate {
			args = append(args, "--migrate")
		}
		out, err := exec.Command(lab.MustBin(t, "aoctl"), args...).Output()
		if err != nil {
			t.Fatalf("aoctl %v: %v", args, err)
		}
		return string(out)
	}
	cfg := bird.Config{RouterID: addrB.String(), LocalAS: asB, PeerAS: asA, Routes: routesB, HoldTime: 9}
	md5Auth := render(false, time.Now())
	for i := range sessions32 {
		ai, bi := addr32(i)
		cfg.Sessions = append(cfg.Sessions, bird.Session{Local: bi.String(), Neighbor: ai.String(), Auth: md5Auth})
	}
	br := bird.Start(t, b, cfg)

	up := func() (gobgp, birdUp int, birdSince map[string]string, uptimes map[netip.Addr]string) {
		birdSince, uptimes = map[string]string{}, map[netip.Addr]string{}
		if ps, err := g.Speaker.Peers(context.Background()); err == nil {
			for _, p := range ps {
				if p.Established() {
					gobgp++
					uptimes[p.Neighbor] = p.Uptime.String()
				}
			}
		}
		out, _ := br.Birdc("show", "protocols")
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) >= 7 && strings.HasPrefix(f[0], "s") && f[1] == "BGP" && strings.Contains(strings.Join(f[6:], " "), "Established") {
				birdUp++
				birdSince[f[0]] = f[4] + " " + f[5]
			}
		}
		return
	}
	lab.Eventually(t, 180*time.Second, "32 sessions up on TCP-MD5", func() (bool, string) {
		gu, bu, _, _ := up()
		return gu == sessions32 && bu == sessions32, fmt.Sprintf("gobgpd %d, BIRD %d established", gu, bu)
	})
	lisMD5 := func() int { return len(lab.ListenerMD5(t, g.PID, 179)) }
	if n := lisMD5(); n != sessions32 {
		t.Fatalf("gobgpd's listener holds %d TCP-MD5 keys, want %d (aokeyd's, from the key source)", n, sessions32)
	}

	// The watch: each session's establishments and longest time down on
	// both ends, and SYN probes from the peers' addresses.
	var mu sync.Mutex
	gobgpUps, birdUps := map[netip.Addr]map[string]bool{}, map[string][]string{}
	downSince, maxDown := map[string]time.Time{}, time.Duration(0)
	prober := (&lab.Prober{NS: b, Pair: func(n int) (netip.Addr, netip.Addr) { ai, bi := addr32(n % sessions32); return bi, ai }, Tick: func() {
		_, _, bs, us := up()
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for i := range sessions32 {
			_, bi := addr32(i)
			name := fmt.Sprintf("s%d", i)
			u, gok := us[bi]
			s, bok := bs[name]
			if gok {
				if gobgpUps[bi] == nil {
					gobgpUps[bi] = map[string]bool{}
				}
				gobgpUps[bi][u] = true
			}
			if bok {
				birdUps[name] = addSince(birdUps[name], s)
			}
			if gok && bok {
				if t0, ok := downSince[name]; ok {
					maxDown = max(maxDown, now.Sub(t0))
					delete(downSince, name)
				}
			} else if _, ok := downSince[name]; !ok {
				downSince[name] = now
			}
		}
	}}).Start()

	bound := 2 * time.Minute
	at := time.Now().Add(15 * time.Second)
	out, err := exec.Command(lab.MustBin(t, "aoctl"), "--socket", ctl.Socket(), "migrate", "--all", "--at", at.UTC().Format(time.RFC3339Nano),
		"--bound", bound.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("aoctl migrate --all: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "prepared"); n != sessions32 {
		t.Fatalf("aoctl migrate --all prepared %d migrations, want %d:\n%s", n, sessions32, out)
	}
	time.Sleep(time.Until(at))
	aoAuth := render(true, at)
	for i := range cfg.Sessions {
		cfg.Sessions[i].Auth = aoAuth
	}
	if err := br.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, bound, "every migration done, no TCP-MD5 key left", func() (bool, string) {
		rep, err := ctl.Status(context.Background(), "")
		if err != nil {
			return false, err.Error()
		}
		done := 0
		for _, p := range rep.Peers {
			if p.Migration != nil && p.Migration.Step == "done" {
				done++
			}
		}
		gu, bu, _, _ := up()
		n := lisMD5()
		return done == sessions32 && n == 0 && gu == sessions32 && bu == sessions32,
			fmt.Sprintf("%d done, %d TCP-MD5 keys on the listener, established: gobgpd %d BIRD %d", done, n, gu, bu)
	})
	time.Sleep(4 * time.Second) // keepalives on every session
	probes, taken := prober.Stop()
	aoGood := 0
	for i := range sessions32 {
		_, bi := addr32(i)
		conns, err := sockets.System{}.Connections(g.PID, bi)
		if err != nil || len(conns) != 1 {
			continue
		}
		_ = sockets.System{}.With(conns[0], func(fd int) error {
			if in, err := tcpao.FromFD(fd).Info(); err == nil && in.PktGood > 0 {
				aoGood++
			}
			return nil
		})
	}
	mu.Lock()
	defer mu.Unlock()
	reconnects, bad := 0, []string{}
	for i := range sessions32 {
		_, bi := addr32(i)
		name := fmt.Sprintf("s%d", i)
		gr, brr := len(gobgpUps[bi])-1, len(birdUps[name])-1
		reconnects = max(reconnects, gr, brr)
		if gr != 1 || brr != 1 {
			bad = append(bad, fmt.Sprintf("%s: gobgpd %d, BIRD %d", bi, gr, brr))
		}
	}
	md5Left := lisMD5()
	if len(bad) > 0 || aoGood != sessions32 || taken != 0 || maxDown >= bound || md5Left != 0 || probes < 200 {
		t.Fatalf("re-establishments not one each: %v; sessions on TCP-AO with pkt_good: %d of %d; probes taken %d of %d; longest down %s (bound %s); MD5 keys left %d",
			bad, aoGood, sessions32, taken, probes, maxDown, bound, md5Left)
	}
	t.Logf("%d sessions migrated: one re-establishment each, longest down %s (bound %s), %d SYN probes, none taken", sessions32, maxDown.Round(100*time.Millisecond), bound, probes)
	fmt.Printf("migrate: far=bird sessions=%d reconnects=%d md5_left=%d ao_good=1 unsigned_accepted=%d\n", sessions32, reconnects, md5Left, taken)
}
