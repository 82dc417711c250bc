package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
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

// runMigrateBIRD (issue 34; issue 52 item 4): one router, gobgpd+aokeyd
// with ly.n TCP-MD5 sessions to BIRD 2.17, moves them all with `aoctl
// migrate --all`: one re-establishment each, no session down for longer
// than the bound, no MD5 key left on gobgpd's listener, every session on
// TCP-AO with verified segments, and no unsigned or wrongly signed SYN
// from a peer's address taken (sampled every 100 ms). It prints
// "migrate: far=bird sessions=N reconnects=R md5_left=0 ao_good=1
// unsigned_accepted=0".
func runMigrateBIRD(t *testing.T, ly migrateLayout) {
	kerneltest.Require(t)
	dir := t.TempDir()
	a, b := lab.Pair(t, netip.PrefixFrom(addrA, 30), netip.PrefixFrom(addrB, 30))
	var neighbors []lab.Neighbor
	var bindings, chains, addrsA, addrsB strings.Builder
	addedA := map[netip.Addr]bool{}
	for i := range ly.n {
		ai, bi := ly.addr(i)
		if !addedA[ai] {
			addedA[ai] = true
			fmt.Fprintf(&addrsA, "addr add %s/%d dev veth-a\n", ai, ly.bits)
		}
		fmt.Fprintf(&addrsB, "addr add %s/%d dev veth-b\n", bi, ly.bits)
		neighbors = append(neighbors, lab.Neighbor{Addr: bi, AS: asB, Passive: true})
		fmt.Fprintf(&bindings, "  - neighbor: %s\n    key_chain: %s\n", bi, ly.chain(i))
	}
	a.MustBatch(t, addrsA.String()) // one exec a side, not one an address
	b.MustBatch(t, addrsB.String())
	g := lab.StartGobgpd(t, a, "gobgpd", lab.GobgpdConfig{AS: asA, RouterID: addrA, Neighbors: neighbors, HoldTime: ly.hold, Keepalive: ly.hold / 3},
		lab.GobgpdOptions{Dir: dir})
	if ly.ownChains {
		// A chain per member, its password and key its own, the key's
		// IDs no other member's.
		for i := range ly.n {
			_, bi := ly.addr(i)
			id := uint8(i + 1) // 1 to 200
			fmt.Fprintf(&chains, "  %s:\n    peers: [%s/32]\n    md5: {secret_b64: %q}\n    keys:\n"+
				"      - {name: m%d, send_id: %d, recv_id: %d, algorithm: hmac(sha256), secret_hex: %q}\n",
				ly.chain(i), bi, base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("%s-%d", labMD5, i))), i, id, id, hex.EncodeToString(secretOf(500+i)))
		}
	} else {
		k1, md5b64 := key{i: 1}, base64.StdEncoding.EncodeToString([]byte(labMD5))
		fmt.Fprintf(&chains, "  core:\n    peers: [%s]\n    md5: {secret_b64: %q}\n    keys:\n      - {name: %s, send_id: %d, recv_id: %d, algorithm: %s, secret_hex: %q}\n",
			ly.peers, md5b64, k1.name(), k1.sendID(), k1.recvID(), k1.algorithm(), hex.EncodeToString(k1.secretA()))
	}
	var chainNames strings.Builder
	seen := map[string]bool{}
	for i := range ly.n {
		if c := ly.chain(i); !seen[c] {
			seen[c] = true
			fmt.Fprintf(&chainNames, "  - name: %s\n", c)
		}
	}
	files := map[string]string{
		"keys.yaml":   "chains:\n" + chains.String(),
		"policy.yaml": "version: 1\nkey_chains:\n" + chainNames.String() + "safety:\n  switch_timeout: 15s\npeers:\n" + bindings.String(),
		"aokeyd.yaml": fmt.Sprintf("key_source:\n  type: file\n  refresh: 1s\n  file:\n    path: keys.yaml\npolicy:\n  path: policy.yaml\n"+
			"gobgp:\n  address: %q\n  pid_file: gobgpd.pid\ncontrol:\n  socket: control.sock\nlog:\n  format: json\n  level: info\n"+
			"kernel:\n  raise_optmem: %t\n", g.API, ly.ownChains),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctl := control.NewClient(filepath.Join(dir, "control.sock"), 20*time.Second)
	aoctl := lab.MustBin(t, "aoctl")
	log := filepath.Join(dir, "aokeyd.log")
	t.Cleanup(func() {
		if t.Failed() {
			lab.Dump(t, "aokeyd.log (tail)", lab.Tail(log, 200000))
		}
	})
	lab.StartAokeyd(t, a, log, ctl, "-config", filepath.Join(dir, "aokeyd.yaml"), "-state-dir", filepath.Join(dir, "state"))

	// BIRD's password lines as aoctl peer-config renders them, one a
	// session (one chain: the same for every session, rendered once; a
	// chain per member: each its own, four aoctl at a time).
	render := func(migrate bool, at time.Time) []string {
		auths := make([]string, ly.n)
		errs := make([]error, ly.n)
		one := func(i int) {
			ai, bi := ly.addr(i)
			args := []string{"peer-config", bi.String(), "--for", "bird", "--config", filepath.Join(dir, "aokeyd.yaml"), "--local", ai.String(),
				"--with-secrets", "--at", at.UTC().Format(time.RFC3339Nano)}
			if migrate {
				args = append(args, "--migrate")
			}
			out, err := exec.Command(aoctl, args...).Output()
			auths[i], errs[i] = string(out), err
			if err != nil {
				errs[i] = fmt.Errorf("aoctl %v: %w", args, err)
			}
		}
		if !ly.ownChains {
			one(0)
			for i := range auths {
				auths[i], errs[i] = auths[0], errs[0]
			}
		} else {
			var wg sync.WaitGroup
			sem := make(chan struct{}, 4)
			for i := range ly.n {
				wg.Add(1)
				sem <- struct{}{}
				go func() { defer wg.Done(); defer func() { <-sem }(); one(i) }()
			}
			wg.Wait()
		}
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		return auths
	}
	cfg := bird.Config{RouterID: addrB.String(), LocalAS: asB, PeerAS: asA, Routes: routesB, HoldTime: ly.hold}
	for i, auth := range render(false, time.Now()) {
		ai, bi := ly.addr(i)
		cfg.Sessions = append(cfg.Sessions, bird.Session{Local: bi.String(), Neighbor: ai.String(), Auth: auth})
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
	lab.Eventually(t, ly.upWithin, fmt.Sprintf("%d sessions up on TCP-MD5", ly.n), func() (bool, string) {
		gu, bu, _, _ := up()
		return gu == ly.n && bu == ly.n, fmt.Sprintf("gobgpd %d, BIRD %d established", gu, bu)
	})
	lisMD5 := func() int { return len(lab.ListenerMD5(t, g.PID, 179)) }
	if n := lisMD5(); n != ly.n {
		t.Fatalf("gobgpd's listener holds %d TCP-MD5 keys, want %d (aokeyd's, from the key source)", n, ly.n)
	}

	// The watch: each session's establishments and longest time down on
	// both ends, and SYN probes from the peers' addresses.
	var mu sync.Mutex
	gobgpUps, birdUps := map[netip.Addr]map[string]bool{}, map[string][]string{}
	downSince, maxDown := map[string]time.Time{}, time.Duration(0)
	prober := (&lab.Prober{NS: b, Pair: func(n int) (netip.Addr, netip.Addr) { ai, bi := ly.addr(n % ly.n); return bi, ai }, Tick: func() {
		_, _, bs, us := up()
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for i := range ly.n {
			_, bi := ly.addr(i)
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

	bound := ly.bound
	at := time.Now().Add(15 * time.Second)
	out, err := exec.Command(lab.MustBin(t, "aoctl"), "--socket", ctl.Socket(), "migrate", "--all", "--at", at.UTC().Format(time.RFC3339Nano),
		"--bound", bound.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("aoctl migrate --all: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "prepared"); n != ly.n {
		t.Fatalf("aoctl migrate --all prepared %d migrations, want %d:\n%s", n, ly.n, out)
	}
	for i, auth := range render(true, at) { // before the switch time: the far end's change is ready at it
		cfg.Sessions[i].Auth = auth
	}
	time.Sleep(time.Until(at))
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
		return done == ly.n && n == 0 && gu == ly.n && bu == ly.n,
			fmt.Sprintf("%d done, %d TCP-MD5 keys on the listener, established: gobgpd %d BIRD %d", done, n, gu, bu)
	})
	time.Sleep(4 * time.Second) // keepalives on every session
	probes, taken := prober.Stop()
	aoGood := 0
	for i := range ly.n {
		_, bi := ly.addr(i)
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
	for i := range ly.n {
		_, bi := ly.addr(i)
		name := fmt.Sprintf("s%d", i)
		gr, brr := len(gobgpUps[bi])-1, len(birdUps[name])-1
		reconnects = max(reconnects, gr, brr)
		if gr != 1 || brr != 1 {
			bad = append(bad, fmt.Sprintf("%s: gobgpd %d, BIRD %d", bi, gr, brr))
		}
	}
	md5Left := lisMD5()
	if len(bad) > 0 || aoGood != ly.n || taken != 0 || maxDown >= bound || md5Left != 0 || probes < 200 {
		t.Fatalf("re-establishments not one each: %v; sessions on TCP-AO with pkt_good: %d of %d; probes taken %d of %d; longest down %s (bound %s); MD5 keys left %d",
			bad, aoGood, ly.n, taken, probes, maxDown, bound, md5Left)
	}
	t.Logf("%d sessions migrated: one re-establishment each, longest down %s (bound %s), %d SYN probes, none taken", ly.n, maxDown.Round(100*time.Millisecond), bound, probes)
	fmt.Printf("migrate: far=bird sessions=%d reconnects=%d md5_left=%d ao_good=1 unsigned_accepted=%d\n", ly.n, reconnects, md5Left, taken)
}
