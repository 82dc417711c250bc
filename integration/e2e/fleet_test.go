package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/fleet"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
	"github.com/aokeyd/aokeyd/keystore/vaulttest"
)

// The fleet lab: eight gobgpd routers, each started through `aokeyd exec`
// with its own aokeyd (keys from its own prefix in one Vault, fleet status
// published to secret/aokeyd/fleet), in a ring of sessions both of whose
// ends connect actively; and two BIRD routers hanging off g1 and g4
// (passive neighbors there). Ten routers, ten links, every one TCP-AO.
// BIRD publishes nothing: its links are one-ended in the fleet view.

const fleetRefresh = time.Second

// aokeydRouters is how many of the fleet's routers run aokeyd (a ring of
// gobgpd routers; an even number, so that every ring link pairs an odd
// and an even router).
const aokeydRouters = 8

type fleetLink struct {
	a, b string // router names; b may be a BIRD router
	n    int    // 10.254.n.0/30: a has .1, b has .2
}

var fleetLinks = []fleetLink{
	{"g1", "g2", 1}, {"g2", "g3", 2}, {"g3", "g4", 3}, {"g4", "g5", 4}, {"g5", "g6", 5}, {"g6", "g7", 6},
	{"g7", "g8", 7}, {"g8", "g1", 8},
	{"g1", "b1", 9}, {"g4", "b2", 10},
}

func linkAddrs(n int) (netip.Addr, netip.Addr) {
	return netip.AddrFrom4([4]byte{10, 254, byte(n), 1}), netip.AddrFrom4([4]byte{10, 254, byte(n), 2})
}

// fleetKey is one key of every router's chain "core"; the odd routers send
// with ids[0] and receive ids[1], the even ones (and the BIRD ends of odd
// routers) the mirror image. The ring has an even number of routers, so every link pairs
// an odd and an even router.
type fleetKey struct {
	name  string
	ids   [2]uint8
	start time.Duration // send lifetime start, from the lab's start
	i     int           // secretOf
}

type fleetRouter struct {
	name  string
	odd   bool
	ns    *netns.NS
	dir   string
	as    uint32
	addrs []netip.Addr
	peers []netip.Addr // neighbor addresses
	ctl   *control.Client
}

func (r *fleetRouter) ids(k fleetKey) (send, recv uint8) {
	if r.odd {
		return k.ids[0], k.ids[1]
	}
	return k.ids[1], k.ids[0]
}

