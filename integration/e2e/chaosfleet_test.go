package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/aokeyd/aokeyd/bgp"
	bgpfrr "github.com/aokeyd/aokeyd/bgp/frr"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/chaos"
	"github.com/aokeyd/aokeyd/integration/frr"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/birdnative"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
)

// The chaos fleet, nine routers: a ring of six under aokeyd, each session
// opened by its odd end (g1, g3, g4, g5: gobgpd v3; g2: gobgpd
// v4 through its v4 API; f1: FRR's bgpd started by watchfrr through
// bgpd_wrap under `aokeyd exec`), n1 (BIRD keyed by aokeyd's native
// driver) off g3, and two plain BIRD routers off g1 and g4 (BIRD connects
// to a passive neighbor there). Every aokeyd reads its keys from its own
// prefix of one Vault test server and publishes its fleet document
// there. The ring's links and n1's share chain "core", which the scenario
// rotates; the plain BIRD links use chain "edge", whose key BIRD's
// configuration holds (rendered by aoctl peer-config) and which is never
// rotated.
type chaosRouter struct {
	name  string
	kind  speakerKind
	odd   bool
	ns    *netns.NS
	dir   string
	as    uint32
	addrs []netip.Addr
	peers []netip.Addr
	links []int
	ctl   *control.Client
	nbrs  []lab.Neighbor
	// metrics is aokeyd's metrics address (the guest's root namespace).
	metrics string

	mu      sync.Mutex
	gobgp   *lab.Gobgpd // nil while killed
	aokeyd  *exec.Cmd   // nil while killed
	down    bool        // the speaker is killed (FRR, BIRD)
	br      *bird.Router
	birdCfg bird.Config
	fr      *frr.Router
	logged  bool // its log's tail is printed on failure
	// rebind is held (written) while BIRD re-binds its listener after
	// the harness restarts its protocol, and read around each read of
	// the listener's keys: BIRD disables a protocol whose new listener
	// cannot bind, and a duplicate of the old one (pidfd_getfd, held for
	// the read) keeps it listening (TestBIRDRestartWhileListenerHeld).
	rebind sync.RWMutex
}

type speakerKind int

const (
	gobgpV3 speakerKind = iota
	gobgpV4
	frrBgpd
	birdNative
	birdPlain
)

// managed: the router runs aokeyd.
func (r *chaosRouter) managed() bool { return r.kind != birdPlain }

// chaosKey is the fleet's key number seq of chain core.
type chaosKey struct {
	seq     int
	created time.Time
}

func (k chaosKey) name() string { return fmt.Sprintf("k%d", k.seq) }

// ids are the odd routers' send and receive IDs (the even ones mirror
// them); 100 slots, so IDs come back only long after their key left.
func (k chaosKey) ids() [2]uint8 {
	s := uint8(k.seq % 100)
	return [2]uint8{10 + 2*s, 11 + 2*s}
}

// edgeIDs are the BIRD links' key's IDs (chain edge, key e1).
var edgeIDs = [2]uint8{240, 241}

type chaosFleet struct {
	t     *testing.T
	seed  uint64
	v     chaosVault
	vc    *vaultapi.Client
	token string // file
	rs    map[string]*chaosRouter
	names []string // every router, in order
	links []fleetLink

	mu sync.Mutex
	// keys are chain core's keys, oldest first; the source holds the
	// last three.
	keys []chaosKey
	// revoked: by router, the keys revoked there (fleet revokes under
	// every aokeyd router).
	revoked map[string]map[string]bool
	// pending are the routers whose chain core the scenario could not
	// write yet (Vault failing); edited are those whose chain a
	// key-source fault holds edited.
	pending map[string]bool
	edited  map[string]chaos.Kind
	// seen is the sampler's last reading of each aokeyd router's
	// sockets: where ("listener", or "session ADDR") to key names.
	seen map[string]map[string][]string
	// secrets are every key secret the run made (hex), for the log scan.
	secrets [][]byte
}

func (f *chaosFleet) secret(seq int) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], f.seed)
	s := sha256.Sum256(append(b[:], fmt.Sprintf("chaos key %d", seq)...))
	return s[:]
}

