package speakerbench

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	birdctl "github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/birdnative"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The bird-fleet item's lab (TestBirdFleet): the route server in A's
// namespace at addrA, BIRD with one BGP protocol per member, each
// including the key file aokeyd writes for it (speaker type bird, aokeyd
// in the same namespace); the members in B's namespace, one BIRD with one
// protocol per member address (fleetAddr(i)) toward the route server, as
// the existing fleet item's far end, keyed statically by the bench (the
// members' operators' side): k1, k2 and k3 in every protocol, k2 preferred
// once armed (birdKeys).
//
// Chains: one policy key chain per member ("m<i>", its binding), each
// reading the one shared chain of the key source (source_chain: shared),
// so that a roll of the shared chain is a scheduled roll of every member
// and `aoctl revoke shared/k2` is a revoke of one key across every
// protocol. A binding names one chain in aokeyd's policy: a member on a
// key source chain of its own could not share a key with the others.
const chainShared = "shared"

// memberChain is member i's policy chain (i from 1, as fleetAddr).
func memberChain(i int) string { return "m" + strconv.Itoa(i) }

// rsFleet is the bird-fleet lab of size n: bench's namespaces, members and
// kernel reads (readKernel on the route server BIRD's sockets: sockPID),
// the two BIRDs and the route server's aokeyd.
type rsFleet struct {
	*bench
	rs, members *birdFleet
	keysDir     string
}

// newRSFleet makes the namespaces and the members' addresses.
func newRSFleet(t *testing.T, n int) *rsFleet {
	f := &rsFleet{bench: &bench{t: t, n: n, dir: t.TempDir()}}
	f.keysDir = filepath.Join(f.dir, "bird-keys")
	for i := 1; i <= n; i++ {
		f.peers = append(f.peers, fleetAddr(i))
	}
	raiseNeighbours(t, n)
	f.a, f.b = lab.Pair(t, netip.PrefixFrom(addrA, 8), netip.PrefixFrom(f.peers[0], 8))
	for _, ns := range []*netns.NS{f.a, f.b} {
		ns.MustRun(t, "sysctl", "-qw", "net.ipv4.tcp_orphan_retries=1") // see settle
	}
	// The route server's one listener holds every member's keys (four
	// each during a roll): far above a new namespace's 128 KiB of socket
	// option memory (tcpao.RaiseOptMemIn), which aokeyd raises only for
	// the speakers whose sockets it keys itself. A route server's
	// operator raises it for BIRD.
	want := 2 * tcpao.OptMemNeeded(4*(n+16), tcpao.HMACSHA256)
	f.a.MustRun(t, "sysctl", "-qw", fmt.Sprintf("net.core.optmem_max=%d", max(want, 131072)))
	var batch strings.Builder
	for _, p := range f.peers[1:] {
		fmt.Fprintf(&batch, "addr add %s/8 dev veth-b\n", p)
	}
	if batch.Len() > 0 {
		f.b.MustBatch(t, batch.String())
	}
	return f
}

// writeKeys writes the key source: the shared chain, keys as given
// (keysRolling), for every member (one prefix holds them all).
func (f *rsFleet) writeKeys(keys []key) {
	f.t.Helper()
	lab.WriteKeyFile(f.t, f.dir, map[string]any{chainShared: chainDoc([]netip.Prefix{fleetPrefix}, keys)})
}

// rsPolicy is the route server aokeyd's policy: a chain per member over
// the shared source chain, each member bound to its own.
func rsPolicy(peers []netip.Addr) string {
	var b strings.Builder
	b.WriteString("version: 1\nkey_chains:\n")
	for i := range peers {
		fmt.Fprintf(&b, "  - name: %s\n    source_chain: %s\n", memberChain(i+1), chainShared)
	}
	b.WriteString("peers:\n")
	for i, p := range peers {
		fmt.Fprintf(&b, "  - neighbor: %s\n    key_chain: %s\n", p, memberChain(i+1))
	}
	return b.String()
}

// rsMetrics is where the route server's aokeyd serves its metrics, in A's
// namespace.
const rsMetrics = "127.0.0.1:9179"

// rsConfig is the route server aokeyd's configuration: speaker type bird
// (the route server BIRD found by its pid file: the members' BIRD runs in
// the same PID namespace), its poll interval the default.
func (f *rsFleet) rsConfig() string {
	rs := filepath.Join(f.dir, "rs")
	return fmt.Sprintf(`key_source:
  type: file
  refresh: 1s
  file:
    path: keys.yaml
policy:
  path: policy.yaml
speaker:
  type: bird
  bird:
    control_socket: %s
    keys_dir: %s
    pid_file: %s
    binary: bird
control:
  socket: control.sock
  write_timeout: 5m
metrics:
  listen: %s
log:
  format: json
  level: info
kernel:
  expedite_rcu: true
`, filepath.Join(rs, "bird.ctl"), f.keysDir, filepath.Join(rs, "bird.pid"), rsMetrics)
}

