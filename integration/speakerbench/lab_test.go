package speakerbench

import (
	"bufio"
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
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
)

// Router A (gobgpd + aokeyd) has one address; router B (BIRD) has one
// source address per protocol: fleet peer i at 10.1.0.0/16 + i, the
// baseline peers at 10.2.0.1-9. Both sit on one /8 on the veth.
var (
	addrA    = netip.MustParseAddr("10.0.0.1")
	addrSolo = netip.MustParseAddr("10.2.0.1")
	// solos are the baseline peers, each on a chain of its own, each
	// rolling alone in turn before the fleet: the single-peer roll time
	// is their median. One sample varies from 2.5 to 4.0 s (it waits
	// twice for the peer's next segment, and its switch is seen at a
	// 250 ms poll): the median of three moved by up to 0.8 s between
	// runs of the same code (2.65 to 3.48 s at N=256), as much as the
	// changes the ratio measures. The median of five still ranged from
	// 2.57 to 3.35 s over twelve runs (2.57 to 3.04 s at N=64, whose
	// fleet's last peer was done at 3.78 to 3.89 s in the same four
	// runs: the ratio moved from 1.27 to 1.48 with the baseline alone),
	// so there are nine.
	solos = func() []netip.Addr {
		out := []netip.Addr{addrSolo}
		for i := 2; i <= 9; i++ {
			out = append(out, netip.AddrFrom4([4]byte{10, 2, 0, byte(i)}))
		}
		return out
	}()
)

const (
	asA, asB = 65001, 65002
	// Key chains in aokeyd's source: the fleet's N peers and the baseline
	// peer, which rolls alone first.
	chainFleet = "fleet"
)

// chainSolo is baseline peer i's chain.
func chainSolo(i int) string { return "solo" + strconv.Itoa(i+1) }

// fleetPrefix holds every fleet peer: the fleet chain's keys name it (a
// chain lists at most 64 peers; one key shared by N sessions is a prefix).
var fleetPrefix = netip.MustParsePrefix("10.1.0.0/16")

func fleetAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}) }

// key is MKT k<i>: A sends with SendID i and receives RecvID 100+i; BIRD
// holds the mirror image. Zero times are open ends.
type key struct {
	i                      int
	sendStart, sendEnd     time.Time
	acceptStart, acceptEnd time.Time
}

func secretOf(i int) []byte {
	s := sha256.Sum256([]byte("aokeyd fleet bench k" + strconv.Itoa(i)))
	return s[:20]
}

func chainDoc(peers []netip.Prefix, keys []key) map[string]any {
	ps := make([]string, len(peers))
	for i, p := range peers {
		ps[i] = p.String()
	}
	var ks []map[string]any
	for _, k := range keys {
		ks = append(ks, map[string]any{"name": fmt.Sprintf("k%d", k.i), "send_id": k.i, "recv_id": 100 + k.i,
			"algorithm": "hmac(sha256)", "secret_hex": hex.EncodeToString(secretOf(k.i)),
			"send_lifetime": lab.KeyLifetime(k.sendStart, k.sendEnd), "accept_lifetime": lab.KeyLifetime(k.acceptStart, k.acceptEnd)})
	}
	return map[string]any{"peers": ps, "keys": ks}
}

// bench is one fleet of size n: both routers and aokeyd.
type bench struct {
	t      *testing.T
	n      int
	dir    string
	a, b   *netns.NS
	peers  []netip.Addr // the fleet, without the baseline peers
	gobgp  *lab.Gobgpd
	aokeyd *exec.Cmd
	ctl    *control.Client
	bird   *birdFleet
	// reads and readTime count the bench's own reads of the kernel
	// (pollUntil), to tell its share of the guest's CPU.
	reads    int
	readTime time.Duration
	// listenerTime is the part of readTime spent reading the listeners.
	listenerTime time.Duration
	diag         *sockets.Diag  // kept open from read to read (readKernel)
	fds          map[uint64]int // gobgpd's descriptors by socket inode, as last read
	// profiling: aokeyd profiles between two SIGUSR2 (toggleProfile).
	profiling bool
	sockPID   int // whose sockets readKernel reads: gobgpd's when 0 (TestBirdFleet: the route server BIRD's)
}