func (r *chaosRouter) ids(ids [2]uint8) (send, recv uint8) {
	if r.odd {
		return ids[0], ids[1]
	}
	return ids[1], ids[0]
}

// newChaosFleet builds and starts the fleet, every link up with TCP-AO.
func newChaosFleet(t *testing.T, seed uint64) *chaosFleet {
	t.Helper()
	v := newChaosVault(t)
	fmt.Printf("chaos: vault=%s\n", v.Name())
	cfg := vaultapi.DefaultConfig()
	cfg.Address = v.URL()
	cfg.MaxRetries = 0
	cfg.Timeout = 5 * time.Second
	vc, err := vaultapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	vc.SetToken(v.Token())
	f := &chaosFleet{t: t, seed: seed, v: v, vc: vc, rs: map[string]*chaosRouter{}, revoked: map[string]map[string]bool{},
		pending: map[string]bool{}, edited: map[string]chaos.Kind{}, seen: map[string]map[string][]string{}}
	f.token = filepath.Join(t.TempDir(), "vault-token")
	if err := os.WriteFile(f.token, []byte(v.Token()), 0o600); err != nil {
		t.Fatal(err)
	}
	f.names = []string{"g1", "g2", "g3", "g4", "f1", "g5", "n1", "b1", "b2"}
	f.links = []fleetLink{{"g1", "g2", 1}, {"g2", "g3", 2}, {"g3", "g4", 3}, {"g4", "f1", 4}, {"g5", "f1", 5}, {"g5", "g1", 6},
		{"g3", "n1", 7}, {"g1", "b1", 8}, {"g4", "b2", 9}}
	kinds := map[string]speakerKind{"g2": gobgpV4, "f1": frrBgpd, "n1": birdNative, "b1": birdPlain, "b2": birdPlain}
	for i, n := range f.names {
		r := &chaosRouter{name: n, kind: kinds[n], ns: netns.New(t, lab.NSName(t, "c"+n)),
			dir: t.TempDir(), as: uint32(65201 + i), metrics: fmt.Sprintf("127.0.0.1:%d", 9300+i)}
		f.rs[n] = r
		f.revoked[n] = map[string]bool{}
	}
	// The ring alternates odd and even routers; a leaf mirrors the router
	// it hangs off.
	for i, n := range []string{"g1", "g2", "g3", "g4", "f1", "g5"} {
		f.rs[n].odd = i%2 == 0
	}
	f.rs["n1"].odd, f.rs["b1"].odd, f.rs["b2"].odd = !f.rs["g3"].odd, !f.rs["g1"].odd, !f.rs["g4"].odd
	for _, l := range f.links {
		a, b := f.rs[l.a], f.rs[l.b]
		aa, ba := netip.AddrFrom4([4]byte{10, 253, byte(l.n), 1}), netip.AddrFrom4([4]byte{10, 253, byte(l.n), 2})
		netns.Link(t, a.ns, f.ifname(l, l.a), aa.String()+"/30", b.ns, f.ifname(l, l.b), ba.String()+"/30")
		a.addrs, a.peers, a.links = append(a.addrs, aa), append(a.peers, ba), append(a.links, l.n)
		b.addrs, b.peers, b.links = append(b.addrs, ba), append(b.peers, aa), append(b.links, l.n)
	}
	now := time.Now()
	f.keys = []chaosKey{{seq: 1, created: now.Add(-time.Hour)}}
	f.secrets = append(f.secrets, f.secret(0), f.secret(1))
	for _, n := range f.aokeydRouters() {
		r := f.rs[n]
		if err := f.writeCore(r, f.keys, ""); err != nil {
			t.Fatal(err)
		}
		f.writeEdge(r)
		f.writeRouter(r)
		// The state directory on a tmpfs of its own: the disk-full fault
		// fills it.
		st := filepath.Join(r.dir, "state")
		if err := os.MkdirAll(st, 0o700); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", st).CombinedOutput(); err != nil {
			t.Fatalf("mount a tmpfs on %s: %v: %s", st, err, out)
		}
		t.Cleanup(func() { _ = exec.Command("umount", "-l", st).Run() })
	}
	// Each group side by side (lab.All): the guest's process start-ups
	// overlap instead of adding up.
	birds := []string{"b1", "b2"}
	lab.All(t, len(birds), func(i int) {
		r := f.rs[birds[i]]
		far := f.rs[map[string]string{"b1": "g1", "b2": "g4"}[r.name]]
		r.birdCfg = bird.Config{RouterID: r.addrs[0].String(), LocalAddr: r.addrs[0].String(), LocalAS: r.as,
			Neighbor: r.peers[0].String(), PeerAS: far.as, Auth: peerConfigBird(t, far.name, far.dir, r.addrs[0], r.peers[0]),
			Routes: []string{fmt.Sprintf("198.18.%d.0/24", r.as%256)}, HoldTime: 9}
		r.br = bird.StartIn(t, r.ns, r.dir, r.birdCfg)
	})
	managed := f.aokeydRouters()
	lab.All(t, len(managed), func(i int) {
		r := f.rs[managed[i]]
		switch r.kind {
		case gobgpV3, gobgpV4:
			f.startGobgpd(r)
			f.startAokeyd(r)
		case frrBgpd, birdNative:
			// aokeyd first: under `aokeyd exec` bgpd's first connect
			// waits for aokeyd's connect supervisor; BIRD includes the
			// key file aokeyd writes.
			f.startAokeyd(r)
			f.startSpeaker(r)
		}
	})
	return f
}

