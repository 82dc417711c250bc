package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/keystore/vaulttest"
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
	// gobgpV4 runs gobgpd v4.8.0 (its v4 API) instead of v3.37.
	gobgpV4 bool
	// speakerAPI is aokeyd's speaker.api ("": not set, detected).
	speakerAPI string
	// md5 is chain core's TCP-MD5 password ("": none): the link starts
	// on TCP-MD5, BIRD configured from aoctl peer-config.
	md5 string
}

type testbed struct {
	t     *testing.T
	dir   string
	a, b  *netns.NS
	gobgp *lab.Gobgpd
	rib   rib // gobgpd's global RIB through its API (v3 or v4)
	v4    bool
	// speakerAPI is aokeyd's speaker.api ("": not set).
	speakerAPI string
	md5        string // chain core's TCP-MD5 password ("": none)
	speaker    bgp.Speaker
	aokeyd     *exec.Cmd
	ctl        *control.Client
	bird       *bird.Router
	keys       []key // A's key file, in order
	v6         bool
	binding    string
	// With a Vault key source: the Vault-compatible server (in this test
	// process, on 127.0.0.1) and a writer standing in for the operator's
	// automation. aokeyd then runs in the guest's root namespace to reach it.
	vault  *vaulttest.Server
	vwrite *keystore.VaultSource
	// foreign are the IDs of keys a test installed on gobgpd's sockets as
	// another agent would (TestForeignKeys): roll leaves them out of its
	// "only the new key" checks.
	foreign map[[2]uint8]bool
	// hold is the BGP hold time both speakers are given, in seconds (0: the
	// lab's 3, keepalive 1; otherwise keepalive hold/3).
	hold int
	// metricsURL is aokeyd's metrics page: in A's namespace (fetched there
	// with wget) for a file source, in the guest's root namespace (on a
	// free port, fetched by the test itself) with Vault.
	metricsURL string
}

// newLab starts both routers. birdKeys is BIRD's initial key list (nil:
// A's keys as `aoctl peer-config --for bird` renders them).
func newLab(t *testing.T, keys []key, birdKeys []key) *testbed {
	t.Helper()
	return newLabWith(t, keys, birdKeys, labOptions{})
}

// newLabVault is newLab with router A's keys in Vault (KV v2) instead of a
// YAML file.
func newLabVault(t *testing.T, keys []key, birdKeys []key) *testbed {
	t.Helper()
	return newLabWith(t, keys, birdKeys, labOptions{vault: true})
}

func newLabWith(t *testing.T, keys []key, birdKeys []key, o labOptions) *testbed {
	t.Helper()
	l := &testbed{t: t, dir: t.TempDir(), keys: keys, v6: o.v6, binding: o.binding, v4: o.gobgpV4, speakerAPI: o.speakerAPI, md5: o.md5}
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
		if t.Failed() { // after aokeyd's goroutine dump (cleanups run last first)
			lab.Dump(t, "aokeyd.log (tail)", lab.Tail(l.aokeydLog(), 400000))
		}
	})
	l.a, l.b = lab.Pair(t, netip.PrefixFrom(addrA, 30), netip.PrefixFrom(addrB, 30))
	if l.v6 {
		// nodad: usable at once (no duplicate address detection wait).
		l.a.MustRun(t, "ip", "addr", "add", addrA6.String()+"/64", "dev", "veth-a", "nodad")
		l.b.MustRun(t, "ip", "addr", "add", addrB6.String()+"/64", "dev", "veth-b", "nodad")
	}

	l.writeKeys(keys)
	l.startGobgpd()
	l.startAokeyd()
	// BIRD holding A's keys is what `aoctl peer-config --for bird`
	// renders from A's config; a test that gives BIRD other keys (a
	// mismatch, a far end behind) writes them itself.
	bc := l.birdConfig(birdKeys)
	if birdKeys == nil {
		bc = l.birdFromA()
	}
	l.bird = bird.Start(t, l.b, bc)
	return l
}

// ipA and ipB are the routers' session addresses.
func (l *testbed) ipA() netip.Addr {
	if l.v6 {
		return addrA6
	}
	return addrA
}

func (l *testbed) ipB() netip.Addr {
	if l.v6 {
		return addrB6
	}
	return addrB
}

// neighbor is the policy binding's neighbor and the key chain's peers.
func (l *testbed) neighbor() string {
	if l.binding != "" {
		return l.binding
	}
	return l.ipB().String()
}

func (l *testbed) routes() (a, b []string) {
	if l.v6 {
		return routesA6, routesB6
	}
	return routesA, routesB
}