// keepalive is every session's keepalive interval in seconds at fleet size
// n (hold time nine of them), the baseline peers' as the fleet's: 1 s up
// to 256 peers (256 sessions' keepalives and their TCP-AO MACs already
// take most of the guest's two emulated CPUs), then n/128 (4 s at 512, 8 s
// at 1,024). The routers' cost per keepalive grows with their session
// count (BIRD, for one, looks at every socket it has on each wake-up): at
// 1,024 peers with 4 s keepalives, the same keepalive rate as 256 at 1 s,
// they took 1.14 CPUs (BIRD 0.73) and left the guest 0.87 idle, too little
// for the roll. A route server's sessions run 30-60 s keepalives; 8 s still
// loads the guest more. A roll waits on the peer's segments (its RNext to
// switch, its Current to retire), so the single-peer roll, timed with the
// same interval, stays the fleet roll's fair baseline.
func keepalive(n int) int {
	if n <= 256 {
		return 1
	}
	return (n + 127) / 128
}

func (f *bench) all() []netip.Addr { return append(append([]netip.Addr(nil), f.peers...), solos...) }

func newBench(t *testing.T, n int) *bench {
	f := &bench{t: t, n: n, dir: t.TempDir()}
	for i := 1; i <= n; i++ {
		f.peers = append(f.peers, fleetAddr(i))
	}
	raiseNeighbours(t, n)
	f.a, f.b = lab.Pair(t, netip.PrefixFrom(addrA, 8), netip.PrefixFrom(addrSolo, 8))
	for _, ns := range []*netns.NS{f.a, f.b} {
		// Sockets the routers closed in the set-up give up after one
		// retransmission (see settle).
		ns.MustRun(t, "sysctl", "-qw", "net.ipv4.tcp_orphan_retries=1")
	}
	// B's other source addresses in one `ip -batch` (nodad: no DAD wait).
	var batch strings.Builder
	for _, p := range append(append([]netip.Addr(nil), f.peers...), solos[1:]...) {
		fmt.Fprintf(&batch, "addr add %s/8 dev veth-b\n", p)
	}
	f.b.MustBatch(t, batch.String())
	var nbrs []lab.Neighbor
	for _, p := range f.all() {
		nbrs = append(nbrs, lab.Neighbor{Addr: p, AS: asB, Passive: true})
	}
	f.gobgp = lab.StartGobgpd(t, f.a, "gobgpd", lab.GobgpdConfig{
		AS: asA, RouterID: addrA, LocalAddrs: []netip.Addr{addrA}, Neighbors: nbrs, HoldTime: 9 * keepalive(n), Keepalive: keepalive(n),
	}, lab.GobgpdOptions{Dir: f.dir, MetricsHost: gobgpdMetrics})
	return f
}

// writeKeys writes aokeyd's key file: the fleet's chain and each baseline
// peer's (solo[i] for solos[i]), atomically.
func (f *bench) writeKeys(fleet []key, solo ...[]key) {
	f.t.Helper()
	if len(solo) != len(solos) {
		f.t.Fatalf("writeKeys: %d baseline chains, want one per baseline peer (%d)", len(solo), len(solos))
	}
	chains := map[string]any{chainFleet: chainDoc([]netip.Prefix{fleetPrefix}, fleet)}
	for i, a := range solos {
		chains[chainSolo(i)] = chainDoc([]netip.Prefix{netip.PrefixFrom(a, 32)}, solo[i])
	}
	lab.WriteKeyFile(f.t, f.dir, chains)
}