func (f *chaosFleet) ifname(l fleetLink, r string) string { return fmt.Sprintf("c%d-%s", l.n, r) }

// aokeydRouters are the routers under aokeyd.
func (f *chaosFleet) aokeydRouters() []string {
	var out []string
	for _, n := range f.names {
		if f.rs[n].managed() {
			out = append(out, n)
		}
	}
	return out
}

// mkt is one key's Vault document for router r.
func (f *chaosFleet) mkt(r *chaosRouter, name string, ids [2]uint8, secret []byte, start time.Time) map[string]any {
	s, rc := r.ids(ids)
	return map[string]any{"name": name, "send_id": s, "recv_id": rc, "algorithm": "hmac(sha256)",
		"secret_hex": hex.EncodeToString(secret), "send_lifetime": map[string]any{"start": start.UTC().Format(time.RFC3339)}}
}

// corePeers are r's ring neighbors (chain core's peers).
func (f *chaosFleet) corePeers(r *chaosRouter) (core, edge []string) {
	for i, p := range r.peers {
		if l := f.link(r.links[i]); f.rs[l.a].kind == birdPlain || f.rs[l.b].kind == birdPlain {
			edge = append(edge, p.String())
		} else {
			core = append(core, p.String())
		}
	}
	return core, edge
}

func (f *chaosFleet) link(n int) fleetLink {
	for _, l := range f.links {
		if l.n == n {
			return l
		}
	}
	panic(fmt.Sprintf("no link %d", n))
}

// writeCore writes r's chain core with keys (edit: the key-source fault
// in force there, "" for none) into Vault.
func (f *chaosFleet) writeCore(r *chaosRouter, keys []chaosKey, edit chaos.Kind) error {
	core, _ := f.corePeers(r)
	var kd []map[string]any
	for _, k := range keys {
		kd = append(kd, f.mkt(r, k.name(), k.ids(), f.secret(k.seq), k.created.Add(-time.Second)))
	}
	kv := f.vc.KVv2("secret")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	path := "aokeyd/" + r.name + "/chains/core"
	switch edit {
	case chaos.KeyInvalid:
		// The newest key edited into one no parser takes: its secret
		// is not hex.
		kd[len(kd)-1]["secret_hex"] = "not-hex-at-all"
	case chaos.ChainEmptied:
		kd = []map[string]any{}
	case chaos.ChainRenamed:
		if err := kv.DeleteMetadata(ctx, path); err != nil {
			return err
		}
		path += "-renamed"
	}
	// Check-and-set on the version read first: a write that timed out
	// on the client side but reaches Vault late (a slow Vault answers
	// after the client gave up) must not land over a newer one.
	cur := 0
	md, err := kv.GetMetadata(ctx, path)
	switch {
	case err == nil:
		cur = md.CurrentVersion
	case !errors.Is(err, vaultapi.ErrSecretNotFound):
		return err
	}
	_, err = kv.Put(ctx, path, map[string]any{"peers": core, "keys": kd}, vaultapi.WithCheckAndSet(cur))
	return err
}

