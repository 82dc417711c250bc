package frr

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	bgpfrr "github.com/aokeyd/aokeyd/bgp/frr"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
)

// wrapScript is the bgpd_wrap docs/speakers.md documents (docs/frr-bgpd-wrap.sh),
// from the package directory the tests run in.
const wrapScript = "../../docs/frr-bgpd-wrap.sh"

// FRR's own scripts in the guest root (Debian's frr package).
const (
	frrInit     = "/usr/lib/frr/frrinit.sh"
	frrWatchfrr = "/usr/lib/frr/watchfrr"
	frrRunDir   = "/run/frr"
)

// daemonsFile is /etc/frr/PATHSPACE/daemons as an operator writes it for
// an AO-managed bgpd: Debian's options, bgpd enabled, and the bgpd_wrap
// line of docs/speakers.md. watchfrr's --min-restart-interval (default 60s,
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

// StartWatchfrr starts FRR the way the init system does — `frrinit.sh
// start PATHSPACE`, which starts watchfrr, which starts zebra, mgmtd,
// staticd and bgpd (through bgpd_wrap: docs/frr-bgpd-wrap.sh under `aokeyd
// exec` on socket cg) — inside ns. FRR's configuration directory is the
// test's own: /etc/frr is bind-mounted over from dir in the mount
// namespace `ip netns exec` makes, which watchfrr and every daemon it
// (re)starts inherit; the guest's /etc/frr is not touched. The run
// directory is FRR's, /run/frr/PATHSPACE (a tmpfs in the guest), owned by
// FRR's user as frrinit.sh makes it. Everything is killed when the test
// ends.
func StartWatchfrr(t testing.TB, ns *netns.NS, dir, pathspace string, cfg Config, cg string) *Router {
	t.Helper()
	return startWatchfrr(t, ns, dir, pathspace, cfg, PathspaceFiles{}, cg)
}

// PathspaceFiles are a pathspace's configuration given as text, for a
// router Config cannot describe (BGP unnumbered: interface neighbors and
// zebra's router advertisements).
type PathspaceFiles struct {
	// Conf maps a daemon's file name ("bgpd.conf", "zebra.conf") to its
	// text; each is written into the run directory and linked from the
	// pathspace's configuration directory, as bgpd.conf is. A `log file`
	// in it must be in the run directory (FRR's user writes there).
	Conf map[string]string
	// NoWrap leaves bgpd_wrap out of the daemons file: bgpd runs bare,
	// not under `aokeyd exec` (a lab brought up without aokeyd).
	NoWrap bool
}

// StartWatchfrrFiles is StartWatchfrr with the configuration files given
// (files.Conf must hold bgpd.conf). The router has no Config: its Peer
// and Routes, which ask by address and VRF, are not for it.
func StartWatchfrrFiles(t testing.TB, ns *netns.NS, dir, pathspace string, files PathspaceFiles, cg string) *Router {
	t.Helper()
	if _, ok := files.Conf["bgpd.conf"]; !ok {
		t.Fatal("StartWatchfrrFiles: no bgpd.conf")
	}
	return startWatchfrr(t, ns, dir, pathspace, Config{}, files, cg)
}

func startWatchfrr(t testing.TB, ns *netns.NS, dir, pathspace string, cfg Config, files PathspaceFiles, cg string) *Router {
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
	conf := []string{"bgpd.conf"}
	if files.Conf == nil {
		if err := r.write(); err != nil {
			t.Fatal(err)
		}
	} else {
		conf = nil
		for name, text := range files.Conf {
			if err := os.WriteFile(filepath.Join(run, name), []byte(text), 0o644); err != nil { // FRR's user reads it
				t.Fatal(err)
			}
			conf = append(conf, name)
		}
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
	for _, name := range conf {
		if err := os.Symlink(filepath.Join(run, name), filepath.Join(etc, pathspace, name)); err != nil {
			t.Fatal(err)
		}
	}
	daemons := fmt.Sprintf(daemonsFile, wrap)
	if files.NoWrap {
		bare := strings.Replace(daemons, fmt.Sprintf("bgpd_wrap=%q\n", wrap), "", 1)
		if bare == daemons {
			t.Fatalf("the daemons file has no bgpd_wrap line to leave out:\n%s", daemons)
		}
		daemons = bare
	}
	if err := os.WriteFile(filepath.Join(etc, pathspace, "daemons"), []byte(daemons), 0o644); err != nil {
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
			out, err := WatchfrrShow(run)
			lab.Dump(t, "frrinit.sh, show watchfrr and bgpd's log", fmt.Sprintf("frrinit.sh:\n%s\nshow watchfrr: %v\n%s\nbgpd logs:\n%s", lab.Tail(logPath, 2000), err, out, r.LogTail()))
		}
	})
	return r
}

// WaitUp waits for bgpd's pid file and its vty (Router.WaitReady asks for
// the default VRF's summary, which fails with a VRF instance only).
func (r *Router) WaitUp(t testing.TB) {
	t.Helper()
	lab.Eventually(t, lab.ProcessStart, "bgpd's pid file and vty", func() (bool, string) {
		pid, err := bgpfrr.FindPID(r.PIDFile(), "")
		if err != nil {
			return false, err.Error()
		}
		r.PID = pid
		_, err = r.Vtysh("show bgp vrf all summary json")
		return err == nil, fmt.Sprint(err)
	})
}

// WatchfrrShow is watchfrr's own view of its daemons (`show watchfrr` on
// its vty socket).
func WatchfrrShow(run string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := bgpfrr.VtySocket{Path: filepath.Join(run, "watchfrr.vty")}.Vtysh(ctx, "show watchfrr")
	return string(out), err
}

// stopPathspace kills watchfrr first (so it restarts nothing), then every
// daemon with a pid file in run (the `aokeyd exec` launcher exits with
// bgpd), waits for them and removes run.
func stopPathspace(t testing.TB, run string) {
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
