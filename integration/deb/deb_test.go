package deb

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
)

// The lab's addresses are the demo policy's: aokeyd init's policy binds
// 192.0.2.2 to the demo chain, so the shipped default config works as is
// once it names the speaker and has keys.
var (
	addrA = netip.MustParseAddr("192.0.2.1")
	addrB = netip.MustParseAddr("192.0.2.2")
)

const asA, asB = 65001, 65002

// TestDebInstall installs, upgrades, removes and purges the package in an
// overlay of the guest's Debian root and prints
// "deb: install=ok upgrade_kept_config=1 purge_clean=1 units_verified=N".
func TestDebInstall(t *testing.T) {
	kerneltest.Require(t)
	lab.RequireNetns(t)
	v1, v2 := packages(t)
	a, b := lab.Pair(t, netip.PrefixFrom(addrA, 30), netip.PrefixFrom(addrB, 30))
	labDir := t.TempDir()
	g := lab.StartGobgpd(t, a, "gobgpd", lab.GobgpdConfig{
		AS: asA, RouterID: addrA, LocalAddrs: []netip.Addr{addrA},
		Neighbors: []lab.Neighbor{{Addr: addrB, AS: asB, Passive: true}},
		HoldTime:  9, Keepalive: 3,
	}, lab.GobgpdOptions{Dir: labDir})
	r := newRoot(t, a)
	r.bind(labDir, "/lab")
	for _, p := range []string{v1.path, v2.path} {
		copyFile(t, p, r.path("/tmp/"+filepath.Base(p)), 0o644)
	}
	t.Cleanup(func() {
		if t.Failed() {
			lab.Dump(t, "aokeyd's log (tail)", lab.Tail(r.path("/var/log/aokeyd.log"), 20000))
		}
		// Whatever the test left running in the root.
		_, _ = r.run("/etc/init.d/aokeyd", "stop")
	})

	// Install: configured, not started (it needs the operator's config).
	out := r.must("dpkg", "-i", "/tmp/"+filepath.Base(v1.path))
	if !strings.Contains(out, "aoctl validate /etc/aokeyd/aokeyd.yaml") {
		t.Errorf("dpkg -i: no word on what to configure first:\n%s", out)
	}
	if got := r.must("dpkg-query", "-W", "-f", "${Status} ${Version}", "aokeyd"); got != "install ok installed "+v1.version {
		t.Fatalf("after dpkg -i: %q", got)
	}
	for p, mode := range map[string]os.FileMode{"/etc/aokeyd": 0o750, "/etc/aokeyd/aokeyd.yaml": 0o640, "/etc/aokeyd/policy.yaml": 0o640, "/var/lib/aokeyd": 0o700, "/usr/sbin/aokeyd": 0o755, "/usr/bin/aoctl": 0o755} {
		if fi, err := os.Stat(r.path(p)); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, mode %v; want %v", p, err, modeOf(fi), mode)
		}
	}
	if out, err := r.run("/etc/init.d/aokeyd", "status"); err == nil {
		t.Errorf("aokeyd runs right after install, before it is configured:\n%s", out)
	}

	// The units as systemd reads them: the package's, and the example
	// unit for a speaker under aokeyd exec, installed as its comment says
	// (with gobgpd where it names it).
	copyFile(t, lab.GobgpdBin(t), r.path("/usr/local/bin/gobgpd"), 0o755)
	r.must("cp", "/usr/share/doc/aokeyd/examples/gobgpd-aokeyd.service", "/etc/systemd/system/")
	// aokeyd@NAME (one aokeyd per speaker) as an instance of the template.
	r.must("ln", "-s", "/usr/lib/systemd/system/aokeyd@.service", "/etc/systemd/system/aokeyd@bird.service")
	units := []string{"/usr/lib/systemd/system/aokeyd.service", "/etc/systemd/system/gobgpd-aokeyd.service", "/etc/systemd/system/aokeyd@bird.service"}
	if out, err := r.run(append([]string{"systemd-analyze", "verify", "--man=no"}, units...)...); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	// The installed tools: the default config is what aokeyd init -dir
	// /etc/aokeyd writes (init names the files of its directory), the man
	// pages and completions are in place and load.
	r.must("aokeyd", "init", "-dir", "/tmp/init")
	for _, f := range []string{"aokeyd.yaml", "policy.yaml"} {
		want := strings.ReplaceAll(r.read("/tmp/init/"+f), "/tmp/init/", "/etc/aokeyd/")
		if got := r.read("/etc/aokeyd/" + f); got != want || got == "" {
			t.Errorf("/etc/aokeyd/%s is not what aokeyd init -dir /etc/aokeyd writes:\n%s\n--- init:\n%s", f, got, want)
		}
	}
	if out := r.must("bash", "-c", "source /usr/share/bash-completion/completions/aoctl && complete -p aoctl"); !strings.Contains(out, "aoctl") {
		t.Errorf("bash completion: %q", out)
	}
	// What the completion scripts ask (bash-completion itself is not in
	// the guest's root: the package suggests it).
	if out := r.must("aoctl", "__complete", "fl"); !strings.Contains(out, "fleet") {
		t.Errorf("completion of 'aoctl fl': %q", out)
	}
	if out := r.must("aoctl", "__complete", "status", "--v"); !strings.Contains(out, "--vrf") {
		t.Errorf("completion of 'aoctl status --v': %q", out)
	}
	for _, m := range []string{"man8/aokeyd.8.gz", "man8/aoctl.8.gz", "man8/aoctl-revoke.8.gz", "man8/aoctl-fleet-revoke.8.gz",
		"man5/aokeyd.yaml.5.gz", "man5/aokeyd-policy.yaml.5.gz", "man5/aokeyd-keys.yaml.5.gz"} {
		if !r.exists("/usr/share/man/" + m) {
			t.Errorf("man page %s missing", m)
		}
	}

	// The operator's configuration: keys (aokeyd init's demo keys, the
	// demo policy's) and the speaker. This edit must survive the upgrade.
	copyFile(t, r.path("/tmp/init/keys.yaml"), r.path("/etc/aokeyd/keys.yaml"), 0o600)
	cfg := r.read("/etc/aokeyd/aokeyd.yaml")
	// The pid file, not the process name: other tests' gobgpd run beside.
	edited := strings.Replace(cfg, "gobgp:\n  address: 127.0.0.1:50051\n  process_name: gobgpd\n", "# edited: the lab's gobgpd\ngobgp:\n  address: unix:///lab/gobgpd.sock\n  pid_file: /lab/gobgpd.pid\n", 1)
	if edited == cfg {
		t.Fatalf("the default config has no gobgp address to edit:\n%s", cfg)
	}
	writeFile(t, r.path("/etc/aokeyd/aokeyd.yaml"), edited, 0o640)
	r.must("aoctl", "validate", "/etc/aokeyd/aokeyd.yaml")

	// Started as an init script starts it (no systemd in the guest),
	// against the lab: BIRD gets the keys from the installed aoctl.
	r.must("/etc/init.d/aokeyd", "start")
	status := waitStatus(t, r)
	if !strings.Contains(status, addrB.String()) {
		t.Errorf("aoctl status does not show the peer:\n%s", status)
	}
	auth := r.output("aoctl", "peer-config", addrB.String(), "--for", "bird", "--local", addrA.String(), "--with-secrets")
	br := bird.Start(t, b, bird.Config{RouterID: addrB.String(), LocalAddr: addrB.String(), LocalAS: asB,
		Neighbor: addrA.String(), PeerAS: asA, Auth: auth, HoldTime: 9})
	established := func(p bgp.PeerInfo) bool { return p.State == bgp.StateEstablished }
	up := lab.WaitPeer(t, g.Speaker, addrB, 90*time.Second, established)
	since := birdSince(t, br)
	lab.Eventually(t, 30*time.Second, "aoctl status: the session established over TCP-AO", func() (bool, string) {
		out, err := r.run("aoctl", "status", addrB.String())
		return err == nil && strings.Contains(out, "established") && strings.Contains(out, "demo-1"), out
	})
	// A revocation record (the unused future key), which must survive.
	r.must("aoctl", "revoke", "demo/demo-2", "--peer", addrB.String())
	records := stateFiles(t, r)
	if len(records) == 0 {
		t.Fatal("no revocation record in /var/lib/aokeyd after aoctl revoke")
	}
	pid1 := daemonPID(t, r)

	// Upgrade: the operator's config and the records kept, no prompt, the
	// daemon restarted with its keys left in place (no session flap).
	r.must("dpkg", "-i", "/tmp/"+filepath.Base(v2.path))
	keptConfig := r.read("/etc/aokeyd/aokeyd.yaml") == edited
	if !keptConfig {
		t.Errorf("the upgrade did not keep the edited config:\n%s", r.read("/etc/aokeyd/aokeyd.yaml"))
	}
	if left, _ := filepath.Glob(r.path("/etc/aokeyd/*.dpkg-*")); len(left) > 0 {
		keptConfig = false
		t.Errorf("the upgrade left %v", left)
	}
	for name, data := range records {
		if got := r.read("/var/lib/aokeyd/" + name); got != data {
			keptConfig = false
			t.Errorf("the upgrade changed or lost /var/lib/aokeyd/%s", name)
		}
	}
	if got := r.must("dpkg-query", "-W", "-f", "${Version}", "aokeyd"); got != v2.version {
		t.Errorf("after the upgrade: version %q, want %q", got, v2.version)
	}
	pid2 := daemonPID(t, r)
	if pid2 == pid1 {
		t.Errorf("the upgrade did not restart aokeyd (pid %d)", pid1)
	}
	waitStatus(t, r)
	if p := lab.WaitPeer(t, g.Speaker, addrB, 30*time.Second, established); !p.Uptime.Equal(up.Uptime) {
		t.Errorf("the session flapped during the upgrade: up since %v, then %v", up.Uptime, p.Uptime)
	}

	// Remove: stopped, binaries gone, config and records kept, the keys
	// left on the sockets (the session stays up).
	r.must("dpkg", "-r", "aokeyd")
	if alive(pid2) {
		t.Errorf("aokeyd (pid %d) still runs after dpkg -r", pid2)
	}
	for _, p := range []string{"/usr/sbin/aokeyd", "/usr/bin/aoctl", "/usr/lib/systemd/system/aokeyd.service"} {
		if r.exists(p) {
			t.Errorf("%s left after dpkg -r", p)
		}
	}
	if !r.exists("/etc/aokeyd/aokeyd.yaml") || !r.exists("/var/lib/aokeyd") {
		t.Error("dpkg -r removed the configuration or the records (only --purge should)")
	}
	time.Sleep(3 * time.Second) // a keepalive or two
	if p := lab.WaitPeer(t, g.Speaker, addrB, 10*time.Second, established); !p.Uptime.Equal(up.Uptime) || !bird.SameSince(birdSince(t, br), since) {
		t.Errorf("the session flapped when aokeyd was removed: up since %v, then %v", up.Uptime, p.Uptime)
	}

	// Purge: nothing of the package left.
	r.must("dpkg", "--purge", "aokeyd")
	clean := true
	for _, p := range append(packageFiles(t, v2.path), "/etc/aokeyd", "/var/lib/aokeyd", "/run/aokeyd", "/var/log/aokeyd.log") {
		if r.exists(p) {
			clean = false
			t.Errorf("%s left after dpkg --purge", p)
		}
	}
	if out, err := r.run("dpkg-query", "-W", "aokeyd"); err == nil {
		clean = false
		t.Errorf("dpkg still knows aokeyd after --purge: %s", out)
	}
	if t.Failed() {
		return
	}
	fmt.Printf("deb: install=ok upgrade_kept_config=%d purge_clean=%d units_verified=%d\n", b2i(keptConfig), b2i(clean), len(units))
}

