package daemon_test

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/durable"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// The test network: the speaker listens on 192.0.2.1:179, the managed
// neighbor is 192.0.2.2.
var (
	localAddr = netip.MustParseAddr("192.0.2.1")
	peerAddr  = netip.MustParseAddr("192.0.2.2")
	peerHost  = netip.PrefixFrom(peerAddr, 32)
	peerKey   = peer.KeyOf(peerAddr, "")
)

const (
	speakerPID = 4242
	bgpPort    = 179
	chainName  = "core"
)

// fakeDiscoverer names the in-memory sockets for the daemon, each wrapped
// in a countingSocket; the daemon reaches them through Options.SocketOf.
type fakeDiscoverer struct{ *bgptest.Discoverer }

func newFakeDiscoverer() *fakeDiscoverer {
	return &fakeDiscoverer{bgptest.NewDiscoverer(speakerPID, 1001)}
}

func (f *fakeDiscoverer) add(s *tcpaotest.Sock, local, remote netip.AddrPort, listening bool) *countingSocket {
	cs := &countingSocket{Socket: s}
	f.Add(cs, local, remote, listening)
	return cs
}

// socketOf is the daemon's Options.SocketOf.
func (f *fakeDiscoverer) socketOf(h bgp.SocketHandle) tcpao.Socket {
	if s := f.Socket(h.Ref().Inode); s != nil {
		return s
	}
	return badSocket{}
}

// BatchKeys is one borrow of the socket's descriptor, as bgp's AOSocket
// offers it: the calls f makes are counted as on the socket.
func (c *countingSocket) BatchKeys(f func(tcpao.Socket) error) error {
	c.held.Add(1)
	defer c.held.Add(-1)
	return f(c)
}

// ArmPeerProbe and EndPeerProbe pass the in-memory socket's keepalive
// probe through (tcpao.PeerProber), each a read of the socket.
func (c *countingSocket) ArmPeerProbe() (tcpao.PeerProbe, error) {
	c.count(false)
	return tcpao.ArmPeerProbe(c.Socket)
}

func (c *countingSocket) EndPeerProbe(p tcpao.PeerProbe) error {
	c.count(false)
	return tcpao.EndPeerProbe(c.Socket, p)
}

// countingSocket counts the calls the daemon makes on one socket.
type countingSocket struct {
	tcpao.Socket
	mu            sync.Mutex
	reads, writes int
	// fingerprinted counts the GET_KEYS reads that asked for the keys'
	// fingerprints (an HMAC of each secret), and wide those of them that
	// asked for every key's (no KeyFilter.Ref nor FingerprintIDs).
	fingerprinted, wide int
	// fpKeys counts the keys those reads fingerprinted with an HMAC on a
	// real kernel's answer: each one's, but those holding a secret the
	// read named (KeyFilter.Known, tcpao.Known.Covers).
	fpKeys int
	// stall, when set, is taken by the next Info call, which then waits
	// until it is closed (a kernel call that hangs).
	stall chan struct{}
	// failErr, when set, fails every AddKey and DelKey (failWrites).
	failErr error
	// held is how many borrows of this socket's descriptor are open now:
	// on bgp's sockets, how many duplicates of the speaker's descriptor
	// aokeyd holds.
	held atomic.Int32
}

func (c *countingSocket) count(write bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if write {
		c.writes++
	} else {
		c.reads++
	}
}

func (c *countingSocket) calls() (reads, writes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads, c.writes
}

func (c *countingSocket) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	c.count(true)
	if err := c.writeErr(); err != nil {
		return err
	}
	return c.Socket.AddKey(k, o)
}

func (c *countingSocket) DelKey(d tcpao.DelKey) error {
	c.count(true)
	if err := c.writeErr(); err != nil {
		return err
	}
	return c.Socket.DelKey(d)
}