func (l *testbed) startGobgpd() {
	t := l.t
	t.Helper()
	l.gobgp = lab.StartGobgpd(t, l.a, "gobgpd", lab.GobgpdConfig{
		AS: asA, RouterID: addrA, LocalAddrs: []netip.Addr{l.ipA()},
		Neighbors: []lab.Neighbor{{Addr: l.ipB(), AS: asB, Passive: true}},
		HoldTime:  l.holdTime(), Keepalive: max(l.holdTime()/3, 1),
	}, lab.GobgpdOptions{Dir: l.dir, V4: l.v4})
	conn, err := grpc.NewClient(l.gobgp.API, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	l.rib = newRIB(conn, l.v4, l.v6)
	l.speaker = l.gobgp.Speaker
	ra, _ := l.routes()
	for _, r := range ra {
		l.announce(r)
	}
}

// holdTime is the hold time the lab's speakers are given (l.hold, else 3).
func (l *testbed) holdTime() int {
	if l.hold > 0 {
		return l.hold
	}
	return 3
}

// restartGobgpd kills gobgpd and starts it again (a new pid, new sockets).
func (l *testbed) restartGobgpd() {
	l.gobgp.Kill()
	l.startGobgpd()
}

func (l *testbed) announce(prefix string) {
	p := netip.MustParsePrefix(prefix)
	nh := addrA
	if l.v6 {
		nh = addrA6
	}
	// The API socket appears before gobgpd's server has read its config.
	lab.Eventually(l.t, 20*time.Second, "gobgpd to take a route ("+prefix+")", func() (bool, string) {
		err := l.rib.announce(context.Background(), p, nh)
		return err == nil, fmt.Sprint(err)
	})
}

// startAokeyd runs the daemon under test in A's namespace, with the YAML key
// file source and a policy binding B to chain "core".
func (l *testbed) startAokeyd() {
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
`, source, l.gobgp.API, metricsListen)
	if l.speakerAPI != "" {
		cfg += fmt.Sprintf("speaker:\n  type: gobgp\n  api: %s\n", l.speakerAPI)
	}
	for name, data := range map[string]string{"policy.yaml": policy, "aokeyd.yaml": cfg} {
		if err := os.WriteFile(filepath.Join(l.dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l.ctl = control.NewClient(filepath.Join(l.dir, "control.sock"), 10*time.Second)
	l.restartAokeyd()
}

// aokeydLog is the path of aokeyd's log (a restart starts it anew).
func (l *testbed) aokeydLog() string { return filepath.Join(l.dir, "aokeyd.log") }

func (l *testbed) restartAokeyd() {
	t := l.t
	t.Helper()
	if l.aokeyd != nil {
		_ = l.aokeyd.Process.Kill()
		_, _ = l.aokeyd.Process.Wait()
	}
	l.aokeyd = l.startAokeydWith()
}

// startAokeydWith starts aokeyd with the lab's arguments followed by
// extra (a flag given again overrides the lab's) and the lab's state
// directory.
func (l *testbed) startAokeydWith(extra ...string) *exec.Cmd {
	l.t.Helper()
	ns, args := l.aokeydArgs(extra...)
	return lab.StartAokeyd(l.t, ns, l.aokeydLog(), l.ctl, args...)
}

// aokeydArgs are the namespace aokeyd runs in and its arguments: the
// lab's followed by extra.
func (l *testbed) aokeydArgs(extra ...string) (*netns.NS, []string) {
	args := []string{"-config", filepath.Join(l.dir, "aokeyd.yaml"), "-state-dir", filepath.Join(l.dir, "state"),
		"-roll-grace", "2s", "-roll-poll", "250ms", "-roll-backoff", "2s"}
	args = append(args, extra...)
	ns := l.a
	if l.vault != nil {
		// The guest's root namespace, where the Vault server listens; gobgpd
		// is reached through its unix API socket and pidfd, from anywhere.
		ns = nil
	}
	return ns, args
}

// restartRefused kills aokeyd and starts it again where it must refuse to
// start (its key source holds what aoctl validate refuses: issue 47 item
// 5). It returns the error that says how aokeyd exited, with its log's
// tail, and leaves aokeyd down; the test fails if it started.
func (l *testbed) restartRefused() error {
	t := l.t
	t.Helper()
	if l.aokeyd != nil {
		_ = l.aokeyd.Process.Kill()
		_, _ = l.aokeyd.Process.Wait()
		l.aokeyd = nil
	}
	ns, args := l.aokeydArgs()
	cmd, err := lab.StartAokeydOrExit(t, ns, l.aokeydLog(), l.ctl, args...)
	if cmd != nil {
		l.aokeyd = cmd
		t.Fatal("aokeyd started on a key source aoctl validate refuses")
	}
	if !errors.Is(err, lab.ErrExited) {
		t.Fatalf("aokeyd neither started nor exited: %v", err)
	}
	return err
}
