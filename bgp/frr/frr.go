package frr

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	peerkey "github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
)

// Runner runs one vtysh command and returns its standard output.
type Runner interface {
	Vtysh(ctx context.Context, command string) ([]byte, error)
}

// Options configure a Speaker.
type Options struct {
	// Name describes the speaker in logs ("frr bgpd").
	Name string
	// Runner runs vtysh commands (default: VtySocket{}, bgpd's own vty
	// socket).
	Runner Runner
	// PID returns bgpd's process id (default: PIDFile, then the one
	// process named bgpd).
	PID func(ctx context.Context) (int, error)
	// PollInterval is Watch's listing interval (default 1s).
	PollInterval time.Duration
	// Timeout bounds one vtysh call (default 10s).
	Timeout time.Duration
	Log     *slog.Logger
	// OnCall, when set, is called once for every vtysh command the
	// Speaker runs, with its kind (CallNeighbors, CallNeighbor,
	// CallRunningConfig, CallClear): the daemon counts them as a metric.
	// It must not block.
	OnCall func(kind string)
}

// The kinds of vtysh command OnCall names.
const (
	CallNeighbors     = "vtysh show neighbors"
	CallNeighbor      = "vtysh show neighbor"
	CallRunningConfig = "vtysh show running-config"
	CallClear         = "vtysh clear bgp"
)

// Defaults.
const (
	DefaultPollInterval = time.Second
	DefaultTimeout      = 10 * time.Second
	DefaultPIDFile      = "/run/frr/bgpd.pid"
	DefaultProcessName  = "bgpd"
)

// Speaker is FRR's bgpd seen through vtysh.
type Speaker struct {
	opt Options

	mu sync.Mutex
	// uptimes keeps the first Uptime seen for each connection (see doc.go).
	uptimes map[connKey]time.Time
	// passive is the last full listing's passive configuration (Peer
	// reuses it).
	passive passiveConfig
	// downs keeps each neighbor's last down (when and why): FRR says it
	// only while the session is down, status shows it once it is up
	// again too.
	downs map[neighborKey]lastDown
}

// neighborKey is one neighbor of one VRF.
type neighborKey struct{ vrf, neighbor string }

// lastDown is when and why a neighbor's session last went down.
type lastDown struct {
	at  time.Time
	why string
}

// connKey identifies one connection of one neighbor: FRR's count of
// established connections and the ports.
type connKey struct {
	vrf, neighbor string
	conns         uint32
	lport, rport  uint16
}

var _ bgp.Speaker = (*Speaker)(nil)

