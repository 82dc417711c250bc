//go:build linux

package tcpao

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// armPeerProbe is PeerProber.ArmPeerProbe on fd.
func armPeerProbe(fd int) (PeerProbe, error) {
	on, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE)
	if err != nil {
		return PeerProbe{}, fmt.Errorf("tcpao: keepalive probe: %w", os.NewSyscallError("getsockopt(SO_KEEPALIVE)", err))
	}
	p := PeerProbe{OwnerKeepalive: on != 0}
	for _, g := range []struct {
		opt int
		v   *int
	}{{unix.TCP_KEEPIDLE, &p.Idle}, {unix.TCP_KEEPINTVL, &p.Interval}, {unix.TCP_KEEPCNT, &p.Count}} {
		if *g.v, err = unix.GetsockoptInt(fd, unix.IPPROTO_TCP, g.opt); err != nil {
			return PeerProbe{}, fmt.Errorf("tcpao: keepalive probe: %w", os.NewSyscallError("getsockopt", err))
		}
	}
	p.Armed = true
	// The interval and count first, then SO_KEEPALIVE (which arms the
	// timer a full TCP_KEEPIDLE out), then TCP_KEEPIDLE, which re-arms it
	// from the last segment received: at once if that was a second ago.
	steps := []struct{ level, opt, v int }{
		{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, probeInterval},
		{unix.IPPROTO_TCP, unix.TCP_KEEPCNT, probeCount},
		{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
		{unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, probeIdle},
	}
	if p.OwnerKeepalive {
		steps = steps[3:] // the owner's keepalive: its idle time alone
	}
	for _, s := range steps {
		if err := unix.SetsockoptInt(fd, s.level, s.opt, s.v); err != nil {
			return PeerProbe{}, errors.Join(fmt.Errorf("tcpao: keepalive probe: %w", os.NewSyscallError("setsockopt", err)), endPeerProbe(fd, p))
		}
	}
	return p, nil
}

// endPeerProbe is PeerProber.EndPeerProbe on fd: SO_KEEPALIVE off, then the
// settings found put back; on the owner's keepalive, its idle time.
func endPeerProbe(fd int, p PeerProbe) error {
	var errs []error
	steps := []struct{ level, opt, v int }{
		{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 0},
		{unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, p.Idle},
		{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, p.Interval},
		{unix.IPPROTO_TCP, unix.TCP_KEEPCNT, p.Count},
	}
	if p.OwnerKeepalive {
		steps = steps[1:2] // the owner's idle time back (it re-arms the owner's timer)
	}
	for _, s := range steps {
		if err := unix.SetsockoptInt(fd, s.level, s.opt, s.v); err != nil {
			errs = append(errs, os.NewSyscallError("setsockopt", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tcpao: keepalive probe's end: %w", err)
	}
	return nil
}

func (s *sock) ArmPeerProbe() (PeerProbe, error) {
	var p PeerProbe
	err := s.do(func(fd int) error {
		var err error
		p, err = armPeerProbe(fd)
		return err
	})
	return p, err
}

func (s *sock) EndPeerProbe(p PeerProbe) error {
	return s.do(func(fd int) error { return endPeerProbe(fd, p) })
}

func (b *bound) ArmPeerProbe() (PeerProbe, error) {
	if b.fd < 0 {
		return PeerProbe{}, errUnbound
	}
	return armPeerProbe(b.fd)
}

func (b *bound) EndPeerProbe(p PeerProbe) error {
	if b.fd < 0 {
		return errUnbound
	}
	return endPeerProbe(b.fd, p)
}

var (
	_ PeerProber = (*sock)(nil)
	_ PeerProber = (*bound)(nil)
)
