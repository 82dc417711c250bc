package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	api "github.com/osrg/gobgp/v3/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aokeyd/aokeyd/bgp"
	bgpgobgp "github.com/aokeyd/aokeyd/bgp/gobgp"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/netns"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/keystore/vaulttest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The lab: router A (gobgpd v3.37, passive AO neighbor, managed by aokeyd
// with a YAML key file) and router B (BIRD 2.17, actively connecting with
// `authentication ao`), in two namespaces joined by veth.
var (
	addrA = netip.MustParseAddr("10.255.0.1")
	addrB = netip.MustParseAddr("10.255.0.2")
)

const (
	asA = 65001
	asB = 65002
)

// routesA and routesB are announced by A and B: a flap shows as lost routes.
var (
	routesA = []string{"198.51.100.0/26", "198.51.100.64/26", "198.51.100.128/26"}
	routesB = []string{"203.0.113.0/26", "203.0.113.64/26", "203.0.113.128/26"}
)

// The IPv6 lab (labOptions.v6): the routers also have addresses in
// 2001:db8:ab::/64 on the same link, and the BGP session runs over IPv6
// with IPv6 routes (as many as the IPv4 lab's, so the route counts the
// checks expect are the same).
var (
	addrA6   = netip.MustParseAddr("2001:db8:ab::1")
	addrB6   = netip.MustParseAddr("2001:db8:ab::2")
	routesA6 = []string{"2001:db8:a1::/48", "2001:db8:a2::/48", "2001:db8:a3::/48"}
	routesB6 = []string{"2001:db8:b1::/48", "2001:db8:b2::/48", "2001:db8:b3::/48"}
)

// labOptions vary the lab.
type labOptions struct {
	vault bool // router A's keys in Vault (KV v2) instead of a YAML file
	v6    bool // the BGP session over IPv6
	// binding is the neighbor of aokeyd's policy binding and the peers of
	// the key chain ("" is router B's address): a prefix makes B's session
	// a prefix binding's.
	binding string
}

// key is round i's MKT. A sends with SendID i and receives RecvID 100+i;
// BIRD holds the mirror image.
type key struct {
	i              int
	sendStart      time.Time // zero: since ever
	sendEnd        time.Time // zero: for ever
	acceptStart    time.Time
	acceptEnd      time.Time
	birdPreferred  bool
	birdDeprecated bool
	// excludeOpts sets tcp_options: exclude on A's side only (BIRD's keys
	// always include TCP options).
	excludeOpts bool
}

func secretOf(i int) []byte {
	s := sha256.Sum256([]byte("aokeyd e2e round " + strconv.Itoa(i)))
	return s[:20]
}

func (k key) sendID() uint8 { return uint8(k.i) }
func (k key) recvID() uint8 { return uint8(100 + k.i) }
func (k key) name() string  { return fmt.Sprintf("k%d", k.i) }

type lab struct {
	t        *testing.T
	dir      string
	a, b     *netns.NS
	gobgpPID int
	gobgp    *exec.Cmd
	gobgpAPI string
	gapi     api.GobgpApiClient
	speaker  bgp.Speaker
	aokeyd   *exec.Cmd
	ctl      *control.Client
	bird     *bird.Router
	keys     []key // A's key file, in order
	v6       bool
	binding  string
	// With a Vault key source: the Vault-compatible server (in this test
	// process, on 127.0.0.1) and a writer standing in for the operator's
	// automation. aokeyd then runs in the guest's root namespace to reach it.
	vault  *vaulttest.Server
	vwrite *keystore.VaultSource
	// metricsURL is aokeyd's metrics page: in A's namespace (fetched there
	// with wget) for a file source, in the guest's root namespace (on a
	// free port, fetched by the test itself) with Vault.
	metricsURL string
}

func bin(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not in PATH (the VM harness puts it there through AOKEYD_GUEST_BINS): %v", name, err)
	}
	return p
}

// newLab starts both routers. birdKeys is BIRD's initial key list (nil:
// take A's keys mirrored).
func newLab(t *testing.T, keys []key, birdKeys []key) *lab {
	t.Helper()
	return newLabWith(t, keys, birdKeys, labOptions{})
}