// New returns a Speaker.
func New(opt Options) *Speaker {
	if opt.Name == "" {
		opt.Name = "frr bgpd"
	}
	if opt.Runner == nil {
		opt.Runner = VtySocket{}
	}
	if opt.PID == nil {
		opt.PID = func(context.Context) (int, error) { return FindPID(DefaultPIDFile, DefaultProcessName) }
	}
	if opt.PollInterval <= 0 {
		opt.PollInterval = DefaultPollInterval
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	return &Speaker{opt: opt, uptimes: map[connKey]time.Time{}}
}

// Name implements bgp.Speaker.
func (s *Speaker) Name() string { return s.opt.Name }

// PID implements bgp.Speaker.
func (s *Speaker) PID(ctx context.Context) (int, error) { return s.opt.PID(ctx) }

func (s *Speaker) vtysh(ctx context.Context, kind, cmd string) ([]byte, error) {
	if s.opt.OnCall != nil {
		s.opt.OnCall(kind)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	out, err := s.opt.Runner.Vtysh(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("%s: vtysh -c %q: %w", s.opt.Name, cmd, err)
	}
	return out, nil
}

// Peers implements bgp.Speaker: `show bgp vrf all neighbors json`.
func (s *Speaker) Peers(ctx context.Context) ([]bgp.PeerInfo, error) {
	return s.list(ctx, CallNeighbors, "show bgp vrf all neighbors json", "", true)
}

// list runs cmd and decodes its neighbors (vrfHint names the VRF of a
// one-VRF answer); prune marks a full listing: it re-reads the passive
// configuration and drops the kept uptimes of connections it no longer
// has.
func (s *Speaker) list(ctx context.Context, kind, cmd, vrfHint string, prune bool) ([]bgp.PeerInfo, error) {
	out, err := s.vtysh(ctx, kind, cmd)
	if err != nil {
		return nil, err
	}
	ps, err := decodeNeighbors(out, vrfHint)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", s.opt.Name, cmd, err)
	}
	if prune {
		// A full listing also re-reads which neighbors are passive.
		running, err := s.vtysh(ctx, CallRunningConfig, runningConfig)
		if err != nil {
			return nil, err
		}
		pc := parsePassive(running)
		clear(running) // it holds any TCP-MD5 password in clear text
		s.mu.Lock()
		s.passive = pc
		s.mu.Unlock()
	}
	infos := make([]bgp.PeerInfo, len(ps))
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[connKey]bool{}
	now := time.Now()
	for i, p := range ps {
		p.info.Passive = s.passive.has(p.info.Key())
		p.info.Uptime, seen[connOf(p)] = s.uptime(p), true
		if a := s.about(p, now); a != (bgp.PeerAbout{}) {
			p.info.About = &a
		}
		infos[i] = p.info
	}
	if prune {
		for k := range s.uptimes {
			if !seen[k] {
				delete(s.uptimes, k)
			}
		}
		listed := map[neighborKey]bool{}
		for _, p := range ps {
			listed[neighborKeyOf(p)] = true
		}
		for k := range s.downs {
			if !listed[k] {
				delete(s.downs, k)
			}
		}
	}
	return infos, nil
}

// connOf is p's connection: an interface neighbour's is on the address
// it learned, which may change with the link.
func connOf(p peer) connKey {
	return connKey{vrf: p.info.VRF, neighbor: p.info.Shown(), conns: p.conns, lport: p.info.LocalPort, rport: p.info.RemotePort}
}

// neighborKeyOf is p's neighbor: its address, or an interface
// neighbour's interface.
func neighborKeyOf(p peer) neighborKey {
	return neighborKey{vrf: p.info.VRF, neighbor: p.info.Key().Name()}
}

// about is p's description, and when and why its session last went down:
// as FRR reports it (whole seconds: FRR counts from now on every call),
// else as it last did (the session is up again). s.mu held.
func (s *Speaker) about(p peer, now time.Time) bgp.PeerAbout {
	d := s.lastDown(p, now)
	return bgp.PeerAbout{Description: p.desc, LastDown: d.at, LastDownReason: d.why}
}

// lastDown is when and why p's session last went down. s.mu held.
func (s *Speaker) lastDown(p peer, now time.Time) lastDown {
	k := neighborKeyOf(p)
	if !p.haveDown {
		return s.downs[k]
	}
	d := lastDown{at: now.Add(-p.downAgo).Truncate(time.Second), why: p.downWhy}
	if old, ok := s.downs[k]; ok && old.why == d.why && old.at.Sub(d.at).Abs() <= time.Second {
		d = old // the same down, read again a second off
	}
	if s.downs == nil {
		s.downs = map[neighborKey]lastDown{}
	}
	s.downs[k] = d
	return d
}

// uptime is the connection's first reported start; s.mu held.
func (s *Speaker) uptime(p peer) time.Time {
	if !p.info.Established() || p.epoch <= 0 {
		return time.Time{}
	}
	k := connOf(p)
	if u, ok := s.uptimes[k]; ok {
		return u
	}
	u := time.Unix(p.epoch, 0)
	s.uptimes[k] = u
	return u
}

// Peer implements bgp.Speaker: `show bgp vrf VRF neighbors ADDR json`
// (the interface for an interface neighbour), VRF "default" for the
// default one.
func (s *Speaker) Peer(ctx context.Context, k peerkey.Key) (bgp.PeerInfo, error) {
	if !k.IsValid() {
		return bgp.PeerInfo{}, fmt.Errorf("%s: %w: a key with no address or interface (or both)", s.opt.Name, bgp.ErrNoPeer)
	}
	ps, err := s.list(ctx, CallNeighbor, fmt.Sprintf("show bgp vrf %s neighbors %s json", frrVRF(k.VRF), k.Name()), k.VRF, false)
	if err != nil {
		return bgp.PeerInfo{}, err
	}
	for _, p := range ps {
		if p.Key() == k {
			return p, nil
		}
	}
	return bgp.PeerInfo{}, fmt.Errorf("%s: %w: %s", s.opt.Name, bgp.ErrNoPeer, k)
}

// frrVRF is FRR's name of a VRF: "default" for the default one ("").
func frrVRF(vrf string) string {
	if vrf == "" {
		return "default"
	}
	return vrf
}

// ResetPeer implements bgp.Speaker with `clear bgp vrf VRF ADDR` (the
// interface for an interface neighbour), a hard reset (FRR's clear sends
// a Cease without the reason, which is logged).
func (s *Speaker) ResetPeer(ctx context.Context, k peerkey.Key, reason string) error {
	if !k.IsValid() {
		return fmt.Errorf("%s: reset: a key with no address or interface (or both)", s.opt.Name)
	}
	vrf := frrVRF(k.VRF)
	cmd := fmt.Sprintf("clear bgp vrf %s %s", vrf, k.Name())
	s.opt.Log.Info("resetting FRR session", "speaker", s.opt.Name, "neighbor", k.Name(), "vrf", vrf, "reason", reason)
	out, err := s.vtysh(ctx, CallClear, cmd)
	if err != nil {
		return err
	}
	if msg := strings.TrimSpace(string(out)); msg != "" {
		// vtysh prints nothing when the clear worked; "% ..." otherwise.
		return fmt.Errorf("%s: %s: %s", s.opt.Name, cmd, msg)
	}
	return nil
}

// FindPID returns bgpd's pid from pidFile ("" to skip) or, when that file
// does not exist, the one process whose comm is name (sockets.FindPID,
// naming FRR's setting).
func FindPID(pidFile, name string) (int, error) {
	return sockets.FindPID(pidFile, name, "speaker.frr.pid_file")
}
