package frr

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	bgpfrr "github.com/aokeyd/aokeyd/bgp/frr"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/kerneltest"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/integration/netns"
	"github.com/aokeyd/aokeyd/tcpao"
)

// FRR's own scripts in the guest root (Debian's frr package).
const (
	frrInit     = "/usr/lib/frr/frrinit.sh"
	frrWatchfrr = "/usr/lib/frr/watchfrr"
	frrRunDir   = "/run/frr"
)

// daemonsFile is /etc/frr/PATHSPACE/daemons as an operator writes it for
// an AO-managed bgpd: Debian's options, bgpd enabled, and the bgpd_wrap
// line of the README. watchfrr's --min-restart-interval (default 60s,
// counted from the daemon's start) is 1s, so that a crash a few seconds
// after the start is repaired at once, as it is on a router that has run
// for a minute.
const daemonsFile = `# written by integration/frr TestFRRWatchfrr
bgpd=yes
zebra_options="  -A 127.0.0.1 -s 90000000"
mgmtd_options="  -A 127.0.0.1"
bgpd_options="   -A 127.0.0.1"
staticd_options="-A 127.0.0.1"
bgpd_wrap=%q
watchfrr_options="--min-restart-interval 1"
`

// watchfrrRouter starts FRR the way the init system does — `frrinit.sh
// start PATHSPACE`, which starts watchfrr, which starts zebra, mgmtd,
// staticd and bgpd (through bgpd_wrap: docs/frr-bgpd-wrap.sh under `aokeyd
// exec` on socket cg) — inside ns. FRR's configuration directory is the
// test's own: /etc/frr is bind-mounted over from dir in the mount
// namespace `ip netns exec` makes, which watchfrr and every daemon it
// (re)starts inherit; the guest's /etc/frr is not touched. The run
// directory is FRR's, /run/frr/PATHSPACE (a tmpfs in the guest), owned by
// FRR's user as frrinit.sh makes it. Everything is killed when the test
// ends.
func watchfrrRouter(t *testing.T, ns *netns.NS, dir, pathspace string, cfg Config, cg string) *Router {
	t.Helper()
	for _, p := range []string{frrInit, frrWatchfrr, BgpdPath} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("FRR in the guest root: %v", err)
		}
	}
	wrap, err := filepath.Abs(wrapScript)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(wrap); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("bgpd_wrap %s must be an executable file (FRR runs it as a command): %v", wrap, err)
	}
	fu, err := user.Lookup("frr")
	if err != nil {
		t.Fatalf("FRR's user: %v", err)
	}
	uid, _ := strconv.Atoi(fu.Uid)
	gid, _ := strconv.Atoi(fu.Gid)
	run := filepath.Join(frrRunDir, pathspace)
	_ = os.RemoveAll(run) // a leftover of a killed run
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(run, uid, gid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopPathspace(t, run) })

	// bgpd.conf (with `log file` in the run directory, writable by FRR's
	// user) is linked from the pathspace's configuration directory.
	r := &Router{t: t, ns: ns, Dir: run, cfg: cfg}
	if err := r.write(); err != nil {
		t.Fatal(err)
	}
	etc := filepath.Join(dir, "etc-frr")
	for _, d := range []string{etc, filepath.Join(etc, pathspace)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil { // FRR's user reads it
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(run, "bgpd.conf"), filepath.Join(etc, pathspace, "bgpd.conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, pathspace, "daemons"), fmt.Appendf(nil, daemonsFile, wrap), 0o644); err != nil {
		t.Fatal(err)
	}
	r.Speaker = bgpfrr.New(bgpfrr.Options{
		Name:   "frr-a",
		Runner: bgpfrr.VtySocketIn("", pathspace),
		PID:    func(context.Context) (int, error) { return bgpfrr.FindPID(r.PIDFile(), "") },
	})

	logPath := filepath.Join(dir, "frrinit.log")
	log := lab.LogFile(t, logPath)
	cmd := ns.Command("sh", "-c", `mount --bind "$1" /etc/frr && exec "$2" start "$3"`, "frrinit", etc, frrInit, pathspace)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "AOKEYD="+lab.MustBin(t, "aokeyd"), "AOKEYD_CONNECTGUARD="+cg,
		"AOKEYD_WRAP_LOG="+filepath.Join(run, "aokeyd-exec.log"))
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s start %s: %v\n%s", frrInit, pathspace, err, lab.Tail(logPath, 2000))
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, err := watchfrrShow(run)
			t.Logf("frrinit.sh:\n%s\nshow watchfrr: %v\n%s\nbgpd logs:\n%s", lab.Tail(logPath, 2000), err, out, r.LogTail())
		}
	})
	return r
}

