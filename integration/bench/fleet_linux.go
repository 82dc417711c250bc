//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The daemon benchmarks (emergency revoke, daemon memory and idle pass) run the real daemon package over a
// fleet of REAL loopback TCP-AO sessions: one listener on 127.0.0.1 and one
// client per peer bound to its own 127.16.x.y address, each client keyed
// with the mirrors of the peer's MKTs before connect. A fake speaker reports
// the sessions, a fake discoverer maps its socket references to the
// accepted sockets, and the daemon reaches them through Options.SocketOf.

const fleetChain = "core"

var fleetLocal = netip.MustParseAddr("127.0.0.1")

// fleetPeer is the i-th peer's address: 127.16.0.1 onwards.
func fleetPeer(i int) netip.Addr {
	n := i + 1
	return netip.AddrFrom4([4]byte{127, 16 + byte(n>>16), byte(n >> 8), byte(n)})
}

// fleetKey is the k-th MKT of the chain (k from 0): IDs k+1/k+1, sendable
// since k+1 hours ago, so key 0 ("k1") is the preferred one.
func (r *runner) fleetKeys(n int, now time.Time) ([]keystore.MKT, error) {
	out := make([]keystore.MKT, n)
	for k := range n {
		b, err := r.fill()
		if err != nil {
			for i := range k {
				out[i].Zero()
			}
			return nil, err
		}
		out[k] = keystore.MKT{Name: fmt.Sprintf("k%d", k+1), Chain: fleetChain, SendID: uint8(k + 1), RecvID: uint8(k + 1),
			Algorithm: r.cfg.Algorithm, Secret: tcpao.NewSecret(b), MACLen: 12, IncludeTCPOptions: true,
			SendLifetime: keystore.Lifetime{Start: now.Add(-time.Duration(k+1) * time.Hour)}, Source: "bench:" + fmt.Sprint(k+1)}
		clear(b)
	}
	return out, nil
}

// fleetPolicy binds every peer's /32 to the chain.
func fleetPolicy(n int) (*policy.Policy, error) {
	var b strings.Builder
	b.WriteString("version: 1\nsafety:\n  switch_timeout: 5m\n  on_revoke_only_key: keep\nkey_chains:\n  - name: core\npeers:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - neighbor: %s\n    key_chain: core\n", fleetPeer(i))
	}
	p, err := policy.Parse("bench-policy.yaml", []byte(b.String()))
	if err != nil {
		return nil, fmt.Errorf("bench: fleet policy: %w", err)
	}
	return p, nil
}

// fleetSource is a keystore.Source serving a fixed chain.
type fleetSource struct {
	mu      sync.Mutex
	keys    []keystore.MKT
	revoked map[string]bool
}

func (s *fleetSource) Name() string { return "bench-source" }

func (s *fleetSource) Read(context.Context) (*keystore.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &keystore.Chain{Name: fleetChain, Version: 1}
	for _, k := range s.keys {
		m := k.Clone()
		m.Revoked = s.revoked[k.Name]
		c.Keys = append(c.Keys, m)
	}
	return &keystore.Snapshot{Source: s.Name(), ReadAt: time.Now(), Chains: map[string]*keystore.Chain{fleetChain: c}}, nil
}

func (s *fleetSource) Revoke(_ context.Context, chain, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if chain != fleetChain {
		return fmt.Errorf("bench source: no chain %q", chain)
	}
	if s.revoked == nil {
		s.revoked = map[string]bool{}
	}
	s.revoked[key] = true
	return nil
}

func (s *fleetSource) zero() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.keys {
		s.keys[i].Zero()
	}
}

// newFleetSpeaker is the speaker of a fleet of n peers, all passive and
// not yet connected. A reset is not expected: it fails.
func newFleetSpeaker(n int) *bgptest.Speaker {
	peers := make([]bgp.PeerInfo, n)
	for i := range n {
		peers[i] = fleetPeerInfo(i)
	}
	sp := bgptest.NewSpeaker("bench-speaker", os.Getpid(), n, peers...)
	sp.ResetErr = errors.New("bench speaker: no reset expected")
	return sp
}