// unrename removes the renamed chain (ChainRenamed's end; writeCore then
// puts it back under its name).
func (f *chaosFleet) unrename(r *chaosRouter) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return f.vc.KVv2("secret").DeleteMetadata(ctx, "aokeyd/"+r.name+"/chains/core-renamed")
}

func (f *chaosFleet) writeEdge(r *chaosRouter) {
	_, edge := f.corePeers(r)
	if len(edge) == 0 {
		return
	}
	doc := map[string]any{"peers": edge, "keys": []map[string]any{f.mkt(r, "e1", edgeIDs, f.secret(0), time.Now().Add(-2*time.Hour))}}
	if _, err := f.vc.KVv2("secret").Put(context.Background(), "aokeyd/"+r.name+"/chains/edge", doc); err != nil {
		f.t.Fatal(err)
	}
}

// writeRouter writes r's policy and aokeyd configuration.
func (f *chaosFleet) writeRouter(r *chaosRouter) {
	t := f.t
	var pol strings.Builder
	core, edge := f.corePeers(r)
	// The edge chain only where the router has BIRD links (writeEdge
	// writes it to Vault only then): a policy naming a chain the key
	// source lacks is refused at start, as validate refuses it.
	chains := "  - name: core\n"
	if len(edge) > 0 {
		chains += "  - name: edge\n"
	}
	pol.WriteString("version: 1\nkey_chains:\n" + chains + "safety:\n  switch_timeout: 15s\n  on_switch_timeout: retry\n  retry_after: 2s\n  on_revoke_only_key: keep\npeers:\n")
	for _, p := range core {
		fmt.Fprintf(&pol, "  - neighbor: %s\n    key_chain: core\n", p)
	}
	for _, p := range edge {
		fmt.Fprintf(&pol, "  - neighbor: %s\n    key_chain: edge\n", p)
	}
	r.nbrs = nil
	for i, p := range r.peers {
		l := f.link(r.links[i])
		far := f.rs[l.a]
		if far == r {
			far = f.rs[l.b]
		}
		// One end opens each session: the odd router (a plain BIRD far
		// end always). With both ends active, gobgpd v3's FSM was seen to
		// livelock after a simultaneous reset (seed 2): each end closed
		// the other's accepted connection in IDLE ("Closed an accepted
		// connection"), their 5s connect ticks phase-locked, while TCP-AO
		// took every handshake (the listeners' pkt_good rising).
		r.nbrs = append(r.nbrs, lab.Neighbor{Addr: p, AS: far.as, Passive: far.kind == birdPlain || !r.odd})
	}
	conf := fleetConfig(f.v.URL(), r.name, f.token, f.speakerConfig(r), r.metrics, "info", r.addrs)
	for n, data := range map[string]string{"policy.yaml": pol.String(), "aokeyd.yaml": conf} {
		if err := os.WriteFile(filepath.Join(r.dir, n), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r.ctl = control.NewClient(filepath.Join(r.dir, "control.sock"), 10*time.Second)
}

// speakerConfig is aokeyd.yaml's speaker section for r.
func (f *chaosFleet) speakerConfig(r *chaosRouter) string {
	switch r.kind {
	case frrBgpd:
		return fmt.Sprintf("speaker:\n  type: frr\n  frr:\n    pathspace: %q\n    poll_interval: 250ms", f.pathspace())
	case birdNative:
		return fmt.Sprintf("speaker:\n  type: bird\n  bird:\n    control_socket: %s\n    keys_dir: %s\n    pid_file: %s\n    binary: bird\n    poll_interval: 250ms",
			filepath.Join(r.dir, "bird", "bird.ctl"), filepath.Join(r.dir, "bird-keys"), filepath.Join(r.dir, "bird", "bird.pid"))
	}
	return fmt.Sprintf("gobgp:\n  address: %q\n  pid_file: gobgpd.pid", "unix://"+filepath.Join(r.dir, "gobgpd.sock"))
}

// pathspace is FRR's pathspace for f1 (/run/frr/PATHSPACE, /etc/frr/PATHSPACE).
func (f *chaosFleet) pathspace() string { return fmt.Sprintf("chaos%d", os.Getpid()) }

// startSpeaker starts f1's FRR (watchfrr and its daemons) or n1's BIRD.
func (f *chaosFleet) startSpeaker(r *chaosRouter) {
	t := f.t
	switch r.kind {
	case frrBgpd:
		var nbrs []frr.Neighbor
		for i, p := range r.peers {
			nbrs = append(nbrs, frr.Neighbor{Addr: p, AS: r.nbrs[i].AS, Local: r.addrs[i], Passive: r.nbrs[i].Passive})
		}
		fr := frr.StartWatchfrr(t, r.ns, r.dir, f.pathspace(), frr.Config{AS: r.as, RouterID: r.addrs[0], LocalAddr: r.addrs[0],
			Neighbors: nbrs, HoldTime: 9}, filepath.Join(r.dir, "cg.sock"))
		fr.WaitUp(t)
		r.mu.Lock()
		r.fr = fr
		r.mu.Unlock()
	case birdNative:
		dir := filepath.Join(r.dir, "bird")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		nb := r.peers[0].String()
		lab.Eventually(t, 30*time.Second, "aokeyd writes BIRD's key file", func() (bool, string) {
			_, err := os.Stat(filepath.Join(r.dir, "bird-keys", birdnative.FileName(r.peers[0], "")))
			return err == nil, fmt.Sprint(err)
		})
		r.birdCfg = bird.Config{RouterID: r.addrs[0].String(), LocalAddr: r.addrs[0].String(), LocalAS: r.as,
			Neighbor: nb, PeerAS: r.nbrs[0].AS, Include: filepath.Join(r.dir, "bird-keys", birdnative.FileName(r.peers[0], "")), HoldTime: 9,
			Passive: !r.odd}
		_ = os.Remove(filepath.Join(dir, "bird.ctl"))
		br := bird.StartIn(t, r.ns, dir, r.birdCfg)
		r.mu.Lock()
		r.br, r.down = br, false
		r.mu.Unlock()
	}
}

// speakerPID is r's speaker's pid (0: killed or not found).
func (r *chaosRouter) speakerPID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.down:
		return 0
	case r.kind == gobgpV3 || r.kind == gobgpV4:
		if r.gobgp == nil {
			return 0
		}
		return r.gobgp.PID
	case r.kind == frrBgpd:
		pid, _ := bgpfrr.FindPID(r.fr.PIDFile(), "")
		return pid
	default:
		pid, _ := bgpfrr.FindPID(r.br.PIDFile(), "")
		return pid
	}
}