// failWrites makes every AddKey and DelKey fail with err (nil: they run
// again): what the daemon plans for the socket stays pending meanwhile,
// so that a test reads the plan whatever the daemon's goroutines do.
func (c *countingSocket) failWrites(err error) {
	c.mu.Lock()
	c.failErr = err
	c.mu.Unlock()
}

func (c *countingSocket) writeErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failErr
}

func (c *countingSocket) SetInfo(i tcpao.InfoChange) error {
	c.count(true)
	return c.Socket.SetInfo(i)
}

func (c *countingSocket) Info() (tcpao.Info, error) {
	c.count(false)
	c.mu.Lock()
	st := c.stall
	c.stall = nil
	c.mu.Unlock()
	if st != nil {
		<-st
	}
	return c.Socket.Info()
}

func (c *countingSocket) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	c.count(false)
	if !f.SkipFingerprint {
		c.mu.Lock()
		c.fingerprinted++
		if f.Ref == nil && f.FingerprintIDs == nil {
			c.wide++
		}
		c.mu.Unlock()
	}
	ks, err := c.Socket.Keys(f)
	c.mu.Lock()
	for _, k := range ks {
		if f.Fingerprints(k.SendID, k.RecvID) && !f.Known.Covers(k.SendID, k.RecvID, k.Fingerprint) {
			c.fpKeys++
		}
	}
	c.mu.Unlock()
	return ks, err
}

// fingerprints is how many keys reads fingerprinted so far.
func (c *countingSocket) fingerprints() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fpKeys
}

// reads and fingerprinted reads so far.
func (c *countingSocket) keyReads() (reads, fingerprinted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads, c.fingerprinted
}

// wideReads is how many fingerprinted reads of every key there were so far.
func (c *countingSocket) wideReads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wide
}

type badSocket struct{}

var errBadSocket = errors.New("no such test socket")

func (badSocket) AddKey(tcpao.Key, tcpao.AddOptions) error      { return errBadSocket }
func (badSocket) DelKey(tcpao.DelKey) error                     { return errBadSocket }
func (badSocket) Info() (tcpao.Info, error)                     { return tcpao.Info{}, errBadSocket }
func (badSocket) SetInfo(tcpao.InfoChange) error                { return errBadSocket }
func (badSocket) Keys(tcpao.KeyFilter) ([]tcpao.KeyInfo, error) { return nil, errBadSocket }

// fakeSource is a keystore.Source serving a snapshot the test builds. Its
// Revoke only records the call: the snapshot stays unrevoked, like a source
// that has not caught up.
type fakeSource struct {
	mu   sync.Mutex
	snap *keystore.Snapshot
	md5  string // chain core's TCP-MD5 password, "" for none
	// md5Of are other chains' TCP-MD5 passwords (setChainMD5).
	md5Of   map[string]keystore.MD5Password
	version uint64
	err     error
	revokes []string
}

func (s *fakeSource) Name() string { return "fake-source" }

func (s *fakeSource) Read(context.Context) (*keystore.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	if s.snap == nil {
		return nil, errors.New("fake-source: empty")
	}
	c := s.snap.Clone()
	c.ReadAt = time.Now()
	return c, nil
}

func (s *fakeSource) Revoke(_ context.Context, chain, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revokes = append(s.revokes, chain+"/"+key)
	return nil
}

// setKeys replaces the chain's MKTs (a new version) and clears any failure.
func (s *fakeSource) setKeys(keys ...keystore.MKT) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	// Chain core is always there (maybe empty); a key of another chain
	// makes that chain.
	chains := map[string]*keystore.Chain{chainName: {Name: chainName, Version: s.version}}
	if s.md5 != "" {
		chains[chainName].MD5 = &keystore.MD5Password{Secret: tcpao.NewSecret([]byte(s.md5)),
			Peers: []netip.Prefix{netip.PrefixFrom(peerAddr, 32)}, Source: "test:md5"}
	}
	for name, pw := range s.md5Of {
		pw := pw
		pw.Secret = pw.Secret.Clone()
		chains[name] = &keystore.Chain{Name: name, Version: s.version, MD5: &pw}
	}
	for _, k := range keys {
		c := chains[k.Chain]
		if c == nil {
			c = &keystore.Chain{Name: k.Chain, Version: s.version}
			chains[k.Chain] = c
		}
		c.Keys = append(c.Keys, k.Clone())
	}
	s.snap.Zero()
	s.snap = &keystore.Snapshot{Source: s.Name(), Chains: chains}
	s.err = nil
}