// pkg is one of the packages under test.
type pkg struct{ path, version string }

// packages finds the package and its rebuild (guest-bins.sh puts them in
// PATH), the older first.
func packages(t *testing.T) (older, newer pkg) {
	t.Helper()
	var found []pkg
	seen := map[string]bool{}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		ms, _ := filepath.Glob(filepath.Join(dir, "aokeyd_*_amd64.deb"))
		for _, m := range ms {
			v := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m), "aokeyd_"), "_amd64.deb")
			if !seen[v] {
				seen[v] = true
				found = append(found, pkg{m, v})
			}
		}
	}
	if len(found) != 2 {
		t.Fatalf("want the package and its rebuild in PATH (integration/tools/guest-bins.sh builds them), found %v", found)
	}
	sort.Slice(found, func(i, j int) bool {
		return exec.Command("dpkg", "--compare-versions", found[i].version, "lt", found[j].version).Run() == nil
	})
	if exec.Command("dpkg", "--compare-versions", found[0].version, "lt", found[1].version).Run() != nil {
		t.Fatalf("versions %s and %s do not order", found[0].version, found[1].version)
	}
	return found[0], found[1]
}

// packageFiles are the files (not directories) the package ships.
func packageFiles(t *testing.T, deb string) []string {
	t.Helper()
	out, err := exec.Command("dpkg-deb", "--fsys-tarfile", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("tar", "-t")
	cmd.Stdin = strings.NewReader(string(out))
	list, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, l := range strings.Split(string(list), "\n") {
		if l != "" && !strings.HasSuffix(l, "/") {
			files = append(files, strings.TrimPrefix(l, "."))
		}
	}
	return files
}

// waitStatus waits for the installed aoctl to get an answer from aokeyd.
func waitStatus(t *testing.T, r *root) string {
	t.Helper()
	var out string
	lab.Eventually(t, 60*time.Second, "aoctl status to answer", func() (bool, string) {
		var err error
		out, err = r.run("aoctl", "status")
		return err == nil, out
	})
	return out
}

// daemonPID is the running aokeyd's pid (the init script's pid file).
func daemonPID(t *testing.T, r *root) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(r.read("/run/aokeyd/aokeyd.pid")))
	if err != nil || !alive(pid) {
		t.Fatalf("aokeyd's pid file: %q (%v), running %t", r.read("/run/aokeyd/aokeyd.pid"), err, err == nil && alive(pid))
	}
	return pid
}

// alive reports whether pid runs (an exited process not yet reaped by
// the guest's init is not running).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// stateFiles are the revocation records in /var/lib/aokeyd with their
// contents.
func stateFiles(t *testing.T, r *root) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(r.path("/var/lib/aokeyd"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "revocations.json") { // and its .bak
			m[e.Name()] = r.read("/var/lib/aokeyd/" + e.Name())
		}
	}
	return m
}

func birdSince(t *testing.T, br *bird.Router) string {
	t.Helper()
	st, err := br.Protocol()
	if err != nil || st.State != "up" {
		t.Fatalf("BIRD's session: %+v, %v", st, err)
	}
	return st.Since
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, string(b), mode)
}

func writeFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func modeOf(fi os.FileInfo) any {
	if fi == nil {
		return "-"
	}
	return fi.Mode().Perm()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