func fleetPeerInfo(i int) bgp.PeerInfo {
	return bgp.PeerInfo{Neighbor: fleetPeer(i), Local: fleetLocal, State: bgp.StateActive, Passive: true, PeerASN: 65001}
}

// established reports peer i up on the given ports.
func established(sp *bgptest.Speaker, i int, local, remote netip.AddrPort) {
	p := fleetPeerInfo(i)
	p.State, p.LocalPort, p.RemotePort, p.Uptime = bgp.StateEstablished, local.Port(), remote.Port(), time.Now().Truncate(time.Second)
	sp.Set(p)
}

// fleet is the listener, the clients and the accepted sockets, and the
// discoverer that names them.
type fleet struct {
	n        int
	ln       *net.TCPListener
	lnSock   tcpao.Socket
	port     uint16
	clients  []*net.TCPConn
	accepted []*net.TCPConn
	// disc names the listener (inode 1) and then the accepted sockets
	// (inode i+2 for peer i) for the daemon.
	disc *bgptest.Discoverer
}

func (r *runner) newFleet(ctx context.Context, n int) (*fleet, error) {
	l, err := listen(ctx)
	if err != nil {
		return nil, err
	}
	f := &fleet{n: n, ln: l.ln, lnSock: l.sock, port: uint16(l.ln.Addr().(*net.TCPAddr).Port),
		disc: bgptest.NewDiscoverer(os.Getpid(), 1)}
	f.disc.Add(l.sock, netip.AddrPortFrom(fleetLocal, f.port), netip.AddrPort{}, true)
	return f, nil
}

func (f *fleet) close() {
	for _, c := range f.clients {
		c.Close()
	}
	for _, c := range f.accepted {
		c.Close()
	}
	f.ln.Close()
}

// connect opens every peer's session: the client gets the mirrors of keys
// (keys[cur] Current_key and RNext_key) before connect, the accepted socket
// is registered, and the speaker reports it Established.
func (f *fleet) connect(ctx context.Context, keys []keystore.MKT, cur int, sp *bgptest.Speaker) error {
	for i := range f.n {
		if err := ctx.Err(); err != nil {
			return err
		}
		var kerr error
		// No TCP keepalives (Go's default is 15s): thousands of idle
		// harness sockets would sign and verify probes all the time and
		// bill that kernel work to whatever the daemon is doing.
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: fleetPeer(i).AsSlice()}, Timeout: 20 * time.Second, KeepAlive: -1,
			Control: func(_, _ string, rc syscall.RawConn) error {
				s := tcpao.New(rc)
				for k, m := range keys {
					key := m.Key(netip.PrefixFrom(fleetLocal, 32), 0)
					key.SendID, key.RecvID = m.RecvID, m.SendID // the mirror
					err := s.AddKey(key, tcpao.AddOptions{SetCurrent: k == cur, SetRNext: k == cur})
					key.Secret.Zero()
					if err != nil {
						kerr = fmt.Errorf("client %s: %w", fleetPeer(i), err)
						return kerr
					}
				}
				return nil
			}}
		d.SetMultipathTCP(false) // keyed: plain TCP (tcpao.ErrMPTCP)
		c, err := d.DialContext(ctx, "tcp4", netip.AddrPortFrom(fleetLocal, f.port).String())
		if err != nil {
			return fmt.Errorf("bench: connect peer %d (%s): %w", i, fleetPeer(i), errors.Join(err, kerr))
		}
		f.clients = append(f.clients, c.(*net.TCPConn))
		if err := f.ln.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
			return err
		}
		a, err := f.ln.AcceptTCP()
		if err != nil {
			return fmt.Errorf("bench: accept peer %d: %w", i, err)
		}
		f.accepted = append(f.accepted, a)
		rc, err := a.SyscallConn()
		if err != nil {
			return err
		}
		local := a.LocalAddr().(*net.TCPAddr).AddrPort()
		remote := a.RemoteAddr().(*net.TCPAddr).AddrPort()
		local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
		remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
		if remote.Addr() != fleetPeer(i) {
			return fmt.Errorf("bench: accepted %s, want peer %s", remote, fleetPeer(i))
		}
		f.disc.Add(tcpao.New(rc), local, remote, false)
		established(sp, i, local, remote)
	}
	return nil
}

