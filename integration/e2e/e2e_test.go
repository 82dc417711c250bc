package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

func rounds(t *testing.T, def int) int {
	if s := os.Getenv("AOKEYD_E2E_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return def
}

// TestSessionUpWithAO is scenario 1: BIRD with a wrong key is refused (the
// kernel counts the bad segments on gobgpd's listener), then with the
// right key the session comes up with TCP-AO on both ends.
func TestSessionUpWithAO(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	k1 := key{i: 1, birdPreferred: true}
	wrong := key{i: 99, birdPreferred: true}
	l := newLab(t, []key{k1}, nil)
	// Reconfigure BIRD with a key of the same IDs but another secret.
	cfg := l.birdConfig([]key{k1})
	cfg.Keys[0].Secret = secretOf(wrong.i)
	if err := l.bird.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	_, _ = l.bird.Birdc("restart", "peer_a")
	time.Sleep(8 * time.Second)
	if p := l.peerA(); p.Established() {
		// The first session (right key) may have been up before the
		// reconfigure; it must be gone now that BIRD signs with another key.
		t.Logf("gobgpd still reports %s", p.State)
	}
	var bad uint64
	lab.Eventually(t, 20*time.Second, "listener refuses BIRD's wrongly signed SYNs", func() (bool, string) {
		bad = 0
		for _, k := range l.listenerKeys() {
			bad += k.PktBad
		}
		st, _ := l.bird.Protocol()
		return bad > 0 && st.BGPState != "Established", fmt.Sprintf("listener key pkt_bad=%d, BIRD %s", bad, st.BGPState)
	})
	t.Logf("wrong key refused: listener key pkt_bad=%d", bad)

	// The right key again: A's, as aoctl peer-config renders it.
	if err := l.bird.Configure(l.birdFromA()); err != nil {
		t.Fatal(err)
	}
	_, _ = l.bird.Birdc("restart", "peer_a")
	l.waitEstablished(60 * time.Second)
	st := l.status()
	if len(st.Keys) != 1 || !st.Keys[0].Current || !st.Keys[0].RNext || st.Keys[0].PktGood == 0 {
		t.Fatalf("aoctl status keys = %+v, want k1 current and rnext with pkt_good > 0", st.Keys)
	}
	bs, err := l.bird.Protocol()
	if err != nil {
		t.Fatal(err)
	}
	if bs.CurrentKey != int(k1.recvID()) || bs.PktGood == 0 {
		t.Fatalf("BIRD TCP-AO: current %d good %d, want current %d and good > 0", bs.CurrentKey, bs.PktGood, k1.recvID())
	}
	t.Logf("session up with TCP-AO: A current send=%d pkt_good=%d; BIRD current=%d good=%d bad=%d",
		st.Keys[0].SendID, st.Keys[0].PktGood, bs.CurrentKey, bs.PktGood, bs.PktBad)
}

// TestScheduledRotation is scenario 2: key rolls driven by the lifetimes in
// aokeyd's key source, 20 rounds in a row, while routes flow both ways. B is
// given each new key ahead of its send time the way a BIRD operator does
// (add, then preferred with the old one deprecated, then removed). BGP
// uptime never resets on either side, pkt_bad stays 0, and the old key is
// gone from both of A's sockets (established and listening) at the end of
// each round.
func TestScheduledRotation(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	scheduledRotation(t, labOptions{}, rounds(t, 20))
}

// TestScheduledRotationGoBGPv4 is TestScheduledRotation with gobgpd
// v4.8.0, whose API line aokeyd detects (speaker.api left to auto): ten
// rolls against BIRD. It prints "gobgpd-v4: rotations=N flaps=0 pkt_bad=0".
func TestScheduledRotationGoBGPv4(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	n := rounds(t, 10)
	scheduledRotation(t, labOptions{gobgpV4: true}, n)
	fmt.Printf("gobgpd-v4: rotations=%d flaps=0 pkt_bad=0\n", n)
}

// scheduledRotation rolls n times (roll checks each: no flap, pkt_bad 0
// on both ends, only the new key on A's sockets, routes both ways).
func scheduledRotation(t *testing.T, o labOptions, n int) {
	cur := key{i: 1, birdPreferred: true}
	l := newLabWith(t, []key{cur}, nil, o)
	s := l.waitEstablished(60 * time.Second)
	start := time.Now()
	for r := 1; r <= n; r++ {
		cur = l.roll(r, cur, s, nil)
	}
	t.Logf("rotation: rounds=%d flaps=0 pkt_bad=0 in %v", n, time.Since(start).Round(time.Second))
}

// The phases of one roll, for hooks that inject faults.
const (
	phaseInstall  = "install"  // the key source has the new key; aokeyd may not have acted yet
	phaseAnnounce = "announce" // A's session carries the new key and B sends with it
	phaseSwitch   = "switch"   // B prefers the new key; A's current follows
	phaseRetire   = "retire"   // A sends with the new key; the old one is on its way out
)

// roll performs round r from key cur to the next one, the way an operator's
// automation and a BIRD operator do it, and checks the result: only the new
// key on A's established and listening sockets, current on both ends,
// pkt_bad 0, no flap since s, routes both ways. hook (may be nil) runs at
// each phase. It returns the new key as BIRD now holds it.
func (l *testbed) roll(r int, cur key, s session, hook func(phase string)) key {
	t := l.t
	t.Helper()
	if hook == nil {
		hook = func(string) {}
	}
	next := key{i: cur.i + 1}
	// 1. The operator's automation gives B the next key first.
	if err := l.bird.Configure(l.birdConfig([]key{cur, next})); err != nil {
		t.Fatal(err)
	}
	// 2. The key source gets it: sendable now, the old key's lifetimes end
	//    shortly.
	now := time.Now()
	old := cur
	old.sendEnd, old.acceptEnd = now.Add(2*time.Second), now.Add(3*time.Second)
	next.sendStart, next.acceptStart = now.Add(-time.Second), now.Add(-time.Second)
	l.writeKeys([]key{old, next})
	hook(phaseInstall)
	// 3. aokeyd installs it and announces it with RNext; BIRD's kernel
	//    follows A's RNext.
	lab.Eventually(t, 40*time.Second, fmt.Sprintf("round %d: A's session carries k%d and B sends with it", r, next.i), func() (bool, string) {
		st, err := l.tryStatus()
		if err != nil {
			return false, err.Error()
		}
		bs, _ := l.bird.Protocol()
		has := slices.ContainsFunc(st.Keys, func(k control.Key) bool { return k.SendID == next.sendID() && k.PktGood > 0 })
		return has, fmt.Sprintf("A keys %v, BIRD current %d", lab.KeyList(st.Keys), bs.CurrentKey)
	})
	hook(phaseAnnounce)
	// 4. B prefers it and deprecates the old key, so B's RNext asks A to
	//    send with it.
	prefNext := next
	prefNext.birdPreferred = true
	depOld := cur
	depOld.birdPreferred, depOld.birdDeprecated = false, true
	if err := l.bird.Configure(l.birdConfig([]key{depOld, prefNext})); err != nil {
		t.Fatal(err)
	}
	hook(phaseSwitch)
	lab.Eventually(t, 40*time.Second, fmt.Sprintf("round %d: A sends with k%d", r, next.i), func() (bool, string) {
		st, err := l.tryStatus()
		if err != nil {
			return false, err.Error()
		}
		ok := slices.ContainsFunc(st.Keys, func(k control.Key) bool { return k.SendID == next.sendID() && k.Current })
		return ok, fmt.Sprintf("A keys %v (%s)", lab.KeyList(st.Keys), st.Rotation.State)
	})
	hook(phaseRetire)
	// 5. The roll completes: the old key is deleted from A's established
	//    and listening sockets.
	lab.Eventually(t, 40*time.Second, fmt.Sprintf("round %d: only k%d left on A, current on both sides", r, next.i), func() (bool, string) {
		st, err := l.tryStatus()
		if err != nil {
			return false, err.Error()
		}
		bs, _ := l.bird.Protocol()
		lk := l.notForeign(l.listenerKeys())
		st.Keys = slices.DeleteFunc(st.Keys, func(k control.Key) bool { return l.foreign[[2]uint8{k.SendID, k.RecvID}] })
		ok := len(st.Keys) == 1 && st.Keys[0].SendID == next.sendID() && st.Keys[0].Current &&
			bs.CurrentKey == int(next.recvID()) && len(lk) == 1 && lk[0].SendID == next.sendID()
		return ok, fmt.Sprintf("A keys %v (%s), listener %v, BIRD current %d rnext %d", lab.KeyList(st.Keys), st.Rotation.State, listenerIDs(lk), bs.CurrentKey, bs.RNextKey)
	})
	// 6. B drops the old key.
	if err := l.bird.Configure(l.birdConfig([]key{prefNext})); err != nil {
		t.Fatal(err)
	}
	l.keys = []key{next}
	st := l.status()
	bs, _ := l.bird.Protocol()
	if st.Counters.PktBad != 0 || bs.PktBad != 0 {
		t.Fatalf("round %d: pkt_bad A=%d B=%d, want 0", r, st.Counters.PktBad, bs.PktBad)
	}
	l.checkNoFlap(s, fmt.Sprintf("round %d", r))
	t.Logf("round %d: k%d -> k%d done, A pkt_good=%d bad=%d, B good=%d bad=%d", r, cur.i, next.i, st.Counters.PktGood, st.Counters.PktBad, bs.PktGood, bs.PktBad)
	return prefNext
}

// TestKillDuringRotation is scenario 5's first fault: aokeyd is SIGKILLed
// at each phase of a roll and restarted. It rebuilds its view from the
// kernel, no key in use is deleted, the roll completes and the session
// never drops.
func TestKillDuringRotation(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	cur := key{i: 1, birdPreferred: true}
	l := newLab(t, []key{cur}, nil)
	s := l.waitEstablished(60 * time.Second)
	for r, phase := range []string{phaseInstall, phaseAnnounce, phaseSwitch, phaseRetire} {
		cur = l.roll(r+1, cur, s, func(p string) {
			if p != phase {
				return
			}
			_ = l.aokeyd.Process.Kill()
			_, _ = l.aokeyd.Process.Wait()
			time.Sleep(time.Second) // keepalives flow while aokeyd is gone
			l.checkNoFlap(s, "aokeyd killed at "+phase)
			l.restartAokeyd()
			t.Logf("aokeyd SIGKILLed at %s and restarted", phase)
		})
	}
}

// TestSpeakerRestart is scenario 5's gobgpd fault: gobgpd restarts (its
// session necessarily drops); aokeyd finds the new process's listener, puts
// the keys back, and the session comes up again with TCP-AO.
func TestSpeakerRestart(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	cur := key{i: 1, birdPreferred: true}
	l := newLab(t, []key{cur}, nil)
	l.waitEstablished(60 * time.Second)
	l.restartGobgpd()
	s := l.waitEstablished(90 * time.Second)
	lab.Eventually(t, 30*time.Second, "aokeyd follows the new gobgpd's session", func() (bool, string) {
		st, err := l.tryStatus()
		if err != nil {
			return false, err.Error()
		}
		ok := len(st.Keys) == 1 && st.Keys[0].Current && st.Keys[0].PktGood > 0
		return ok, fmt.Sprintf("A keys %v, sockets %v, warnings %v", lab.KeyList(st.Keys), st.Sockets, st.Warnings)
	})
	l.roll(1, cur, s, nil)
}

// TestClockJump is scenario 5's clock fault: the wall clock jumps past the
// old key's send lifetime. aokeyd moves to the next key without deleting a
// key in use, and the session survives.
func TestClockJump(t *testing.T) {
	kerneltest.Require(t)
	// Not parallel: it moves the guest's wall clock, which every other
	// scenario's key lifetimes are read against. Go runs it before the
	// parallel ones.
	now := time.Now()
	k1 := key{i: 1, birdPreferred: true, sendEnd: now.Add(time.Hour), acceptEnd: now.Add(time.Hour + time.Minute)}
	k2 := key{i: 2, sendStart: now.Add(time.Hour), acceptStart: now.Add(-time.Minute)}
	l := newLab(t, []key{k1, k2}, nil)
	s := l.waitEstablished(60 * time.Second)
	jump := func(d time.Duration) {
		out, err := exec.Command("date", "-s", "@"+strconv.FormatInt(time.Now().Add(d).Unix(), 10)).CombinedOutput()
		if err != nil {
			t.Fatalf("date -s: %v: %s", err, out)
		}
	}
	jump(75 * time.Minute)
	defer jump(-75 * time.Minute)
	// BIRD shows when its session came up in wall-clock time, which moved
	// with the jump: take the new reading as the baseline (gobgpd's
	// uptime and flops still catch a real flap).
	if st, err := l.bird.Protocol(); err == nil {
		s.birdSince = st.Since
	}
	// B prefers k2 once its operator's clock says so too.
	k1b, k2b := k1, k2
	k1b.birdPreferred, k1b.birdDeprecated = false, true
	k2b.birdPreferred = true
	if err := l.bird.Configure(l.birdConfig([]key{k1b, k2b})); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 60*time.Second, "A sends with k2 and k1 is gone after the jump", func() (bool, string) {
		st := l.status()
		ok := len(st.Keys) == 1 && st.Keys[0].SendID == k2.sendID() && st.Keys[0].Current
		return ok, fmt.Sprintf("A keys %v (%s)", lab.KeyList(st.Keys), st.Rotation.State)
	})
	l.checkNoFlap(s, "after the clock jump")
}