// newLabVault is newLab with router A's keys in Vault (KV v2) instead of a
// YAML file.
func newLabVault(t *testing.T, keys []key, birdKeys []key) *lab {
	t.Helper()
	return newLabWith(t, keys, birdKeys, labOptions{vault: true})
}

func newLabWith(t *testing.T, keys []key, birdKeys []key, o labOptions) *lab {
	t.Helper()
	l := &lab{t: t, dir: t.TempDir(), keys: keys, v6: o.v6, binding: o.binding}
	if o.vault {
		v, err := vaulttest.New(vaulttest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(v.Close)
		l.vault = v
		cfg := vaultapi.DefaultConfig()
		cfg.Address = v.URL()
		w, err := keystore.NewVault(keystore.VaultOptions{Config: cfg, Auth: keystore.VaultAuth{Token: v.RootToken()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		l.vwrite = w
		if err := os.WriteFile(filepath.Join(l.dir, "vault-token"), []byte(v.RootToken()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, f := range []string{"aokeyd.log", "gobgpd.log"} {
			b, _ := os.ReadFile(filepath.Join(l.dir, f))
			if len(b) > 400000 {
				b = b[len(b)-400000:]
			}
			t.Logf("%s (tail):\n%s", f, b)
		}
	})
	l.a = netns.New(t, nsName(t, "a"))
	l.b = netns.New(t, nsName(t, "b"))
	netns.Link(t, l.a, "veth-a", addrA.String()+"/30", l.b, "veth-b", addrB.String()+"/30")
	if l.v6 {
		// nodad: usable at once (no duplicate address detection wait).
		l.a.MustRun(t, "ip", "addr", "add", addrA6.String()+"/64", "dev", "veth-a", "nodad")
		l.b.MustRun(t, "ip", "addr", "add", addrB6.String()+"/64", "dev", "veth-b", "nodad")
	}

	l.writeKeys(keys)
	l.startGobgpd()
	l.startAokeyd()
	if birdKeys == nil {
		birdKeys = keys
	}
	l.bird = bird.Start(t, l.b, l.birdConfig(birdKeys))
	return l
}

// ipA and ipB are the routers' session addresses.
func (l *lab) ipA() netip.Addr {
	if l.v6 {
		return addrA6
	}
	return addrA
}

func (l *lab) ipB() netip.Addr {
	if l.v6 {
		return addrB6
	}
	return addrB
}

// neighbor is the policy binding's neighbor and the key chain's peers.
func (l *lab) neighbor() string {
	if l.binding != "" {
		return l.binding
	}
	return l.ipB().String()
}

func (l *lab) routes() (a, b []string) {
	if l.v6 {
		return routesA6, routesB6
	}
	return routesA, routesB
}

func (l *lab) writeKeys(keys []key) {
	l.t.Helper()
	l.keys = keys
	if l.vwrite != nil {
		l.writeVault(keys)
		return
	}
	// JSON is YAML: the key file gets the same chain document Vault does.
	doc, err := json.Marshal(map[string]any{"chains": map[string]json.RawMessage{"core": chainDocFor(keys, l.neighbor())}})
	if err != nil {
		l.t.Fatal(err)
	}
	p := filepath.Join(l.dir, "keys.yaml")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, doc, 0o600); err != nil {
		l.t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		l.t.Fatal(err)
	}
}

func jsonLifetime(start, end time.Time) any {
	if start.IsZero() && end.IsZero() {
		return "always"
	}
	m := map[string]string{}
	if !start.IsZero() {
		m["start"] = start.UTC().Format(time.RFC3339Nano)
	}
	if !end.IsZero() {
		m["end"] = end.UTC().Format(time.RFC3339Nano)
	}
	return m
}

// chainDoc is A's chain "core" as a key-source document (docs/keys.md).
func chainDoc(keys []key) json.RawMessage { return chainDocFor(keys, addrB.String()) }

// chainDocFor is chainDoc for the peers given (an address or a prefix).
func chainDocFor(keys []key, peers string) json.RawMessage {
	var ks []map[string]any
	for _, k := range keys {
		m := map[string]any{"name": k.name(), "send_id": k.sendID(), "recv_id": k.recvID(), "algorithm": "hmac(sha256)",
			"secret_hex": hex.EncodeToString(secretOf(k.i)), "send_lifetime": jsonLifetime(k.sendStart, k.sendEnd),
			"accept_lifetime": jsonLifetime(k.acceptStart, k.acceptEnd)}
		if k.excludeOpts {
			m["tcp_options"] = "exclude"
		}
		ks = append(ks, m)
	}
	doc, err := json.Marshal(map[string]any{"peers": []string{peers}, "keys": ks})
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return doc
}

// writeVault puts A's chain into Vault, as the operator's automation would.
func (l *lab) writeVault(keys []key) {
	l.t.Helper()
	if _, err := l.vwrite.WriteChain(context.Background(), "core", chainDocFor(keys, l.neighbor()), -1); err != nil {
		l.t.Fatalf("writing chain core to Vault: %v", err)
	}
}

func (l *lab) birdConfig(keys []key) bird.Config {
	_, rb := l.routes()
	cfg := bird.Config{
		RouterID: addrB.String(), LocalAddr: l.ipB().String(), LocalAS: asB,
		Neighbor: l.ipA().String(), PeerAS: asA, Routes: rb, HoldTime: 3, IPv6: l.v6,
	}
	for _, k := range keys {
		cfg.Keys = append(cfg.Keys, bird.Key{SendID: k.recvID(), RecvID: k.sendID(), Secret: secretOf(k.i),
			Algorithm: "hmac sha256", Preferred: k.birdPreferred, Deprecated: k.birdDeprecated})
	}
	return cfg
}

func (l *lab) startGobgpd() {
	t := l.t
	t.Helper()
	conf := fmt.Sprintf(`[global.config]
  as = %d
  router-id = %q
  port = 179
  local-address-list = [%q]

[[neighbors]]
  [neighbors.config]
    neighbor-address = %q
    peer-as = %d
  [neighbors.transport.config]
    passive-mode = true
  [neighbors.timers.config]
    connect-retry = 1
    hold-time = 3
    keepalive-interval = 1
    idle-hold-time-after-reset = 1
`, asA, addrA, l.ipA(), l.ipB(), asB)
	cfg := filepath.Join(l.dir, "gobgpd.toml")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(l.dir, "gobgpd.sock")
	l.gobgpAPI = "unix://" + sock
	_ = os.Remove(sock)
	cmd := l.a.Start(t, filepath.Join(l.dir, "gobgpd.log"), bin(t, "gobgpd"), "-f", cfg, "-t", "toml", "--api-hosts", l.gobgpAPI, "--pprof-disable")
	l.gobgp = cmd
	l.gobgpPID = cmd.Process.Pid // ip netns exec execs gobgpd in place
	if err := os.WriteFile(filepath.Join(l.dir, "gobgpd.pid"), []byte(strconv.Itoa(l.gobgpPID)), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "gobgpd API socket", func() (bool, string) {
		_, err := os.Stat(sock)
		return err == nil, fmt.Sprint(err)
	})
	conn, err := grpc.NewClient(l.gobgpAPI, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	l.gapi = api.NewGobgpApiClient(conn)
	sp, closer, err := bgpgobgp.Dial(l.gobgpAPI, bgpgobgp.Options{Name: "gobgpd", PID: func(context.Context) (int, error) { return l.gobgpPID, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	l.speaker = sp
	ra, _ := l.routes()
	for _, r := range ra {
		l.announce(r)
	}
}

// restartGobgpd kills gobgpd and starts it again (a new pid, new sockets).
func (l *lab) restartGobgpd() {
	_ = l.gobgp.Process.Kill()
	_, _ = l.gobgp.Process.Wait()
	l.startGobgpd()
}

func (l *lab) announce(prefix string) {
	p := netip.MustParsePrefix(prefix)
	nlri, _ := anypb.New(&api.IPAddressPrefix{Prefix: p.Addr().String(), PrefixLen: uint32(p.Bits())})
	origin, _ := anypb.New(&api.OriginAttribute{Origin: 0})
	fam := l.family()
	nh, _ := anypb.New(&api.NextHopAttribute{NextHop: addrA.String()})
	if l.v6 { // IPv6 unicast carries its next hop in MP_REACH_NLRI
		nh, _ = anypb.New(&api.MpReachNLRIAttribute{Family: fam, NextHops: []string{addrA6.String()}, Nlris: []*anypb.Any{nlri}})
	}
	req := &api.AddPathRequest{
		TableType: api.TableType_GLOBAL,
		Path:      &api.Path{Family: fam, Nlri: nlri, Pattrs: []*anypb.Any{origin, nh}},
	}
	// The API socket appears before gobgpd's server has read its config.
	waitFor(l.t, 20*time.Second, "gobgpd to take a route ("+prefix+")", func() (bool, string) {
		_, err := l.gapi.AddPath(context.Background(), req)
		return err == nil, fmt.Sprint(err)
	})
}

// family is the session's address family at gobgpd.
func (l *lab) family() *api.Family {
	if l.v6 {
		return &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
	}
	return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
}

// startAokeyd runs the daemon under test in A's namespace, with the YAML key
// file source and a policy binding B to chain "core".
func (l *lab) startAokeyd() {
	t := l.t
	t.Helper()
	policy := fmt.Sprintf(`version: 1
key_chains:
  - name: core
safety:
  switch_timeout: 15s
  on_switch_timeout: retry
  retry_after: 2s
  on_revoke_only_key: reset
peers:
  - neighbor: %s
    key_chain: core
`, l.neighbor())
	source := "  type: file\n  refresh: 1s\n  file:\n    path: keys.yaml\n"
	metricsListen := "127.0.0.1:9179" // inside A's namespace: one per lab
	if l.vault != nil {
		source = fmt.Sprintf("  type: vault\n  refresh: 1s\n  vault:\n    address: %q\n    auth:\n      method: token\n      token_file: vault-token\n", l.vault.URL())
		// aokeyd runs in the guest's root namespace here: a free port.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		metricsListen = ln.Addr().String()
		ln.Close()
	}
	l.metricsURL = "http://" + metricsListen + "/metrics"
	cfg := fmt.Sprintf(`key_source:
%spolicy:
  path: policy.yaml
gobgp:
  address: %q
  pid_file: gobgpd.pid
control:
  socket: control.sock
metrics:
  listen: %s
log:
  format: json
  level: debug
`, source, l.gobgpAPI, metricsListen)
	for name, data := range map[string]string{"policy.yaml": policy, "aokeyd.yaml": cfg} {
		if err := os.WriteFile(filepath.Join(l.dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l.ctl = control.NewClient(filepath.Join(l.dir, "control.sock"), 10*time.Second)
	l.restartAokeyd()
}

func (l *lab) restartAokeyd() {
	t := l.t
	t.Helper()
	if l.aokeyd != nil {
		_ = l.aokeyd.Process.Kill()
		_, _ = l.aokeyd.Process.Wait()
	}
	args := []string{"-config", filepath.Join(l.dir, "aokeyd.yaml"), "-state-dir", filepath.Join(l.dir, "state"),
		"-roll-grace", "2s", "-roll-poll", "250ms", "-roll-backoff", "2s"}
	if l.vault != nil {
		// The guest's root namespace, where the Vault server listens; gobgpd
		// is reached through its unix API socket and pidfd, from anywhere.
		l.aokeyd = netns.StartCmd(t, filepath.Join(l.dir, "aokeyd.log"), exec.Command(bin(t, "aokeyd"), args...))
	} else {
		l.aokeyd = l.a.Start(t, filepath.Join(l.dir, "aokeyd.log"), bin(t, "aokeyd"), args...)
	}
	proc := l.aokeyd.Process
	t.Cleanup(func() {
		if t.Failed() { // goroutine dump into aokeyd.log before it is killed
			_ = proc.Signal(syscall.SIGQUIT)
			time.Sleep(time.Second)
		}
	})
	waitFor(t, 20*time.Second, "aokeyd control socket", func() (bool, string) {
		_, err := l.ctl.Health(context.Background())
		return err == nil, fmt.Sprint(err)
	})
}

// peerA is gobgpd's view of B.
func (l *lab) peerA() bgp.PeerInfo {
	ps, err := l.speaker.Peers(context.Background())
	if err != nil {
		l.t.Fatalf("gobgpd ListPeer: %v", err)
	}
	for _, p := range ps {
		if p.Neighbor == l.ipB() {
			return p
		}
	}
	l.t.Fatalf("gobgpd has no neighbor %s", l.ipB())
	return bgp.PeerInfo{}
}

func (l *lab) routesAtA() int {
	r, err := l.gapi.GetTable(context.Background(), &api.GetTableRequest{TableType: api.TableType_GLOBAL, Family: l.family()})
	if err != nil {
		l.t.Fatalf("gobgpd GetTable: %v", err)
	}
	return int(r.NumDestination)
}

func (l *lab) status() control.PeerStatus {
	l.t.Helper()
	st, err := l.tryStatus()
	if err != nil {
		l.t.Fatal(err)
	}
	return st
}

// tryStatus is status that tolerates a daemon being restarted.
func (l *lab) tryStatus() (control.PeerStatus, error) {
	rep, err := l.ctl.Status(context.Background(), l.ipB().String())
	if err != nil {
		return control.PeerStatus{}, fmt.Errorf("aoctl status: %w", err)
	}
	if len(rep.Peers) != 1 {
		return control.PeerStatus{}, fmt.Errorf("aoctl status: %d peers", len(rep.Peers))
	}
	return rep.Peers[0], nil
}

// listenerKeys reads gobgpd's listening sockets' keys straight from the
// kernel (through a pidfd_getfd duplicate), independently of aokeyd.
func (l *lab) listenerKeys() []tcpao.KeyInfo {
	refs, err := sockets.System{}.Listeners(l.gobgpPID, 179)
	if err != nil {
		l.t.Fatalf("gobgpd listeners: %v", err)
	}
	var out []tcpao.KeyInfo
	for _, r := range refs {
		err := sockets.System{}.With(r, func(fd int) error {
			ks, err := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{})
			out = append(out, ks...)
			return err
		})
		if err != nil && !strings.Contains(err.Error(), "no such file") {
			l.t.Fatalf("listener %s keys: %v", r, err)
		}
	}
	return out
}

// session is what must never change while rotations run.
type session struct {
	uptime    time.Time
	flops     uint32
	birdSince string
}

func (l *lab) waitEstablished(timeout time.Duration) session {
	l.t.Helper()
	var s session
	waitFor(l.t, timeout, "session established on both sides with all routes", func() (bool, string) {
		p := l.peerA()
		st, err := l.bird.Protocol()
		if err != nil {
			return false, err.Error()
		}
		rb, _ := l.bird.Routes()
		ra := l.routesAtA()
		s = session{uptime: p.Uptime, flops: p.Flops, birdSince: st.Since}
		ok := p.Established() && st.BGPState == "Established" && rb == len(routesA) && ra >= len(routesA)+len(routesB)
		return ok, fmt.Sprintf("gobgpd %s, bird %s (%s), routes at B %d, at A %d", p.State, st.BGPState, st.LastError, rb, ra)
	})
	return s
}

// checkNoFlap fails the test when the session went down since s.
func (l *lab) checkNoFlap(s session, when string) {
	l.t.Helper()
	p := l.peerA()
	st, err := l.bird.Protocol()
	if err != nil {
		l.t.Fatal(err)
	}
	if !p.Established() || p.Uptime != s.uptime || p.Flops != s.flops {
		l.t.Fatalf("%s: gobgpd session flapped: state %s uptime %v (was %v) flops %d (was %d)", when, p.State, p.Uptime, s.uptime, p.Flops, s.flops)
	}
	if st.BGPState != "Established" || st.Since != s.birdSince {
		l.t.Fatalf("%s: BIRD session flapped: %s since %s (was %s)", when, st.BGPState, st.Since, s.birdSince)
	}
	rb, err := l.bird.Routes()
	if err != nil || rb != len(routesA) {
		l.t.Fatalf("%s: BIRD has %d routes from A (want %d): %v", when, rb, len(routesA), err)
	}
	if ra := l.routesAtA(); ra < len(routesA)+len(routesB) {
		l.t.Fatalf("%s: gobgpd has %d routes (want %d)", when, ra, len(routesA)+len(routesB))
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// nsName names a test's namespace uniquely, so the scenarios can run in
// parallel (addresses may repeat: each pair of namespaces is its own world).
func nsName(t *testing.T, side string) string {
	return fmt.Sprintf("ao%08x-%s", crc32.ChecksumIEEE([]byte(t.Name())), side)
}
