package frr

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/tcpao"
)

// boundSocket is one of bgpd's sockets read straight from the kernel (a
// pidfd_getfd duplicate), with the device it is bound to (sock_diag's
// idiag_if): bgpd binds each VRF's listener to the VRF device, and the
// sessions it accepts inherit the binding.
type boundSocket struct {
	listening     bool
	dev           int
	local, remote netip.AddrPort
	keys          []tcpao.KeyInfo
	info          tcpao.Info
}

func (b boundSocket) String() string {
	kind := "session " + b.remote.String()
	if b.listening {
		kind = "listener " + b.local.String()
	}
	return fmt.Sprintf("%s dev %d keys %v", kind, b.dev, refs(b.keys))
}

// readSockets reads pid's BGP listeners and its connections to neighbor.
// A socket gone meanwhile is left out.
func readSockets(pid int, neighbor netip.Addr) ([]boundSocket, error) {
	lrefs, err := sockets.System{}.Listeners(pid, 179)
	crefs, err2 := sockets.System{}.Connections(pid, neighbor)
	if err := errors.Join(err, err2); err != nil {
		return nil, err
	}
	// The devices, from a dump taken after the references: a socket the
	// dump does not list is gone (one that came after is not referenced).
	d, err := sockets.OpenDiag(pid)
	if err != nil {
		return nil, err
	}
	ls, err := d.Listeners()
	es, err2 := d.EstablishedSockets()
	d.Close()
	if err := errors.Join(err, err2); err != nil {
		return nil, err
	}
	dev := map[uint64]int{}
	for _, s := range append(ls, es...) {
		dev[s.Inode] = int(s.IfIndex)
	}
	var out []boundSocket
	for _, r := range append(lrefs, crefs...) {
		i, ok := dev[r.Inode]
		if !ok {
			continue
		}
		b := boundSocket{listening: r.Listening, dev: i, local: r.Local, remote: r.Remote}
		err := sockets.System{}.With(r, func(fd int) error {
			var err error
			if b.keys, err = tcpao.FromFD(fd).Keys(tcpao.KeyFilter{}); err != nil || r.Listening {
				return err
			}
			b.info, err = tcpao.FromFD(fd).Info()
			return err
		})
		switch {
		case errors.Is(err, sockets.ErrStale):
			continue
		case err != nil && !errors.Is(err, unix.ENOENT): // ENOENT: no TCP-AO on it
			return nil, fmt.Errorf("%s: %w", r, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// on is the listeners (listening) or sessions among socks bound to tw's
// VRF device.
func on(socks []boundSocket, tw *twin, listening bool) []boundSocket {
	var out []boundSocket
	for _, s := range socks {
		if s.dev == tw.idx && s.listening == listening {
			out = append(out, s)
		}
	}
	return out
}

func keysOf(socks []boundSocket) []tcpao.KeyInfo {
	var out []tcpao.KeyInfo
	for _, s := range socks {
		out = append(out, s.keys...)
	}
	return out
}

// crossKeys collects, from every read, each key on a twin's socket that is
// not the twin's: another chain's IDs, or another ifindex.
type crossKeys struct {
	mu      sync.Mutex
	reads   int
	seen    map[string]bool
	lastErr error
}

func (c *crossKeys) result() ([]string, int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k := range c.seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, c.reads, c.lastErr
}

// check reads bgpd's sockets once and records what is foreign on each
// twin's. A session to the neighbor bound to neither VRF is foreign too:
// it could not be told apart.
func (l *twinLab) check() {
	socks, err := readSockets(l.frr.PID, twinB)
	c := &l.cross
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.lastErr = err
		return
	}
	c.reads++
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	for _, s := range socks {
		var tw *twin
		for _, x := range []*twin{l.red, l.blue} {
			if s.dev == x.idx {
				tw = x
			}
		}
		switch {
		case tw == nil && !s.listening:
			c.seen[fmt.Sprintf("session %s bound to device %d, neither VRF's", s.remote, s.dev)] = true
		case tw != nil:
			kind := "session"
			if s.listening {
				kind = "listener " + s.local.String()
			}
			for _, k := range s.keys {
				if !tw.ids[[2]uint8{k.SendID, k.RecvID}] || k.IfIndex != tw.idx {
					c.seen[fmt.Sprintf("%s in vrf %s (ifindex %d): %s", kind, tw, tw.idx, k.KeyRef)] = true
				}
			}
		}
	}
}

// sample reads bgpd's sockets every d until the returned stop is called.
func (l *twinLab) sample(d time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			l.check()
			select {
			case <-done:
				return
			case <-time.After(d):
			}
		}
	})
	return func() { close(done); wg.Wait(); l.check() }
}
