package frr

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	bgpfrr "github.com/aokeyd/aokeyd/bgp/frr"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// parentExe is the executable of pid's parent.
func parentExe(pid int) string {
	p, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", ppid(pid)))
	if err != nil {
		return err.Error()
	}
	return p
}

// sessionSocket reads the keys and the counters of pid's connection to
// neighbor straight from the kernel (a pidfd_getfd duplicate).
func sessionSocket(pid int, neighbor netip.Addr) ([]tcpao.KeyInfo, tcpao.Info, error) {
	refs, err := sockets.System{}.Connections(pid, neighbor)
	if err != nil {
		return nil, tcpao.Info{}, err
	}
	if len(refs) != 1 {
		return nil, tcpao.Info{}, fmt.Errorf("%d connections of pid %d to %s, want 1", len(refs), pid, neighbor)
	}
	var ks []tcpao.KeyInfo
	var info tcpao.Info
	err = sockets.System{}.With(refs[0], func(fd int) error {
		var err error
		if ks, err = tcpao.FromFD(fd).Keys(tcpao.KeyFilter{}); err != nil {
			return err
		}
		info, err = tcpao.FromFD(fd).Info()
		return err
	})
	return ks, info, err
}

// TestFRRWatchfrr: FRR supervised by its own watchfrr, with the bgpd_wrap
// line docs/speakers.md documents. frrinit.sh starts watchfrr for a pathspace;
// watchfrr starts bgpd through docs/frr-bgpd-wrap.sh under `aokeyd exec`,
// and bgpd opens the session to BIRD (passive) with TCP-AO. bgpd is killed
// with SIGKILL (a crash); watchfrr restarts it through the same wrapper;
// aokeyd (speaker.frr.pathspace, pid file found by default) takes the new
// process's listener and connect over, and the session comes back with
// TCP-AO: the key is read from the kernel on the new listener and the new
// session, whose pkt_bad is 0.
func TestFRRWatchfrr(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	lab.RequireNetns(t)
	na, nb := lab.Pair(t, netip.PrefixFrom(addrA, 30), netip.PrefixFrom(addrB, 30))
	dir := t.TempDir()
	pathspace := fmt.Sprintf("aokeyd%d", os.Getpid())
	k1 := key{i: 1, birdPreferred: true}
	writeKeys(t, dir, addrB, []key{k1}, false)
	cg := filepath.Join(dir, "cg.sock")
	// aokeyd first: under `aokeyd exec` bgpd's first connect() waits for
	// aokeyd's connect supervisor.
	a := startAokeyd(t, na, dir, addrB, fmt.Sprintf("speaker:\n  type: frr\n  frr:\n    pathspace: %q\n    poll_interval: 250ms\n", pathspace), cg)
	r := StartWatchfrr(t, na, dir, pathspace, frrConfig(false), cg)
	r.WaitUp(t)
	l := &birdLab{t: t, dir: dir, frr: r, aokeyd: a, bird: bird.Start(t, nb, birdConfig([]key{k1}, true)), active: true}
	l.waitEstablished(90 * time.Second)
	check := func(when string, pid int) {
		t.Helper()
		if exe := parentExe(pid); filepath.Base(exe) != "aokeyd" {
			t.Fatalf("%s: bgpd (pid %d) runs under %s, want `aokeyd exec` (bgpd_wrap)", when, pid, exe)
		}
		lab.Eventually(t, 20*time.Second, when+": k1 on bgpd's listener and session, in the kernel", func() (bool, string) {
			lk := listenerKeys(t, pid)
			sk, info, err := sessionSocket(pid, addrB)
			ok := err == nil && len(lk) == 1 && lk[0].SendID == k1.sendID() && len(sk) == 1 && sk[0].SendID == k1.sendID() &&
				sk[0].PktGood > 0 && info.PktGood > 0
			return ok, fmt.Sprintf("listener %d keys, session keys %d (%v) pkt_good %d pkt_bad %d", len(lk), len(sk), err, info.PktGood, info.PktBad)
		})
	}
	check("started by watchfrr", r.PID)
	oldPID := r.PID
	out, err := WatchfrrShow(filepath.Join(frrRunDir, pathspace))
	if err != nil {
		t.Fatalf("show watchfrr: %v", err)
	}
	t.Logf("show watchfrr before the crash:\n%s", strings.TrimSpace(out))

	killed := time.Now()
	if err := unix.Kill(oldPID, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var launched, restarted time.Duration
	lab.Eventually(t, lab.ProcessStart, "watchfrr starts a new bgpd through bgpd_wrap (its pid file)", func() (bool, string) {
		pid, err := bgpfrr.FindPID(r.PIDFile(), "")
		if err != nil || pid == oldPID {
			return false, fmt.Sprintf("pid %d %v", pid, err)
		}
		r.PID, launched = pid, time.Since(killed)
		return true, ""
	})
	lab.Eventually(t, lab.ProcessStart, "the new bgpd's vty", func() (bool, string) {
		_, err := r.Vtysh("show bgp vrf all summary json")
		restarted = time.Since(killed)
		return err == nil, fmt.Sprint(err)
	})
	// bgpd's own view, read every 20ms: the instant FRR is Established, to
	// measure aokeyd's reaction (speaker.frr.poll_interval 250ms).
	var up time.Time
	lab.Eventually(t, 90*time.Second, "FRR's new session established", func() (bool, string) {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if p, err := r.Peer(addrB); err == nil && p.Established() {
				up = time.Now()
				return true, ""
			}
		}
		p, err := r.Peer(addrB)
		return false, fmt.Sprintf("%s %v", p.State, err)
	})
	s := l.waitEstablished(90 * time.Second)
	back := up.Sub(killed)
	check("restarted by watchfrr", r.PID)
	keyed := time.Since(killed)
	if !s.uptime.After(killed.Add(-time.Second)) {
		t.Fatalf("session uptime %v is older than the crash at %v", s.uptime, killed)
	}
	out, err = WatchfrrShow(filepath.Join(frrRunDir, pathspace))
	if err != nil {
		t.Fatalf("show watchfrr: %v", err)
	}
	t.Logf("show watchfrr after the restart:\n%s", strings.TrimSpace(out))
	time.Sleep(3 * time.Second) // keepalives flow on the new session
	l.checkNoFlap(s, "after the restart")
	_, info, err := sessionSocket(r.PID, addrB)
	if err != nil {
		t.Fatal(err)
	}
	if info.PktBad != 0 {
		t.Fatalf("new session pkt_bad %d, want 0", info.PktBad)
	}
	t.Logf("bgpd pid %d killed; watchfrr's new bgpd pid %d (under %s) wrote its pid file after %v, its vty answered after %v, session established after %v, keys read from the kernel after %v (FRR %s, poll_interval 250ms)",
		oldPID, r.PID, parentExe(r.PID), launched.Round(time.Millisecond), restarted.Round(time.Millisecond), back.Round(time.Millisecond), keyed.Round(time.Millisecond), Version())
	// One start and one restart: a wrapper that returned before bgpd was up
	// made watchfrr restart the starting bgpd again (three launches).
	execLog := lab.Tail(filepath.Join(frrRunDir, pathspace, "aokeyd-exec.log"), 1<<20)
	if n := strings.Count(execLog, `msg="launched under connect() supervision"`); n != 2 {
		t.Errorf("bgpd launched %d times under aokeyd exec, want 2 (watchfrr's start and one restart)", n)
	}
	if seen, err := logTime(filepath.Join(dir, "aokeyd.log"), "session established", killed); err != nil {
		t.Errorf("aokeyd's log: %v", err)
	} else {
		t.Logf("session event latency: aokeyd logged the new session %v after bgpd's vty first showed it Established (polled every 20ms)",
			seen.Sub(up).Round(time.Millisecond))
	}
	t.Logf("aokeyd exec (bgpd_wrap) log:\n%s", lab.Tail(filepath.Join(frrRunDir, pathspace, "aokeyd-exec.log"), 1500))
	frrLine(t, "bird", "active", 0, int(l.peer().Flops-s.flops), info.PktBad)
}

// logTime is the time of the first line of aokeyd's JSON log after since
// whose message is msg.
func logTime(path, msg string, since time.Time) (time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		var e struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Msg == msg && e.Time.After(since) {
			return e.Time, nil
		}
	}
	return time.Time{}, fmt.Errorf("no %q after %v", msg, since.Format(time.RFC3339Nano))
}