// startAokeyd runs the route server's aokeyd in A's namespace and waits,
// up to a minute and a half plus 50 ms a member, for every member's key
// file: BIRD's configuration includes them all, and BIRD does not start
// without them (aokeyd writes them with no BIRD to reconfigure yet).
func (f *rsFleet) startAokeyd() {
	t := f.t
	for name, data := range map[string]string{"policy.yaml": rsPolicy(f.peers), "aokeyd.yaml": f.rsConfig()} {
		if err := os.WriteFile(filepath.Join(f.dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f.ctl = control.NewClient(filepath.Join(f.dir, "control.sock"), 5*time.Minute)
	f.aokeyd = lab.StartAokeyd(t, f.a, filepath.Join(f.dir, "aokeyd.log"), f.ctl,
		"-config", filepath.Join(f.dir, "aokeyd.yaml"), "-state-dir", filepath.Join(f.dir, "state"))
	lab.Eventually(t, 90*time.Second+time.Duration(f.n)*50*time.Millisecond, "aokeyd writes every member's key file", func() (bool, string) {
		missing := 0
		for _, p := range f.peers {
			if _, err := os.Stat(f.keyFile(p)); err != nil {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d files missing", missing, f.n)
	})
}

// keyFile is member p's include file.
func (f *rsFleet) keyFile(p netip.Addr) string {
	return filepath.Join(f.keysDir, birdnative.FileName(p, ""))
}

var rsTmpl = template.Must(template.New("rs").Funcs(template.FuncMap{"name": protoName}).Parse(`# generated by integration/speakerbench (bird-fleet: the route server)
log "{{.Dir}}/bird.log" { warning, error, fatal, bug };
router id {{.RS}};
timeformat protocol iso long;
protocol device {}
{{- range .Members}}
protocol bgp {{name .}} {
	local {{$.RS}} as {{$.ASRS}};
	neighbor {{.}} as {{$.ASM}};
	passive on;
	hold time {{$.Hold}};
	keepalive time {{$.Keepalive}};
	error wait time 1, 4;
	include "{{$.KeysDir}}/{{.}}.conf";
	ipv4 { import none; export none; };
}
{{- end}}
`))

// writeRS writes the route server BIRD's configuration into dir.
func (f *rsFleet) writeRS(dir string) error {
	return writeTmpl(filepath.Join(dir, "bird.conf"), rsTmpl, map[string]any{"Dir": dir, "RS": addrA, "Members": f.peers,
		"ASRS": asA, "ASM": asB, "Hold": 9 * keepalive(f.n), "Keepalive": keepalive(f.n), "KeysDir": f.keysDir})
}

// writeMembers writes the members BIRD's configuration into dir: the
// existing fleet item's far end (birdTmpl) toward the route server, armed
// or not (birdKeys).
func (f *rsFleet) writeMembers(dir string, armed bool) error {
	return writeTmpl(filepath.Join(dir, "bird.conf"), birdTmpl, map[string]any{"Dir": dir, "RouterID": f.peers[0], "Peers": f.peers,
		"A": addrA, "ASA": asA, "ASB": asB, "Keys": birdKeys(armed), "Hold": 9 * keepalive(f.n), "Keepalive": keepalive(f.n)})
}

func writeTmpl(path string, tmpl *template.Template, data any) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := tmpl.Execute(fh, data); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// startBirdIn starts BIRD in ns with the configuration write puts into
// dir (its control socket dir/bird.ctl, its pid file dir/bird.pid) and
// waits, up to a minute plus 20 ms a protocol, for it to answer.
func (f *rsFleet) startBirdIn(name string, onA bool, write func(dir string) error) *birdFleet {
	t := f.t
	ns := f.b
	if onA {
		ns = f.a
	}
	r := &birdFleet{ns: ns, dir: filepath.Join(f.dir, name)}
	r.sock = filepath.Join(r.dir, "bird.ctl")
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := write(r.dir); err != nil {
		t.Fatal(err)
	}
	raiseNoFile(t)
	r.pid = ns.Start(t, filepath.Join(r.dir, "stdout.log"), "bird", "-f", "-c", filepath.Join(r.dir, "bird.conf"), "-s", r.sock,
		"-P", filepath.Join(r.dir, "bird.pid")).Process.Pid
	if err := lab.Within(time.Minute+time.Duration(f.n)*20*time.Millisecond, name+"'s BIRD to answer birdc", func() (bool, string) {
		_, err := r.birdc("show", "status")
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		t.Fatalf("%v\nbird's output: %s\nbird.log: %s", err, lab.Tail(filepath.Join(r.dir, "stdout.log"), 8000), lab.Tail(filepath.Join(r.dir, "bird.log"), 8000))
	}
	return r
}

// armMembers gives every member k2, preferred (the members' operators
// ahead of the roll, as the fleet item's BIRD), and waits until each
// member's protocol announces RNext 2 while it still sends with k1 (the
// route server holds no k2 yet, so its kernel keeps k1 current).
func (f *rsFleet) armMembers(within time.Duration) error {
	if err := f.writeMembers(f.members.dir, true); err != nil {
		return err
	}
	if err := bird.Reconfigured(f.members.birdc("configure")); err != nil {
		return err
	}
	return lab.Within(within, "every member announcing RNext 2, sending with k1", func() (bool, string) {
		return f.membersKeys(101, 2)
	})
}

// membersKeys reports whether every member's protocol sends with key
// current (its SendID; BIRD's "Current key") and announces rnext (the
// RecvID it asks for), and how many do not.
func (f *rsFleet) membersKeys(current, rnext int) (bool, string) {
	out, err := birdctl.Command(f.members.sock, "show protocols all")
	if err != nil {
		return false, err.Error()
	}
	ok, off, example := 0, 0, ""
	for _, p := range birdctl.ParseProtocols(out) {
		if p.Proto != "BGP" {
			continue
		}
		if p.CurrentKey == current && p.RNextKey == rnext {
			ok++
			continue
		}
		if off++; example == "" {
			example = fmt.Sprintf("%s: %s %s current %d rnext %d", p.Name, p.State, p.BGPState, p.CurrentKey, p.RNextKey)
		}
	}
	return ok == f.n, fmt.Sprintf("%d of %d members so, %d not (e.g. %s)", ok, f.n, off, example)
}

// memberSession is one member's session as both BIRDs see it: state and
// since; a change of either since is a flap.
type memberSession struct {
	up      bool
	rs, mem protoStatus
}

// sessions reads every member's session from both BIRDs (`show protocols`).
func (f *rsFleet) sessions() (map[netip.Addr]memberSession, error) {
	rs, err := f.rs.protocols()
	if err != nil {
		return nil, err
	}
	mem, err := f.members.protocols()
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]memberSession{}
	for _, p := range f.peers {
		name := protoName(p)
		a, b := rs[name], mem[name]
		out[p] = memberSession{up: a.state == "up" && a.info == "Established" && b.state == "up" && b.info == "Established", rs: a, mem: b}
	}
	return out, nil
}

// memberFlaps counts the members whose session is down or went down since
// before, on either side.
func memberFlaps(before, now map[netip.Addr]memberSession) (n int, first string) {
	for a, s := range before {
		c := now[a]
		if !c.up || !bird.SameSince(c.rs.since, s.rs.since) || !bird.SameSince(c.mem.since, s.mem.since) {
			if n == 0 {
				first = fmt.Sprintf("%s: route server %s %s since %s (was %s), member %s %s since %s (was %s)", a,
					c.rs.state, c.rs.info, c.rs.since, s.rs.since, c.mem.state, c.mem.info, c.mem.since, s.mem.since)
			}
			n++
		}
	}
	return n, first
}

// configures scrapes the route server aokeyd's count of `birdc configure`
// calls (aokeyd_speaker_rpcs_total{method="birdc configure"}).
func (f *rsFleet) configures() float64 {
	return f.scrape("http://"+rsMetrics+"/metrics", "aokeyd_speaker_rpcs_total{", `method="`)[birdnative.CommandConfigure]
}

// reconfigured reads aokeyd's "BIRD reconfigured" log lines logged in
// [from, to): each configure BIRD took, as "files@ms since from".
func (f *rsFleet) reconfigured(from, to time.Time) []string {
	var out []string
	for _, l := range strings.Split(lab.Tail(filepath.Join(f.dir, "aokeyd.log"), 16<<20), "\n") {
		if !strings.Contains(l, `"BIRD reconfigured"`) {
			continue
		}
		var e struct {
			Time  time.Time `json:"time"`
			Files int       `json:"files"`
		}
		if json.Unmarshal([]byte(l), &e) != nil || e.Time.Before(from) || !e.Time.Before(to) {
			continue
		}
		out = append(out, fmt.Sprintf("%d@%d", e.Files, e.Time.Sub(from).Milliseconds()))
	}
	return out
}
