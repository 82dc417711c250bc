package lab

import (
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
	"github.com/aokeyd/aokeyd/tcpao"
)

// SYNTaken reports whether a connection from address from (inside ns) to
// to:port is taken, its SYN unsigned (md5 "") or signed with TCP-MD5
// password md5: a listener that takes either from a peer that had TCP-MD5
// or TCP-AO is an unauthenticated window.
func SYNTaken(ns *netns.NS, from, to netip.Addr, port uint16, md5 string) bool {
	taken := false
	_ = ns.Do(func() error {
		d := net.Dialer{Timeout: 300 * time.Millisecond, LocalAddr: &net.TCPAddr{IP: from.AsSlice()},
			Control: func(_, _ string, c syscall.RawConn) error {
				if md5 == "" {
					return nil
				}
				m, err := tcpao.MD5(tcpao.New(c))
				if err != nil {
					return err
				}
				return m.AddMD5(tcpao.MD5Key{MD5Ref: tcpao.MD5Ref{Peer: netip.PrefixFrom(to, to.BitLen())}, Secret: tcpao.NewSecret([]byte(md5))})
			}}
		d.SetMultipathTCP(false) // keys go on it: plain TCP (tcpao.ErrMPTCP)
		if c, err := d.Dial("tcp", netip.AddrPortFrom(to, port).String()); err == nil {
			taken = true
			c.Close()
		}
		return nil
	})
	return taken
}

// Prober sends, every 100 ms until Stop, an unsigned SYN and a TCP-MD5
// SYN with a wrong password to port 179 (Pair gives the n-th probe's
// addresses, the source inside NS), and calls Tick every 100 ms too (a
// test samples its sessions there) on a goroutine of its own: a slow
// sample (an exec of birdc on a busy guest) delays the next sample, never
// the next probe (TestMigrateBIRD32 once probed at 3.1 a second, not 20,
// behind a Tick of 0.6 s).
type Prober struct {
	NS   *netns.NS
	Pair func(n int) (from, to netip.Addr)
	Tick func()

	mu             sync.Mutex
	probes, taken  int
	stop           chan struct{}
	done, inflight sync.WaitGroup
}

// Start runs the probes until Stop.
func (p *Prober) Start() *Prober {
	p.stop = make(chan struct{})
	if p.Tick != nil {
		p.every(p.Tick)
	}
	n := 0 // the probe loop's alone
	p.every(func() {
		from, to := p.Pair(n)
		n++
		for _, md5 := range []string{"", "a-wrong-password"} {
			p.inflight.Add(1)
			go func() {
				defer p.inflight.Done()
				got := SYNTaken(p.NS, from, to, 179, md5)
				p.mu.Lock()
				p.probes++
				if got {
					p.taken++
				}
				p.mu.Unlock()
			}()
		}
	})
	return p
}

// every calls f every 100 ms on a goroutine of its own until Stop (a slow
// f delays its own next call, no other loop's).
func (p *Prober) every(f func()) {
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			f()
		}
	}()
}

// Stop ends the probes and returns how many were sent and taken.
func (p *Prober) Stop() (probes, taken int) {
	close(p.stop)
	p.done.Wait()
	p.inflight.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.probes, p.taken
}

// ListenerMD5 are the TCP-MD5 keys of process pid's listeners on port,
// read through sock_diag (in its network namespace) independently of
// aokeyd.
func ListenerMD5(t testing.TB, pid int, port uint16) []tcpao.MD5Info {
	t.Helper()
	d, err := sockets.OpenDiag(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ls, err := d.Listeners() // without their keys: a dump ends at a listener whose keys do not fit
	if err != nil {
		t.Fatal(err)
	}
	d.MD5 = true
	var out []tcpao.MD5Info
	for _, s := range ls {
		if s.Local.Port() != port {
			continue
		}
		so, err := d.Listener(s.Local, s.Cookie)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, so.MD5...)
	}
	return out
}