// setChainMD5 gives chain name the TCP-MD5 password pw for peer, from the
// next setKeys on.
func (s *fakeSource) setChainMD5(name, pw string, peer netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.md5Of == nil {
		s.md5Of = map[string]keystore.MD5Password{}
	}
	s.md5Of[name] = keystore.MD5Password{Secret: tcpao.NewSecret([]byte(pw)), Peers: []netip.Prefix{netip.PrefixFrom(peer, 32)}, Source: "test:md5:" + name}
}

// setMD5 sets chain core's TCP-MD5 password ("": none) and keys.
func (s *fakeSource) setMD5(pw string, keys ...keystore.MKT) {
	s.mu.Lock()
	s.md5 = pw
	s.mu.Unlock()
	s.setKeys(keys...)
}

func (s *fakeSource) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *fakeSource) revokeCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.revokes)
}

func (s *fakeSource) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap.Zero()
}

// testKey is one MKT of the test chain with its plaintext secret, which
// tests grep for in logs and output.
type testKey struct {
	name       string
	send, recv uint8
	secret     string
	sendStart  time.Time // zero: since forever
	// acceptStart starts the accept lifetime (zero: since forever).
	acceptStart time.Time
	// end, when set, ends both lifetimes (send and accept) at that instant.
	end   time.Time
	chain string // empty: chainName
	// exclude: tcp_options exclude (the MAC does not cover other TCP
	// options); false is the key source's default, include.
	exclude bool
}

func (k testKey) mkt() keystore.MKT {
	chain := k.chain
	if chain == "" {
		chain = chainName
	}
	return keystore.MKT{
		Name: k.name, Chain: chain, SendID: k.send, RecvID: k.recv,
		Algorithm: tcpao.HMACSHA256, Secret: tcpao.NewSecret([]byte(k.secret)), MACLen: 12,
		IncludeTCPOptions: !k.exclude, SendLifetime: keystore.Lifetime{Start: k.sendStart, End: k.end},
		AcceptLifetime: keystore.Lifetime{Start: k.acceptStart, End: k.end},
		Source:         "test:" + k.name,
	}
}

// mirror is the key the remote router (192.0.2.2) holds for k.
func (k testKey) mirror() tcpao.Key {
	return tcpao.Key{
		KeyRef:    tcpao.KeyRef{Peer: netip.PrefixFrom(localAddr, 32), SendID: k.recv, RecvID: k.send},
		Algorithm: tcpao.HMACSHA256, MACLen: 12, Secret: tcpao.NewSecret([]byte(k.secret)), ExcludeOptions: k.exclude,
	}
}

func (k testKey) ids() string { return fmt.Sprintf("%d/%d", k.send, k.recv) }

// secretForms are the ways a leaked secret could appear in text.
func secretForms(secret string) []string {
	return []string{secret, hex.EncodeToString([]byte(secret)), base64.StdEncoding.EncodeToString([]byte(secret)),
		base64.RawStdEncoding.EncodeToString([]byte(secret))}
}

const basePolicy = `version: 1
safety:
  switch_timeout: 5m
  on_revoke_only_key: %s
key_chains:
  - name: core
peers:
  - neighbor: 192.0.2.2
    key_chain: core
`

func parsePolicy(t testing.TB, text string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("test-policy.yaml", []byte(text))
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return p
}