// startAokeyd runs aokeyd in A's namespace with the file key source, one
// policy binding per peer and the lab's roll timers (those of the e2e
// suite: grace 2 s, counters read every 250 ms).
func (f *bench) startAokeyd() {
	t := f.t
	var pol strings.Builder
	pol.WriteString("version: 1\nkey_chains:\n  - name: fleet\n")
	for i := range solos {
		fmt.Fprintf(&pol, "  - name: %s\n", chainSolo(i))
	}
	pol.WriteString("safety:\n  switch_timeout: 15s\n  on_switch_timeout: retry\n  retry_after: 2s\n  on_revoke_only_key: reset\npeers:\n")
	for _, p := range f.peers {
		fmt.Fprintf(&pol, "  - neighbor: %s\n    key_chain: %s\n", p, chainFleet)
	}
	for i, a := range solos {
		fmt.Fprintf(&pol, "  - neighbor: %s\n    key_chain: %s\n", a, chainSolo(i))
	}
	cfg := fmt.Sprintf(`key_source:
  type: file
  refresh: 1s
  file:
    path: keys.yaml
policy:
  path: policy.yaml
gobgp:
  address: %q
  pid_file: gobgpd.pid
control:
  socket: control.sock
  write_timeout: 5m
metrics:
  listen: 127.0.0.1:9179
log:
  format: json
  level: info
kernel:
  raise_optmem: true
`, f.gobgp.API)
	for name, data := range map[string]string{"policy.yaml": pol.String(), "aokeyd.yaml": cfg} {
		if err := os.WriteFile(filepath.Join(f.dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f.ctl = control.NewClient(filepath.Join(f.dir, "control.sock"), 5*time.Minute)
	f.aokeyd = lab.StartAokeyd(t, f.a, filepath.Join(f.dir, "aokeyd.log"), f.ctl,
		"-config", filepath.Join(f.dir, "aokeyd.yaml"), "-state-dir", filepath.Join(f.dir, "state"),
		"-roll-grace", "2s", "-roll-poll", "250ms", "-roll-backoff", "2s")
}

// gobgpdMetrics is where gobgpd serves its metrics in A's namespace.
const gobgpdMetrics = "127.0.0.1:6061"

// rpcs scrapes aokeyd's aokeyd_speaker_rpcs_total, by method.
func (f *bench) rpcs() map[string]float64 {
	f.t.Helper()
	return f.scrape("http://127.0.0.1:9179/metrics", "aokeyd_speaker_rpcs_total{", `method="`)
}

// gobgpdRPCs scrapes gobgpd's own count of the gRPC calls it served, by
// method (grpc_server_started_total): every client's, aokeyd's alone while
// the bench itself asks gobgpd nothing (the rolls; it reads the kernel).
// An aokeyd without its own count (before aokeyd_speaker_rpcs_total) is
// measured with it.
func (f *bench) gobgpdRPCs() map[string]float64 {
	f.t.Helper()
	return f.scrape("http://"+gobgpdMetrics+"/metrics", "grpc_server_started_total{", `grpc_method="`)
}

// scrape sums a counter's series by one label.
func (f *bench) scrape(url, prefix, label string) map[string]float64 {
	f.t.Helper()
	out, err := f.a.Run("wget", "-qO-", url)
	if err != nil {
		f.t.Fatalf("scraping %s: %v", url, err)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.Index(line, label)
		sp := strings.LastIndexByte(line, ' ')
		if i < 0 || sp < 0 {
			continue
		}
		method := line[i+len(label):]
		method = method[:strings.IndexByte(method, '"')]
		v, _ := strconv.ParseFloat(line[sp+1:], 64)
		m[method] += v
	}
	return m
}

// cpu is process pid's user+system CPU time.
func cpu(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 (state) on
	ut, _ := strconv.ParseUint(f[11], 10, 64)                // field 14
	st, _ := strconv.ParseUint(f[12], 10, 64)                // field 15
	return time.Duration(ut+st) * time.Second / 100, nil     // USER_HZ
}

// rssKiB is process pid's resident set (VmRSS).
func rssKiB(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}

// tcpExt reads TcpExt counters in ns (TCPAOBad, TCPAOKeyNotFound, ...).
func tcpExt(ns *netns.NS) (map[string]uint64, error) {
	out, err := ns.Run("cat", "/proc/net/netstat")
	if err != nil {
		return nil, err
	}
	m := map[string]uint64{}
	counterSection(out, "TcpExt", "", m)
	return m, nil
}

// counterSection reads one section of a /proc/net/netstat or snmp listing
// (a header line of names, then a line of values, both led by
// "section:") into m, each name prefixed with prefix. Values that are not
// unsigned integers (Tcp's MaxConn is -1) read as 0.
func counterSection(out, section, prefix string, m map[string]uint64) {
	var hdr []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != section+":" {
			continue
		}
		if hdr == nil {
			hdr = f
			continue
		}
		for i := 1; i < len(f) && i < len(hdr); i++ {
			m[prefix+hdr[i]], _ = strconv.ParseUint(f[i], 10, 64)
		}
		hdr = nil
	}
}

// session is one peer's session as both routers see it; a change is a flap.
type session struct {
	up        bool
	uptime    time.Time
	flops     uint32
	birdState string
	birdSince string
}

// sessions reads every peer's session from gobgpd (one ListPeer of the
// bench's own, not counted in aokeyd's RPCs) and BIRD.
func (f *bench) sessions() (map[netip.Addr]session, error) {
	ps, err := f.gobgp.Speaker.Peers(context.Background())
	if err != nil {
		return nil, err
	}
	protos, err := f.bird.protocols()
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]session{}
	for _, p := range ps {
		bs := protos[protoName(p.Neighbor)]
		out[p.Neighbor] = session{up: p.Established() && bs.state == "up" && bs.info == "Established",
			uptime: p.Uptime, flops: p.Flops, birdState: bs.state + " " + bs.info, birdSince: bs.since}
	}
	return out, nil
}

// flaps counts the peers whose session is down or went down since before.
func flaps(before, now map[netip.Addr]session) (n int, first string) {
	for a, s := range before {
		c := now[a]
		if !c.up || c.uptime != s.uptime || c.flops != s.flops || !bird.SameSince(c.birdSince, s.birdSince) {
			if n == 0 {
				first = fmt.Sprintf("%s: gobgpd uptime %v flops %d (was %v, %d), BIRD %s since %s (was %s)",
					a, c.uptime, c.flops, s.uptime, s.flops, c.birdState, c.birdSince, s.birdSince)
			}
			n++
		}
	}
	return n, first
}

// birdFleet is BIRD with one BGP protocol per peer address of A's.
type birdFleet struct {
	pid  int
	ns   *netns.NS
	dir  string
	sock string
	f    *bench
}

func protoName(a netip.Addr) string {
	if i := slices.Index(solos, a); i >= 0 {
		return chainSolo(i)
	}
	b := a.As4()
	return fmt.Sprintf("p%d", int(b[2])<<8|int(b[3]))
}

var birdTmpl = template.Must(template.New("bird").Funcs(template.FuncMap{"hex": hex.EncodeToString, "secret": secretOf, "name": protoName}).Parse(`# generated by integration/speakerbench
log "{{.Dir}}/bird.log" { warning, error, fatal, bug };
router id {{.RouterID}};
timeformat protocol iso long;
protocol device {}
{{- range .Peers}}
protocol bgp {{name .}} {
	local {{.}} as {{$.ASB}};
	neighbor {{$.A}} as {{$.ASA}};
	strict bind yes;
	hold time {{$.Hold}};
	keepalive time {{$.Keepalive}};
	connect delay time 1;
	connect retry time 2;
	error wait time 1, 4;
	authentication ao;
	keys {
{{- range $.Keys}}
		key { send id {{.SendID}}; recv id {{.RecvID}}; secret hex:{{hex (secret .I)}}; algorithm hmac sha256;{{if .Preferred}} preferred;{{end}}{{if .Deprecated}} deprecated;{{end}} };
{{- end}}
	};
	ipv4 { import none; export none; };
}
{{- end}}
`))

type birdKey struct {
	I, SendID, RecvID     int
	Preferred, Deprecated bool
}

// birdKeys is BIRD's key list: k1 preferred at first; armed, k2 preferred
// (k1 kept, k3 the backup throughout). An armed BIRD announces RNext k2
// before A has k2: A's kernel ignores an RNext it has no key for, so BIRD
// keeps sending with k1 until A's RNext asks for k2 and A switches as soon
// as it holds k2, which is the far side's operator giving it the new key
// ahead of the roll; no BIRD action is then on the roll's path.
func birdKeys(armed bool) []birdKey {
	ks := []birdKey{{I: 1, Preferred: !armed}, {I: 2, Preferred: armed}, {I: 3}}
	for i := range ks {
		ks[i].SendID, ks[i].RecvID = 100+ks[i].I, ks[i].I
	}
	return ks
}

func (r *birdFleet) write(armed bool) error {
	fh, err := os.Create(filepath.Join(r.dir, "bird.conf"))
	if err != nil {
		return err
	}
	defer fh.Close()
	return birdTmpl.Execute(fh, map[string]any{"Dir": r.dir, "RouterID": addrSolo, "Peers": r.f.all(),
		"A": addrA, "ASA": asA, "ASB": asB, "Keys": birdKeys(armed), "Hold": 9 * keepalive(r.f.n), "Keepalive": keepalive(r.f.n)})
}

func startBird(f *bench) *birdFleet {
	t := f.t
	r := &birdFleet{ns: f.b, dir: filepath.Join(f.dir, "bird"), f: f}
	r.sock = filepath.Join(r.dir, "bird.ctl")
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.write(false); err != nil {
		t.Fatal(err)
	}
	raiseNoFile(t)
	r.pid = f.b.Start(t, filepath.Join(r.dir, "stdout.log"), "bird", "-f", "-c", filepath.Join(r.dir, "bird.conf"), "-s", r.sock).Process.Pid
	if err := lab.Within(60*time.Second, "bird to answer birdc", func() (bool, string) {
		_, err := r.birdc("show", "status")
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		t.Fatalf("%v\nbird's output: %s", err, lab.Tail(filepath.Join(r.dir, "stdout.log"), 8000))
	}
	return r
}

// raiseNeighbours raises the IPv4 neighbour table's garbage-collection
// thresholds for a fleet of n peers on one LAN, for the test, as a route
// server's operator does. The table is one for every namespace, and its
// default hard limit (gc_thresh3) is 1,024 entries: at n=1,024 gobgpd's
// side could resolve only 1,023 of its 1,033 peers ("neighbour: arp_cache:
// neighbor table overflow!"), so its SYN-ACKs to the other ten never left
// and their sessions never came back once dropped. Above gc_thresh2 (512)
// the table also collects entries older than 5 s, and peers are resolved
// again and again.
func raiseNeighbours(t *testing.T, n int) {
	t.Helper()
	want := []int{2 * (n + 64), 4 * (n + 64), 8 * (n + 64)}
	for i, name := range []string{"gc_thresh1", "gc_thresh2", "gc_thresh3"} {
		p := "/proc/sys/net/ipv4/neigh/default/" + name
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		old := strings.TrimSpace(string(b))
		if cur, err := strconv.Atoi(old); err == nil && cur >= want[i] {
			continue
		}
		if err := os.WriteFile(p, []byte(strconv.Itoa(want[i])), 0o644); err != nil {
			t.Fatalf("raising %s for %d peers: %v", name, n, err)
		}
		t.Cleanup(func() { _ = os.WriteFile(p, []byte(old), 0o644) })
	}
}

// raiseNoFile raises this process's descriptor limit, which the processes
// it starts inherit (a Setrlimit of RLIMIT_NOFILE stops os/exec from
// giving them back the default soft limit of 1024). BIRD holds about two
// descriptors per BGP protocol: at N=512 it passed 1024 with 463 sessions
// up ("Socket error: socket: Too many open files" in its log), the accept
// on its control socket failed too, and birdc hung.
func raiseNoFile(t *testing.T) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	want := max(rl.Max, 1<<16)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: want}); err != nil {
		// Not root: the hard limit is as far as it goes.
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: rl.Max, Max: rl.Max}); err != nil {
			t.Fatal(err)
		}
	}
}