// startGobgpd starts r's gobgpd under `aokeyd exec` (again after a kill:
// a new process, new sockets).
func (f *chaosFleet) startGobgpd(r *chaosRouter) {
	t := f.t
	g := lab.StartGobgpd(t, r.ns, "gobgpd", lab.GobgpdConfig{
		AS: r.as, RouterID: r.addrs[0], LocalAddrs: r.addrs, Neighbors: r.nbrs, HoldTime: 9, Keepalive: 3,
	}, lab.GobgpdOptions{Dir: r.dir, V4: r.kind == gobgpV4, Launcher: []string{lab.MustBin(t, "aokeyd"), "exec", "-socket", filepath.Join(r.dir, "cg.sock"), "--"}})
	r.mu.Lock()
	r.gobgp = g
	r.mu.Unlock()
}

// startAokeyd starts r's aokeyd (again after a SIGKILL), its log
// appended to.
func (f *chaosFleet) startAokeyd(r *chaosRouter) {
	t := f.t
	if !r.logged {
		r.logged = true
		t.Cleanup(func() {
			if t.Failed() {
				lab.Dump(t, "router "+r.name+" aokeyd.log (info and above, last 40)", lab.InfoLines(filepath.Join(r.dir, "aokeyd.log"), 40))
			}
		})
	}
	cmd := lab.StartAokeyd(t, nil, filepath.Join(r.dir, "aokeyd.log"), r.ctl, f.aokeydArgs(r)...)
	r.mu.Lock()
	r.aokeyd = cmd
	r.mu.Unlock()
}