// TestSoak is scenario 6: rotations back to back for AOKEYD_SOAK (default
// 1m in `make test`, where the chaos fleet rolls for a minute beside
// it; `make soak` runs 10m). It ends with one line
// "soak: rotations=N flaps=N pkt_bad=N" and fails on any flap.
func TestSoak(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	d := time.Minute
	if v := os.Getenv("AOKEYD_SOAK"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	cur := key{i: 1, birdPreferred: true}
	l := newLab(t, []key{cur}, nil)
	s := l.waitEstablished(60 * time.Second)
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		n++
		cur = l.roll(n, cur, s, nil)
	}
	st := l.status()
	bs, _ := l.bird.Protocol()
	fmt.Printf("soak: rotations=%d flaps=%d pkt_bad=%d\n", n, l.peerA().Flops-s.flops, st.Counters.PktBad+bs.PktBad)
}

// TestVaultRotation runs router A with its keys in Vault (the
// Vault-compatible server of keystore/vaulttest): rotation rounds driven by
// the lifetimes written there, and scenario 5's Vault fault: Vault stops in
// the middle of a roll (after the new key was read) and comes back later.
// The roll completes on the last good snapshot, nothing is deleted because
// Vault is down, status says the source is failing, and the next round
// reads Vault again.
func TestVaultRotation(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	cur := key{i: 1, birdPreferred: true}
	l := newLabVault(t, []key{cur}, nil)
	s := l.waitEstablished(60 * time.Second)
	for r := 1; r <= 4; r++ {
		var hook func(string)
		if r == 2 {
			hook = func(phase string) {
				if phase != phaseAnnounce {
					return
				}
				l.vault.Stop()
				t.Logf("round %d: Vault stopped after aokeyd read the new key", r)
			}
		}
		cur = l.roll(r, cur, s, hook)
		if r == 2 {
			// The roll ran on the last good snapshot; the read that finds
			// Vault down ends after the Vault client's own retries.
			var rep control.StatusReport
			err := lab.Poll{What: "a key source error in status while Vault is down", Timeout: 15 * time.Second}.Wait(context.Background(), func() (bool, string, error) {
				var err error
				rep, err = l.ctl.Status(context.Background(), "")
				return err == nil && rep.KeySource.LastError != "", fmt.Sprintf("%+v", rep.KeySource), err
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("while Vault is down: key source %q, last error %q; the roll completed on the last good snapshot", rep.KeySource.Name, rep.KeySource.LastError)
			if err := l.vault.Start(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestReloadAndMetrics covers the daemon's operations side on the real
// kernel: Prometheus metrics show the session's key and the kernel's
// counters (never a key byte), aokeyd's default set only (the per-key
// series need metrics.per_key); a SIGHUP with a broken policy is refused
// and the running one keeps working; a SIGHUP with a good one is applied.
func TestReloadAndMetrics(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	l := newLab(t, []key{{i: 1, birdPreferred: true}}, nil)
	s := l.waitEstablished(60 * time.Second)
	var page string
	lab.Eventually(t, 20*time.Second, "metrics with the session's socket counters", func() (bool, string) {
		out, err := l.a.Run("wget", "-qO-", "http://127.0.0.1:9179/metrics")
		page = out
		return err == nil && strings.Contains(out, "aokeyd_socket_pkt_bad_total") && strings.Contains(out, "aokeyd_peer_current_key_id"), fmt.Sprint(err)
	})
	for _, want := range []string{`aokeyd_peer_current_key_id{peer="10.255.0.2",vrf=""} 1`, "aokeyd_socket_pkt_key_not_found_total", "aokeyd_key_source_last_sync_timestamp_seconds"} {
		if !strings.Contains(page, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	for _, name := range metrics.PerKeyFamilies() {
		if strings.Contains(page, name+"{") {
			t.Errorf("metrics hold %s without metrics.per_key", name)
		}
	}
	if strings.Contains(page, hex.EncodeToString(secretOf(1))) {
		t.Fatal("metrics contain key bytes")
	}
	policyPath := filepath.Join(l.dir, "policy.yaml")
	good, err := os.ReadFile(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	logHas := func(msg string) func() (bool, string) {
		return func() (bool, string) {
			b, _ := os.ReadFile(filepath.Join(l.dir, "aokeyd.log"))
			return strings.Contains(string(b), msg), "not yet"
		}
	}
	if err := os.WriteFile(policyPath, append(slices.Clone(good), []byte("no_such_field: 1\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.aokeyd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 20*time.Second, "the broken reload to be refused", logHas("reload refused"))
	st := l.status()
	if len(st.Keys) != 1 || !st.Keys[0].Current {
		t.Fatalf("after a refused reload A keys %v", lab.KeyList(st.Keys))
	}
	if err := os.WriteFile(policyPath, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.aokeyd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 20*time.Second, "the good reload to be applied", logHas(`"msg":"reloaded"`))
	l.checkNoFlap(s, "after the reloads")
}

// TestLaggingPeer is scenario 3: B does not have the new key yet. aokeyd
// announces it but does not switch, the session stays up and status says
// why; once B gets the key the roll completes.
func TestLaggingPeer(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	k1 := key{i: 1, birdPreferred: true}
	l := newLab(t, []key{k1}, nil)
	s := l.waitEstablished(60 * time.Second)
	now := time.Now()
	old := k1
	old.sendEnd, old.acceptEnd = now.Add(2*time.Second), now.Add(time.Hour)
	k2 := key{i: 2, sendStart: now.Add(-time.Second), acceptStart: now.Add(-time.Second)}
	l.writeKeys([]key{old, k2})
	// B never hears of k2: aokeyd must keep sending with k1.
	lab.Eventually(t, 40*time.Second, "status explains that B does not send with k2", func() (bool, string) {
		st := l.status()
		return st.Rotation.LastAbortReason != "", fmt.Sprintf("rotation %+v", st.Rotation)
	})
	st := l.status()
	for _, k := range st.Keys {
		if k.SendID == k1.sendID() && !k.Current {
			t.Fatalf("aokeyd switched away from k1 although B cannot verify k2: %+v", st.Keys)
		}
	}
	t.Logf("B lags: status says %q", st.Rotation.LastAbort)
	l.checkNoFlap(s, "while B lags")
	// B gets the key (preferred): the roll completes.
	k2b := k2
	k2b.birdPreferred = true
	if err := l.bird.Configure(l.birdConfig([]key{k1, k2b})); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 60*time.Second, "roll to k2 completes once B has it", func() (bool, string) {
		st := l.status()
		ok := slices.ContainsFunc(st.Keys, func(k control.Key) bool { return k.SendID == k2.sendID() && k.Current && k.PktGood > 0 })
		return ok, fmt.Sprintf("A keys %v (%s)", lab.KeyList(st.Keys), st.Rotation.State)
	})
	l.checkNoFlap(s, "after B caught up")
}

// TestRevoke is scenario 4: revoking the current key with a backup present
// is hitless (one forced delete names the backup); revoking the only key
// resets the session through GoBGP, and it comes back once both sides have
// a new key.
func TestRevoke(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	revokeScenario(t, labOptions{})
}

// TestRevokeGoBGPv4 is TestRevoke with gobgpd v4.8.0, its API line named
// in aokeyd's config (speaker.api: v4).
func TestRevokeGoBGPv4(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	revokeScenario(t, labOptions{gobgpV4: true, speakerAPI: "v4"})
}

func revokeScenario(t *testing.T, o labOptions) {
	// k1 is the key both sides send with (the later send start wins on A,
	// preferred on B); k2 is a sendable backup.
	now := time.Now()
	k1 := key{i: 1, birdPreferred: true, sendStart: now.Add(-time.Minute), acceptStart: now.Add(-time.Hour)}
	k2 := key{i: 2, sendStart: now.Add(-time.Hour), acceptStart: now.Add(-time.Hour)}
	l := newLabWith(t, []key{k1, k2}, nil, o)
	s := l.waitEstablished(60 * time.Second)
	lab.Eventually(t, 20*time.Second, "both keys on A's session, k1 current", func() (bool, string) {
		st := l.status()
		ok := len(st.Keys) == 2 && slices.ContainsFunc(st.Keys, func(k control.Key) bool { return k.SendID == k1.sendID() && k.Current })
		return ok, fmt.Sprint(lab.KeyList(st.Keys))
	})
	// The operator's command, as run at 3 a.m.
	out, err := exec.Command(lab.MustBin(t, "aoctl"), "--socket", l.ctl.Socket(), "--json", "revoke", "core/k1").Output()
	if err != nil {
		t.Fatalf("aoctl revoke core/k1: %v: %s", err, out)
	}
	var res control.RevokeResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("aoctl revoke --json: %v: %s", err, out)
	}
	t.Logf("aoctl revoke core/k1 in %v: %+v (source revoked: %v)", time.Duration(res.Elapsed), res.Sockets, res.SourceRevoked)
	if !slices.ContainsFunc(res.Sockets, func(s control.RevokeSocket) bool { return s.Action == control.ActionForcedReplaced && s.Error == "" }) {
		t.Fatalf("revoke of the current key with a backup: %+v, want a forced replace", res.Sockets)
	}
	st := l.status()
	if len(st.Keys) != 1 || st.Keys[0].SendID != k2.sendID() || !st.Keys[0].Current {
		t.Fatalf("after revoke A keys %v, want only k2, current", lab.KeyList(st.Keys))
	}
	if slices.ContainsFunc(l.listenerKeys(), func(k tcpao.KeyInfo) bool { return k.SendID == k1.sendID() }) {
		t.Fatal("revoked k1 still on gobgpd's listener")
	}
	time.Sleep(3 * time.Second) // keepalives flow, signed with k2
	l.checkNoFlap(s, "after revoking the current key with a backup")
	if out, err := exec.Command(lab.MustBin(t, "aoctl"), "--socket", l.ctl.Socket(), "status", addrB.String()).CombinedOutput(); err != nil {
		t.Fatalf("aoctl status: %v: %s", err, out)
	} else {
		t.Logf("aoctl status after the revoke:\n%s", out)
		// The guest kernel's probe at aokeyd's start: every algorithm.
		if !strings.Contains(string(out), "TCP-AO algorithms hmac(sha1) hmac(sha256) cmac(aes128)\n") {
			t.Errorf("aoctl status does not show the kernel accepting every algorithm:\n%s", out)
		}
	}
	if bs, _ := l.bird.Protocol(); bs.CurrentKey != int(k2.recvID()) {
		t.Fatalf("BIRD current key %d, want k2's %d", bs.CurrentKey, k2.recvID())
	}
	// k2 is now the only key: revoking it resets the session.
	res, err = l.ctl.Revoke(context.Background(), control.RevokeRequest{Chain: "core", Key: "k2"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("revoke k2 (only key) in %v: %+v", time.Duration(res.Elapsed), res.Sockets)
	if !slices.ContainsFunc(res.Sockets, func(s control.RevokeSocket) bool { return s.Action == control.ActionReset }) {
		t.Fatalf("revoke of the only key: %+v, want a session reset", res.Sockets)
	}
	lab.Eventually(t, 20*time.Second, "session reset after revoking the only key", func() (bool, string) {
		p := l.peerA()
		return !p.Established() || p.Flops > s.flops, p.State.String()
	})
	// Both sides get a new key: the session comes back.
	k3 := key{i: 3, birdPreferred: true}
	l.writeKeys([]key{k3})
	if err := l.bird.Configure(l.birdConfig([]key{k3})); err != nil {
		t.Fatal(err)
	}
	l.waitEstablished(90 * time.Second)
	st = l.status()
	if len(st.Keys) != 1 || st.Keys[0].SendID != k3.sendID() {
		t.Fatalf("after re-keying A keys %v, want only k3", lab.KeyList(st.Keys))
	}
}

func listenerIDs(ks []tcpao.KeyInfo) string {
	var s []string
	for _, k := range ks {
		s = append(s, fmt.Sprintf("%d/%d", k.SendID, k.RecvID))
	}
	return "[" + strings.Join(s, " ") + "]"
}