// exchange checks that every session still carries data both ways: the
// server side speaks first (after a forced key replacement the client
// switches to the new key on the server's next segment).
func (f *fleet) exchange() (int, error) {
	ok := 0
	var errs []error
	buf := make([]byte, 1)
	for i := range f.n {
		a, c := f.accepted[i], f.clients[i]
		dl := time.Now().Add(10 * time.Second)
		a.SetDeadline(dl)
		c.SetDeadline(dl)
		_, err := a.Write([]byte{'s'})
		if err == nil {
			_, err = c.Read(buf)
		}
		if err == nil {
			_, err = c.Write([]byte{'c'})
		}
		if err == nil {
			_, err = a.Read(buf)
		}
		if err != nil {
			if len(errs) < 3 {
				errs = append(errs, fmt.Errorf("peer %s: %w", fleetPeer(i), err))
			}
			continue
		}
		ok++
	}
	return ok, errors.Join(errs...)
}

// watched is one daemon instance's view of the fleet: it counts the
// listener's key reads (one per reconcile pass) and which accepted sockets
// the daemon has touched (taken over).
type watched struct {
	f       *fleet
	lnReads atomic.Int64
	mu      sync.Mutex
	touched map[uint64]bool
}

func newWatched(f *fleet) *watched { return &watched{f: f, touched: map[uint64]bool{}} }

func (w *watched) socketOf(h bgp.SocketHandle) tcpao.Socket {
	ref := h.Ref()
	s := w.f.disc.Socket(ref.Inode)
	if s == nil {
		return badSock{}
	}
	return &watchedSock{Socket: s, w: w, ino: ref.Inode, listening: ref.Listening}
}

func (w *watched) touchedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.touched)
}

type watchedSock struct {
	tcpao.Socket
	w         *watched
	ino       uint64
	listening bool
}

func (s *watchedSock) touch() {
	if s.listening {
		return
	}
	s.w.mu.Lock()
	s.w.touched[s.ino] = true
	s.w.mu.Unlock()
}

func (s *watchedSock) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	if s.listening {
		s.w.lnReads.Add(1)
	}
	s.touch()
	return s.Socket.Keys(f)
}

func (s *watchedSock) Info() (tcpao.Info, error) {
	s.touch()
	return s.Socket.Info()
}

type badSock struct{}

var errBadSock = errors.New("bench: no such fleet socket")

func (badSock) AddKey(tcpao.Key, tcpao.AddOptions) error      { return errBadSock }
func (badSock) DelKey(tcpao.DelKey) error                     { return errBadSock }
func (badSock) Info() (tcpao.Info, error)                     { return tcpao.Info{}, errBadSock }
func (badSock) SetInfo(tcpao.InfoChange) error                { return errBadSock }
func (badSock) Keys(tcpao.KeyFilter) ([]tcpao.KeyInfo, error) { return nil, errBadSock }

// benchPoll is how often the bench looks at what it waits for: often, as
// it times how long that takes.
const benchPoll = 20 * time.Millisecond

// waitUntil waits up to timeout for cond (through the lab's Poll, so a
// timeout is a *lab.TimeoutError); an error from cond ends the wait.
func waitUntil(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	return lab.Poll{What: what, Timeout: timeout, Every: benchPoll}.Wait(ctx, func() (bool, string, error) {
		ok, err := cond()
		return ok, "", err
	})
}

// countKeys counts the socket's keys with the given SendID (-1: all).
func countKeys(s tcpao.Socket, send int) (int, error) {
	ks, err := s.Keys(tcpao.KeyFilter{})
	if errors.Is(err, syscall.ENOENT) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range ks {
		if send < 0 || int(k.SendID) == send {
			n++
		}
	}
	return n, nil
}