// waitUp waits for bgpd's pid file and its vty (Router.WaitReady asks for
// the default VRF's summary, which fails with a VRF instance only).
func waitUp(t *testing.T, r *Router) {
	t.Helper()
	lab.Eventually(t, 60*time.Second, "bgpd's pid file and vty", func() (bool, string) {
		pid, err := bgpfrr.FindPID(r.PIDFile(), "")
		if err != nil {
			return false, err.Error()
		}
		r.PID = pid
		_, err = r.Vtysh("show bgp vrf all summary json")
		return err == nil, fmt.Sprint(err)
	})
}

// watchfrrShow is watchfrr's own view of its daemons (`show watchfrr` on
// its vty socket).
func watchfrrShow(run string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := bgpfrr.VtySocket{Path: filepath.Join(run, "watchfrr.vty")}.Vtysh(ctx, "show watchfrr")
	return string(out), err
}

// stopPathspace kills watchfrr first (so it restarts nothing), then every
// daemon with a pid file in run (the `aokeyd exec` launcher exits with
// bgpd), waits for them and removes run.
func stopPathspace(t *testing.T, run string) {
	pids := pidFiles(run)
	for _, name := range append([]string{"watchfrr"}, mapKeys(pids)...) {
		pid := pids[name]
		if pid <= 0 {
			continue
		}
		parent := ppid(pid)
		_ = unix.Kill(pid, unix.SIGKILL)
		wait := []int{pid}
		if name == "bgpd" && parent > 1 {
			wait = append(wait, parent)
		}
		for _, p := range wait {
			if err := lab.Within(10*time.Second, fmt.Sprintf("%s (pid %d) to exit", name, p), func() (bool, string) {
				_, err := os.Stat(fmt.Sprintf("/proc/%d/exe", p))
				return err != nil, "still running"
			}); err != nil {
				t.Log(err)
			}
		}
		delete(pids, name)
	}
	_ = os.RemoveAll(run)
}

// pidFiles maps each daemon with a pid file in run to its pid.
func pidFiles(run string) map[string]int {
	m := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(run, "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			m[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
		}
	}
	return m
}

func mapKeys(m map[string]int) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

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
// line the README documents. frrinit.sh starts watchfrr for a pathspace;
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
	r := watchfrrRouter(t, na, dir, pathspace, frrConfig(false), cg)
	waitUp(t, r)
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
	out, err := watchfrrShow(filepath.Join(frrRunDir, pathspace))
	if err != nil {
		t.Fatalf("show watchfrr: %v", err)
	}
	t.Logf("show watchfrr before the crash:\n%s", strings.TrimSpace(out))

	killed := time.Now()
	if err := unix.Kill(oldPID, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var launched, restarted time.Duration
	lab.Eventually(t, 60*time.Second, "watchfrr starts a new bgpd through bgpd_wrap (its pid file)", func() (bool, string) {
		pid, err := bgpfrr.FindPID(r.PIDFile(), "")
		if err != nil || pid == oldPID {
			return false, fmt.Sprintf("pid %d %v", pid, err)
		}
		r.PID, launched = pid, time.Since(killed)
		return true, ""
	})
	lab.Eventually(t, 60*time.Second, "the new bgpd's vty", func() (bool, string) {
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
	out, err = watchfrrShow(filepath.Join(frrRunDir, pathspace))
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