// env is one daemon over the in-memory kernel: a listener at 192.0.2.1:179
// and (after connect) a session from 192.0.2.2.
type env struct {
	t testing.TB
	// ownedFile is the daemon's ownership record, kept across restarts.
	ownedFile string
	net       *tcpaotest.Net
	sp        *bgptest.Speaker
	disc      *fakeDiscoverer
	src       *fakeSource
	logs      *testkit.SyncBuffer
	pol       *policy.Policy
	keys      []testKey

	lis     *tcpaotest.Sock
	lisC    *countingSocket
	client  *tcpaotest.Sock // the remote router's socket
	acc     *tcpaotest.Sock // the speaker's accepted socket
	accC    *countingSocket
	session bgp.PeerInfo

	refresh     time.Duration
	raiseOptMem func(pid, want int) (before, after int, err error)
	expedite    func() func()
	// source, when set, is the key source instead of src (a real file or
	// Vault source).
	source        keystore.Source
	metrics       *metrics.Metrics
	switchTimeout time.Duration
	changed       func()
	kernel        daemon.Kernel
	activeOpens   bool
	noPeerProbe   bool
	// writeFault is asked before each step of each write of the daemon's
	// records (injectWriteFault; nil: none).
	writeFault atomic.Pointer[durable.Fault]

	d      *daemon.Daemon
	cancel context.CancelFunc
	done   chan error
}

type envOptions struct {
	policy          string // "" is basePolicy with on_revoke_only_key: keep
	keys            []testKey
	sourceDown      error // the source fails from the start
	revocationsFile string
	// ownedFile is Options.OwnedKeysFile ("": one in the test's temporary
	// directory, kept across the env's restarts).
	ownedFile string
	refresh   time.Duration // key source reads (default 30s)
	// raiseOptMem is Options.RaiseOptMem (kernel.raise_optmem); nil: off.
	raiseOptMem func(pid, want int) (before, after int, err error)
	// expedite is Options.Expedite (kernel.expedite_rcu); nil: off.
	expedite      func() func()
	source        keystore.Source
	metrics       *metrics.Metrics
	switchTimeout time.Duration // the roll's wait for the peer (default 5s)
	changed       func()        // Options.Changed
	// refuse are algorithms the in-memory kernel refuses; Options.Kernel
	// is then its probe (set whenever refuse is).
	refuse []tcpao.Algorithm
	// activeOpens is Options.ActiveOpens (the speaker under aokeyd exec).
	activeOpens bool
	// release, when set, is the kernel's uname -r: Options.Kernel is then
	// daemon.NewKernel(release, nil) (every algorithm accepted).
	release string
	// noPeerProbe is kernel.keepalive_probe false: the far end sends
	// nothing the test does not send (the in-memory kernel answers a probe
	// at once).
	noPeerProbe bool
}

// Tests run it inside a synctest bubble (synctest.Test): the daemon, its
// key cache and its rotation machines then run on the bubble's clock
// through time.Now and timers, and waitFor and quiet use
// synctest.Wait as their synchronisation point. Only a benchmark, which
// measures real CPU time, runs it outside a bubble.
func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	if _, bench := t.(*testing.B); !bench {
		synctest.Wait() // panics outside a bubble: every test env runs in one
	}
	if o.policy == "" {
		o.policy = fmt.Sprintf(basePolicy, "keep")
	}
	e := &env{t: t, net: tcpaotest.NewNet(tcpaotest.WithoutAlgorithms(o.refuse...)), disc: newFakeDiscoverer(), src: &fakeSource{},
		logs: &testkit.SyncBuffer{}, pol: parsePolicy(t, o.policy), keys: o.keys}
	e.setSourceKeys(o.keys...)
	t.Cleanup(e.src.close)
	if o.sourceDown != nil {
		e.src.fail(o.sourceDown)
	}
	e.sp = bgptest.NewSpeaker("fake-speaker", speakerPID, 16, bgp.PeerInfo{Neighbor: peerAddr, Local: localAddr, State: bgp.StateActive, Passive: true, PeerASN: 65002})
	e.lis, e.lisC = listenOn(t, e.net, e.disc)
	t.Cleanup(func() {
		for _, k := range e.keys {
			for _, f := range secretForms(k.secret) {
				if strings.Contains(e.logs.String(), f) {
					t.Errorf("the daemon's log holds the secret of key %s", k.name)
				}
			}
		}
	})
	e.refresh = o.refresh
	e.ownedFile = cmp.Or(o.ownedFile, filepath.Join(t.TempDir(), "owned-keys.json"))
	e.raiseOptMem = o.raiseOptMem
	e.expedite = o.expedite
	e.source, e.metrics = o.source, o.metrics
	e.activeOpens, e.noPeerProbe = o.activeOpens, o.noPeerProbe
	e.switchTimeout = cmp.Or(o.switchTimeout, 5*time.Second)
	e.changed = o.changed
	if o.refuse != nil {
		e.kernel = daemon.Kernel{Release: "Linux 7.2.0-test", Algorithms: tcpao.ProbeAlgorithmsOn(func() (tcpao.Socket, func(), error) {
			s, err := e.net.Socket(localAddr)
			return s, func() { _ = s.Close() }, err
		}, netip.PrefixFrom(peerAddr, 32))}
	}
	if o.release != "" {
		e.kernel = daemon.NewKernel(o.release, nil)
	}
	e.start(o.revocationsFile)
	return e
}