// aokeydArgs are r's aokeyd's arguments.
func (f *chaosFleet) aokeydArgs(r *chaosRouter) []string {
	args := []string{"-config", filepath.Join(r.dir, "aokeyd.yaml"), "-state-dir", filepath.Join(r.dir, "state"),
		"-roll-grace", "2s", "-roll-poll", "250ms"}
	if r.kind != birdNative {
		args = append(args, "-connectguard", filepath.Join(r.dir, "cg.sock"))
	}
	return args
}

// tryStartAokeyd starts r's aokeyd again after a kill, keeping the log
// of the one before (StartCmd truncates it): an error, and r's aokeyd not
// running, when aokeyd refuses to start (lab.ErrExited) or does not
// answer. It does not fail the test: the run tries again.
func (f *chaosFleet) tryStartAokeyd(r *chaosRouter) error {
	log := filepath.Join(r.dir, "aokeyd.log")
	_ = os.Rename(log, fmt.Sprintf("%s.%d", log, time.Now().UnixNano()))
	cmd, err := lab.StartAokeydOrExit(f.t, nil, log, r.ctl, f.aokeydArgs(r)...)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.aokeyd = cmd
	r.mu.Unlock()
	return nil
}

// sourceInvalid reports whether a key-source fault holds r's chain in a
// state aoctl validate refuses, which aokeyd refuses to start on.
func (f *chaosFleet) sourceInvalid(r *chaosRouter) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch f.edited[r.name] {
	case chaos.KeyInvalid, chaos.ChainEmptied, chaos.ChainRenamed:
		return true
	}
	return false
}

// speaker is r's gobgpd API (nil while gobgpd is killed).
func (r *chaosRouter) speaker() (bgp.Speaker, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gobgp == nil {
		return nil, 0
	}
	return r.gobgp.Speaker, r.gobgp.PID
}

// session samples end r's view of its session with peer p.
// (The scenario samples each link from its gobgpd end.)
func (r *chaosRouter) session(p netip.Addr) chaos.Session {
	sp, pid := r.speaker()
	if sp == nil {
		return chaos.Session{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	pi, err := sp.Peer(ctx, peer.KeyOf(p, ""))
	if err != nil || pi.State != bgp.StateEstablished {
		return chaos.Session{}
	}
	return chaos.Session{Up: true, Epoch: fmt.Sprintf("pid%d/up%d/flops%d", pid, pi.Uptime.Unix(), pi.Flops)}
}

// aoctl runs aoctl against the fleet's Vault.
func (f *chaosFleet) aoctl(args ...string) ([]byte, error) {
	cmd := exec.Command(lab.MustBin(f.t, "aoctl"), args...)
	cmd.Env = append(os.Environ(), "VAULT_ADDR="+f.v.URL(), "VAULT_TOKEN="+f.v.Token(), "AOKEYD_FLEET_PATH=secret/aokeyd/fleet", "USER=chaos")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil && errb.Len() > 0 {
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(errb.String()))
	}
	return out, err
}

// desired is what every socket of router r must hold once the fleet is
// quiet: core's keys in the source but those revoked there (on ring
// sessions and the listener) and edge's key (on BIRD sessions and the
// listener).
func (f *chaosFleet) desired(r string, ring bool) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	if ring {
		for _, k := range f.keys[max(0, len(f.keys)-3):] {
			if !f.revoked[r][k.name()] {
				out = append(out, k.name())
			}
		}
	} else {
		out = append(out, "e1")
	}
	slices.Sort(out)
	return out
}