// birdc runs one BIRD CLI command, given up after 30 s: a BIRD out of
// descriptors (see raiseNoFile) accepts no CLI connection, and the
// set-up's wait, which asks BIRD, would never end.
func (r *birdFleet) birdc(args ...string) (string, error) {
	return r.ns.Run(append([]string{"timeout", "30", "birdc", "-s", r.sock}, args...)...)
}

// configure rewrites BIRD's configuration, armed or not, and applies it
// with `birdc configure`.
func (r *birdFleet) configure(armed bool) error {
	if err := r.write(armed); err != nil {
		return err
	}
	return bird.Reconfigured(r.birdc("configure"))
}

type protoStatus struct{ state, since, info string }

// protocols parses `birdc show protocols`:
// "p12 BGP --- up 2026-12-01 03:00:00.123 Established".
func (r *birdFleet) protocols() (map[string]protoStatus, error) {
	out, err := r.birdc("show", "protocols")
	if err != nil {
		return nil, err
	}
	m := map[string]protoStatus{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || f[1] != "BGP" {
			continue
		}
		ps := protoStatus{state: f[3], since: f[4] + " " + f[5]}
		if len(f) > 6 {
			ps.info = strings.Join(f[6:], " ")
		}
		m[f[0]] = ps
	}
	return m, nil
}

func hexSecret(i int) string { return hex.EncodeToString(secretOf(i)) }

// summary counts BIRD's protocols by state and info, with one last error.
func (r *birdFleet) summary() string {
	ps, err := r.protocols()
	if err != nil {
		return err.Error()
	}
	by := map[string]int{}
	for _, p := range ps {
		by[p.state+" "+p.info]++
	}
	s := fmt.Sprint(by)
	for name := range ps {
		if out, err := r.birdc("show", "protocols", "all", name); err == nil {
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "Last error") {
					s += "; " + name + ": " + strings.TrimSpace(l)
				}
			}
		}
		break
	}
	return s
}