// start builds a Daemon over a fresh key cache and runs it until the test
// ends (or stop).
// injectWriteFault has every write of the daemon's records ask fault
// before each of its steps (create, write, fsync, rename, fsync-dir); a
// non-nil answer fails that step. nil: none.
func (e *env) injectWriteFault(fault durable.Fault) {
	if fault == nil {
		e.writeFault.Store(nil)
		return
	}
	e.writeFault.Store(&fault)
}

func (e *env) start(revocationsFile string) {
	e.t.Helper()
	var src keystore.Source = e.src
	if e.source != nil {
		src = e.source
	}
	cache := keystore.NewCache(src, keystore.CacheOptions{})
	e.t.Cleanup(cache.Close)
	log := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := daemon.New(daemon.Options{
		Policy: e.pol, Keys: cache, Source: src, Speaker: e.sp, Discoverer: e.disc,
		ListenPort: bgpPort, ActiveOpens: e.activeOpens,
		Rotator: rotator.Config{SwitchTimeout: e.switchTimeout, Grace: 20 * time.Millisecond,
			Poll: 10 * time.Millisecond, Backoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, NoPeerProbe: e.noPeerProbe},
		Resync:          time.Hour, // full passes run on changes and kicks only
		Refresh:         e.refresh,
		RevocationsFile: revocationsFile,
		OwnedKeysFile:   e.ownedFile,
		CarriedKeysFile: filepath.Join(filepath.Dir(e.ownedFile), "carried-keys.json"),
		EarlyRollsFile:  filepath.Join(filepath.Dir(e.ownedFile), "early-rolls.json"),
		OptMemMax:       func() (int, error) { return e.net.OptMemMax(), nil },
		RaiseOptMem:     e.raiseOptMem,
		Expedite:        e.expedite,
		Logger:          log,
		Metrics:         e.metrics,
		SocketOf:        e.disc.socketOf,
		Changed:         e.changed,
		Kernel:          e.kernel,
		WriteFault: func(path, step string) error {
			if f := e.writeFault.Load(); f != nil {
				return (*f)(path, step)
			}
			return nil
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.d, e.cancel, e.done = d, cancel, make(chan error, 1)
	go func() { e.done <- d.Run(ctx) }()
	e.t.Cleanup(e.stop)
}

// stop cancels Run and waits for it to return.
func (e *env) stop() {
	e.t.Helper()
	if e.done == nil {
		return
	}
	e.cancel()
	select {
	case err := <-e.done:
		if err != nil {
			e.t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		e.t.Fatal("Run did not return after its context ended")
	}
	e.done = nil
}

// connect opens the remote router's connection with the mirrors of keys
// (added in order, so the last one is its Current_key and RNext_key) and
// registers the accepted socket with the discoverer.
func (e *env) connect(keys ...testKey) {
	e.t.Helper()
	var err error
	if e.client, err = e.net.Socket(peerAddr); err != nil {
		e.t.Fatal(err)
	}
	for _, k := range keys {
		m := k.mirror()
		if err := e.client.AddKey(m, tcpao.AddOptions{}); err != nil {
			e.t.Fatalf("client AddKey %s: %v", k.name, err)
		}
		m.Secret.Zero()
	}
	if e.acc, err = e.net.Connect(e.client, e.lis); err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	local := netip.AddrPortFrom(localAddr, bgpPort)
	e.accC = e.disc.add(e.acc, local, e.client.LocalAddr(), false)
}

// established reports the connected session Established to the daemon.
func (e *env) established() {
	e.session = e.sessionInfo()
	e.sp.Set(e.session)
}

// sessionInfo is the speaker's report of the connected session, Established.
func (e *env) sessionInfo() bgp.PeerInfo {
	return bgp.PeerInfo{Neighbor: peerAddr, Local: localAddr, LocalPort: bgpPort, RemotePort: e.client.LocalAddr().Port(),
		State: bgp.StateEstablished, Uptime: time.Now().Add(-time.Minute).Truncate(time.Second), Passive: true, PeerASN: 65002}
}

// waitFor lets the daemon run until cond holds (testkit.Until: cond is
// checked after synctest.Wait, and the bubble's clock moves on while it
// does not hold), and fails the test if it does not within 10s of the
// bubble's clock. A benchmark has no bubble: there the same wait runs on
// the real clock.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	const limit = 10 * time.Second
	ok := false
	if _, bench := e.t.(*testing.B); bench {
		for waited := time.Duration(0); waited < limit && !ok; waited += time.Millisecond {
			if ok = cond(); !ok {
				time.Sleep(time.Millisecond)
			}
		}
	} else {
		ok = testkit.Until(limit, cond)
	}
	if !ok {
		e.t.Fatalf("timed out waiting for %s\nlogs:\n%s", what, e.logs.String())
	}
}

// quiet lets d of the bubble's time pass and returns once every goroutine
// has done all it can: a "nothing else happened" check after it sees
// whatever the daemon started in the background in that time.
func (e *env) quiet(d time.Duration) {
	e.t.Helper()
	time.Sleep(d)
	synctest.Wait()
}

// keyIDs lists a socket's keys as sorted "send/recv" pairs.
func keyIDs(t testing.TB, s tcpao.Socket) []string {
	t.Helper()
	ks, err := s.Keys(tcpao.KeyFilter{})
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err != nil {
		t.Fatalf("Keys: %v", err)
	}
	out := make([]string, 0, len(ks))
	for _, k := range ks {
		out = append(out, fmt.Sprintf("%d/%d", k.SendID, k.RecvID))
	}
	slices.Sort(out)
	return out
}

func ids(keys ...testKey) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.ids())
	}
	slices.Sort(out)
	return out
}

func (e *env) waitKeys(name string, s tcpao.Socket, want []string) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("%s keys %v", name, want), func() bool { return slices.Equal(keyIDs(e.t, s), want) })
}

func info(t testing.TB, s tcpao.Socket) tcpao.Info {
	t.Helper()
	i, err := s.Info()
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	return i
}

// setSourceKeys makes keys what the fake key source returns from its next
// read (the secrets handed over are zeroed here).
func (e *env) setSourceKeys(keys ...testKey) {
	mkts := make([]keystore.MKT, len(keys))
	for i, k := range keys {
		mkts[i] = k.mkt()
	}
	e.src.setKeys(mkts...)
	for i := range mkts {
		mkts[i].Zero()
	}
}

// refreshWith makes keys the source's and has the daemon read it now.
func (e *env) refreshWith(keys ...testKey) {
	e.t.Helper()
	e.setSourceKeys(keys...)
	if err := e.d.RefreshKeys(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}