func TestFleetStatusAndRevoke(t *testing.T) {
	kerneltest.Require(t)
	// Not parallel: it measures latencies against the refresh interval
	// (the revoke clean within one refresh plus 1 s, the lagging link
	// flagged within one refresh) with fourteen processes of its own, and
	// beside three other scenarios in the two emulated vCPUs it measured
	// their CPU, not its own (1.3 s of flag lag against 0.1 s alone). The
	// guest run takes it alone, before the lanes (AOKEYD_ALONE): beside
	// the other lane's packages its revoke measured 2,523 ms against the
	// 2,000 ms bound, every router late to read the record.
	start := time.Now()
	var phases []string // the set-up's phases, each with its time since the start
	mark := func(what string) {
		phases = append(phases, fmt.Sprintf("%s %s", what, time.Since(start).Round(time.Millisecond)))
	}
	v, err := vaulttest.New(vaulttest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	cfg := vaultapi.DefaultConfig()
	cfg.Address = v.URL()
	vc, err := vaultapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	vc.SetToken(v.RootToken())
	mark("Vault")

	t0 := time.Now().UTC()
	keys := []fleetKey{{"old", [2]uint8{11, 12}, -2 * time.Hour, 201}, {"k1", [2]uint8{1, 2}, -time.Hour, 202}}
	lagKey := fleetKey{"k2", [2]uint8{21, 22}, 0, 203}

	routers := map[string]*fleetRouter{}
	names := []string{"g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8", "b1", "b2"}
	for i, n := range names {
		routers[n] = &fleetRouter{name: n, odd: i%2 == 0 && i < aokeydRouters, ns: netns.New(t, lab.NSName(t, n)), dir: t.TempDir(), as: uint32(65101 + i)}
	}
	mark("namespaces")
	for _, l := range fleetLinks {
		a, b := routers[l.a], routers[l.b]
		aa, ba := linkAddrs(l.n)
		netns.Link(t, a.ns, fmt.Sprintf("l%d-%s", l.n, l.a), aa.String()+"/30", b.ns, fmt.Sprintf("l%d-%s", l.n, l.b), ba.String()+"/30")
		a.addrs, a.peers = append(a.addrs, aa), append(a.peers, ba)
		b.addrs, b.peers = append(b.addrs, ba), append(b.peers, aa)
	}
	mark("links")
	// The BIRD ends mirror the gobgpd router they hang off.
	routers["b1"].odd, routers["b2"].odd = !routers["g1"].odd, !routers["g4"].odd

	writeChain := func(r *fleetRouter, ks []fleetKey) {
		t.Helper()
		var kd []map[string]any
		for _, k := range ks {
			s, rc := r.ids(k)
			kd = append(kd, map[string]any{"name": k.name, "send_id": s, "recv_id": rc, "algorithm": "hmac(sha256)",
				"secret_hex": hex.EncodeToString(secretOf(k.i)), "send_lifetime": map[string]any{"start": t0.Add(k.start).Format(time.RFC3339)}})
		}
		var peers []string
		for _, p := range r.peers {
			peers = append(peers, p.String())
		}
		if _, err := vc.KVv2("secret").Put(context.Background(), "aokeyd/"+r.name+"/chains/core", map[string]any{"peers": peers, "keys": kd}); err != nil {
			t.Fatal(err)
		}
	}
	tokenFile := filepath.Join(t.TempDir(), "vault-token")
	if err := os.WriteFile(tokenFile, []byte(v.RootToken()), 0o600); err != nil {
		t.Fatal(err)
	}
	gobgp := names[:aokeydRouters]
	nbrs := map[string][]lab.Neighbor{}
	for _, n := range gobgp {
		writeChain(routers[n], keys)
		nbrs[n] = writeFleetRouter(t, routers[n], routers, v.URL(), tokenFile)
	}
	// BIRD first (it answers birdc within 20s on an idle guest), with the
	// key block `aoctl peer-config --for bird` renders from the config of
	// the gobgpd router it hangs off; then the gobgpd routers. Each group
	// starts side by side: beside the other lane's packages the guest's
	// process start-ups took most of this test's time one after another
	// (210 s against 42 s alone, links up 200 s after the start).
	mark("chains")
	birds := []string{"b1", "b2"}
	lab.All(t, len(birds), func(i int) {
		r := routers[birds[i]]
		far := routers[map[string]string{"b1": "g1", "b2": "g4"}[r.name]]
		bird.Start(t, r.ns, bird.Config{RouterID: r.addrs[0].String(), LocalAddr: r.addrs[0].String(), LocalAS: r.as,
			Neighbor: r.peers[0].String(), PeerAS: far.as, Auth: fleetPeerConfigBird(t, far, r),
			Routes: []string{fmt.Sprintf("198.18.%d.0/24", r.as%256)}, HoldTime: 9})
	})
	mark("BIRD")
	lab.All(t, len(gobgp), func(i int) { startFleetRouter(t, routers[gobgp[i]], nbrs[gobgp[i]]) })
	mark("gobgpd and aokeyd")
	aoctl := func(args ...string) ([]byte, error) {
		cmd := exec.Command(lab.MustBin(t, "aoctl"), args...)
		cmd.Env = append(os.Environ(), "VAULT_ADDR="+v.URL(), "VAULT_TOKEN="+v.RootToken(), "AOKEYD_FLEET_PATH=secret/aokeyd/fleet", "USER=fleet-test")
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil && errb.Len() > 0 {
			err = fmt.Errorf("%w: %s", err, errb.String())
		}
		return out, err
	}
	status := func() ([]fleet.Link, error) {
		out, err := aoctl("fleet", "status", "--json")
		var rep struct{ Links []fleet.Link }
		if jerr := json.Unmarshal(out, &rep); jerr != nil {
			return nil, fmt.Errorf("aoctl fleet status: %v (%v)", jerr, err)
		}
		return rep.Links, nil
	}

	// Every link up with TCP-AO, seen from both ends (one end for BIRD's).
	lab.Eventually(t, 180*time.Second, "every link established with TCP-AO in aoctl fleet status", func() (bool, string) {
		links, err := status()
		if err != nil {
			return false, err.Error()
		}
		var bad []string
		two, one := 0, 0
		for _, l := range links {
			ends := []fleet.End{l.A}
			if l.B != nil {
				ends = append(ends, *l.B)
				two++
			} else {
				one++
				if !slices.ContainsFunc(l.Flags, func(f fleet.Flag) bool { return f.Kind == fleet.FarEndNotReporting }) {
					bad = append(bad, l.Name()+": one-ended but not flagged")
				}
			}
			for _, e := range ends {
				if e.Peer.Session != "established" || e.Peer.Counters.PktGood == 0 || e.Peer.Current != "core/k1" {
					bad = append(bad, fmt.Sprintf("%s at %s: %s current %q good %d", l.Name(), e.Router, e.Peer.Session, e.Peer.Current, e.Peer.Counters.PktGood))
				}
			}
		}
		if two != aokeydRouters || one != 2 {
			bad = append(bad, fmt.Sprintf("%d two-ended and %d one-ended links, want %d and 2", two, one, aokeydRouters))
		}
		return len(bad) == 0, strings.Join(bad, "; ")
	})
	mark("every link up with TCP-AO")
	t.Logf("set-up, each phase done at: %s", strings.Join(phases, ", "))
	table, _ := aoctl("fleet", "status")
	t.Logf("aoctl fleet status:\n%s", table)

	// Fleet revoke of core/old: recorded in Vault, applied by every aokeyd.
	out, err := aoctl("fleet", "revoke", "core/old", "--reason", "fleet guest proof", "--json", "--wait", "15s")
	// Durations in seconds, as in all of aoctl's --json output.
	var rep struct {
		Routers []struct {
			Router     string
			Seen       time.Time
			Clean      time.Time
			CleanAfter float64 `json:"clean_after"`
			Sockets    int
			Note       string
		}
		AllClean   bool    `json:"all_clean"`
		CleanAfter float64 `json:"clean_after"`
		Refresh    float64 `json:"refresh"`
	}
	if jerr := json.Unmarshal(out, &rep); jerr != nil || err != nil || !rep.AllClean {
		t.Fatalf("aoctl fleet revoke: %v %v\n%s", err, jerr, out)
	}
	ms := func(secs float64) int64 { return int64(secs * 1000) }
	// What failed after the set-up is reported last (see fleetLagFlagged).
	var missed []string
	for _, x := range rep.Routers {
		t.Logf("fleet revoke at %s: seen %s clean %s (%d ms after the write), %d sockets %s", x.Router,
			x.Seen.Format("15:04:05.000"), x.Clean.Format("15:04:05.000"), ms(x.CleanAfter), x.Sockets, x.Note)
	}
	for _, n := range gobgp {
		st, err := routers[n].ctl.Status(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range st.Peers {
			for _, k := range p.Keys {
				if k.Name == "old" {
					missed = append(missed, fmt.Sprintf("%s peer %s still holds core/old after the fleet revoke: %+v", n, p.Peer, k))
				}
			}
		}
	}
	fmt.Printf("fleet-revoke: routers=%d links=%d clean_ms=%d refresh_ms=%d\n", len(rep.Routers), len(fleetLinks), ms(rep.CleanAfter), ms(rep.Refresh))
	// The bound: one refresh (the routers' next read of the record) and
	// 1 s for the revoke itself, plus the slowest publisher round the
	// routers logged then (a round under way when the record changed
	// ends before the next reads it): tens of ms on a quiet machine;
	// on a loaded one, what it took (busy run 13: 2,519 ms, over 2 s).
	var logs []string
	for _, n := range gobgp {
		logs = append(logs, filepath.Join(routers[n].dir, "aokeyd.log"))
	}
	slowest := slowestFleetRound(logs).Milliseconds()
	if limit := ms(rep.Refresh) + 1000 + slowest; ms(rep.CleanAfter) > limit {
		missed = append(missed, fmt.Sprintf("fleet revoke clean after %d ms, want within one refresh + 1 s and the slowest round then, %d ms (%d ms)",
			ms(rep.CleanAfter), slowest, limit))
	}

	// g4 lags: every other gobgpd router's source gets k2, g4's never
	// does. Its links to g3 and g5 are flagged.
	written := time.Now()
	for _, n := range gobgp {
		if n != "g4" {
			writeChain(routers[n], append(slices.Clone(keys), lagKey))
		}
	}
	missed = append(missed, fleetLagFlagged(t, fleet.Store{V: fleet.Client{C: vc}, Mount: "secret", Prefix: "aokeyd/fleet"}, written, lagKey,
		func(r string) string { return filepath.Join(routers[r].dir, "aokeyd.log") })...)
	aoctlStart := time.Now()
	table, _ = aoctl("fleet", "status")
	t.Logf("aoctl fleet status with g4 lagging (the aoctl run took %s):\n%s", time.Since(aoctlStart).Round(time.Millisecond), table)
	t.Logf("fleet lab wall time %s", time.Since(start).Round(time.Millisecond))
	for _, m := range missed {
		t.Error(m)
	}
}

// writeFleetRouter writes a gobgpd router's policy and config (Vault key
// source under aokeyd/<name>, fleet status under secret/aokeyd/fleet) and
// returns its gobgpd neighbors.
func writeFleetRouter(t *testing.T, r *fleetRouter, all map[string]*fleetRouter, vaultURL, tokenFile string) []lab.Neighbor {
	t.Helper()
	var pol strings.Builder
	pol.WriteString("version: 1\nkey_chains:\n  - name: core\nsafety:\n  switch_timeout: 15s\n  on_switch_timeout: retry\n  retry_after: 2s\n  on_revoke_only_key: keep\npeers:\n")
	var nbrs []lab.Neighbor
	for _, p := range r.peers {
		fmt.Fprintf(&pol, "  - neighbor: %s\n    key_chain: core\n", p)
		var far *fleetRouter
		for _, o := range all {
			if slices.Contains(o.addrs, p) {
				far = o
			}
		}
		// Between two gobgpd routers the odd end connects and the even end
		// is passive; BIRD connects to a passive neighbor. With both ends
		// active, gobgpd v3 locked a link for the whole wait (CI on
		// 2c0361f g1 <-> g2, on a1ef83c g4 <-> g5): a collision at start
		// closes a connection in OpenSent, each end then holds Idle 5 s
		// (its fixed holdtimeIdle) and closes the other's accepted
		// connection there, and the two dial periods stay in step.
		// Active opens keyed on both ends are TestActiveOpensBothSides'.
		passive := strings.HasPrefix(far.name, "b") || (!r.odd && strings.HasPrefix(far.name, "g"))
		nbrs = append(nbrs, lab.Neighbor{Addr: p, AS: far.as, Passive: passive})
	}
	conf := fleetConfig(vaultURL, r.name, tokenFile, fmt.Sprintf("gobgp:\n  address: %q\n  pid_file: gobgpd.pid", "unix://"+filepath.Join(r.dir, "gobgpd.sock")),
		"off", "debug", r.addrs)
	for n, data := range map[string]string{"policy.yaml": pol.String(), "aokeyd.yaml": conf} {
		if err := os.WriteFile(filepath.Join(r.dir, n), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return nbrs
}

// fleetConfig is a fleet router's aokeyd.yaml: keys from Vault under
// aokeyd/NAME, status published to secret/aokeyd/fleet, the speaker
// section given, metrics on metrics ("off": none), logs at level.
func fleetConfig(vaultURL, name, tokenFile, speaker, metrics, level string, addrs []netip.Addr) string {
	var q []string
	for _, a := range addrs {
		q = append(q, fmt.Sprintf("%q", a.String()))
	}
	return fmt.Sprintf(`key_source:
  type: vault
  refresh: %s
  vault:
    address: %q
    prefix: aokeyd/%s
    auth:
      method: token
      token_file: %s
policy:
  path: policy.yaml
%s
control:
  socket: control.sock
metrics:
  listen: %q
log:
  format: json
  level: %s
fleet:
  vault_path: secret/aokeyd/fleet
  router_id: %s
  addresses: [%s]
`, fleetRefresh, vaultURL, name, tokenFile, speaker, metrics, level, name, strings.Join(q, ", "))
}

// startFleetRouter starts `aokeyd exec -- gobgpd` and its aokeyd
// (-connectguard) with the files writeFleetRouter wrote, in the guest's
// root namespace, where the Vault server listens.
func startFleetRouter(t *testing.T, r *fleetRouter, nbrs []lab.Neighbor) {
	t.Helper()
	lab.StartGobgpd(t, r.ns, "gobgpd", lab.GobgpdConfig{
		AS: r.as, RouterID: r.addrs[0], LocalAddrs: r.addrs, Neighbors: nbrs, HoldTime: 9, Keepalive: 3,
	}, lab.GobgpdOptions{Dir: r.dir, Launcher: []string{lab.MustBin(t, "aokeyd"), "exec", "-socket", filepath.Join(r.dir, "cg.sock"), "--"}})
	r.ctl = control.NewClient(filepath.Join(r.dir, "control.sock"), 10*time.Second)
	lab.StartAokeyd(t, nil, filepath.Join(r.dir, "aokeyd.log"), r.ctl,
		"-config", filepath.Join(r.dir, "aokeyd.yaml"), "-state-dir", filepath.Join(r.dir, "state"),
		"-connectguard", filepath.Join(r.dir, "cg.sock"), "-roll-grace", "2s", "-roll-poll", "250ms")
	// Registered after StartAokeyd's, so it runs first: the log's tail
	// before the goroutine dump StartAokeyd's cleanup asks for.
	t.Cleanup(func() {
		if t.Failed() {
			lab.Dump(t, "router "+r.name+" aokeyd.log (tail)", lab.Tail(filepath.Join(r.dir, "aokeyd.log"), 20000))
		}
	})
}

// fleetPeerConfigBird is BIRD router b's key block, as `aoctl peer-config
// --for bird --with-secrets` renders it from gobgpd router g's config.
func fleetPeerConfigBird(t *testing.T, g, b *fleetRouter) string {
	t.Helper()
	return peerConfigBird(t, g.name, g.dir, b.addrs[0], b.peers[0])
}

// peerConfigBird is the key block of the BIRD router at addr (local: its
// neighbor's address) that `aoctl peer-config --for bird --with-secrets`
// renders from the aokeyd.yaml in router name's dir.
func peerConfigBird(t *testing.T, name, dir string, addr, local netip.Addr) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(lab.MustBin(t, "aoctl"), "peer-config", addr.String(), "--for", "bird",
		"--config", filepath.Join(dir, "aokeyd.yaml"), "--local", local.String(), "--with-secrets")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("aoctl peer-config %s --for bird (%s's config): %v\n%s", addr, name, err, errb.String())
	}
	return out.String()
}
