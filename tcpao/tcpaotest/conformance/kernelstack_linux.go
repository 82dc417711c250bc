//go:build linux

package conformance

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/tcpao"
)

// KernelStack is the Stack of real non-blocking sockets on this host's
// kernel, driven with raw system calls so that keys can be installed before
// connect(2).
type KernelStack struct {
	// Timeout bounds each connect, accept and read.
	Timeout time.Duration

	// LinkLocal are the links Links reports: the test that makes the
	// stack creates them (two dummy interfaces, each with LinkLocalA and
	// LinkLocalB); unset, Links fails and so do the cases that need them.
	LinkLocal [2]Link

	mu  sync.Mutex
	fds []int
}

// NewKernelStack returns a KernelStack with the given per-operation timeout.
func NewKernelStack(timeout time.Duration) *KernelStack { return &KernelStack{Timeout: timeout} }

type kernelSock struct {
	tcpao.Socket
	fd int
}

// ArmPeerProbe and EndPeerProbe pass the socket's tcpao.PeerProber
// through.
func (s *kernelSock) ArmPeerProbe() (tcpao.PeerProbe, error) { return tcpao.ArmPeerProbe(s.Socket) }

func (s *kernelSock) EndPeerProbe(p tcpao.PeerProbe) error { return tcpao.EndPeerProbe(s.Socket, p) }

func (k *KernelStack) sock(s tcpao.Socket) (*kernelSock, error) {
	ks, ok := s.(*kernelSock)
	if !ok {
		return nil, fmt.Errorf("conformance: %T is not a kernel socket", s)
	}
	return ks, nil
}

func (k *KernelStack) track(fd int) *kernelSock {
	k.mu.Lock()
	k.fds = append(k.fds, fd)
	k.mu.Unlock()
	return &kernelSock{Socket: tcpao.FromFD(fd), fd: fd}
}

func sockaddr(a netip.AddrPort) (unix.Sockaddr, error) {
	if a.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(a.Port()), Addr: a.Addr().As4()}, nil
	}
	sa := &unix.SockaddrInet6{Port: int(a.Port()), Addr: a.Addr().As16()}
	if z := a.Addr().Zone(); z != "" {
		ifi, err := net.InterfaceByName(z)
		if err != nil {
			return nil, fmt.Errorf("conformance: zone of %s: %w", a, err)
		}
		sa.ZoneId = uint32(ifi.Index)
	}
	return sa, nil
}

func (k *KernelStack) Links() ([2]Link, error) {
	if k.LinkLocal[0].Name == "" || k.LinkLocal[1].Name == "" {
		return k.LinkLocal, errors.New("conformance: KernelStack.LinkLocal is not set: the test that makes the stack creates the two links")
	}
	return k.LinkLocal, nil
}

func (k *KernelStack) Socket(local netip.Addr) (tcpao.Socket, error) {
	fam := unix.AF_INET6
	if local.Is4() {
		fam = unix.AF_INET
	}
	fd, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	s := k.track(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return nil, os.NewSyscallError("setsockopt(SO_REUSEADDR)", err)
	}
	sa, err := sockaddr(netip.AddrPortFrom(local, 0))
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, sa); err != nil {
		return nil, os.NewSyscallError("bind", err)
	}
	return s, nil
}

func (k *KernelStack) Listen(s tcpao.Socket) error {
	ks, err := k.sock(s)
	if err != nil {
		return err
	}
	return os.NewSyscallError("listen", unix.Listen(ks.fd, 16))
}

func localAddr(fd int) (netip.AddrPort, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return netip.AddrPort{}, os.NewSyscallError("getsockname", err)
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)), nil
	case *unix.SockaddrInet6:
		addr := netip.AddrFrom16(a.Addr)
		if a.ZoneId != 0 {
			ifi, err := net.InterfaceByIndex(int(a.ZoneId))
			if err != nil {
				return netip.AddrPort{}, fmt.Errorf("conformance: zone %d of %s: %w", a.ZoneId, addr, err)
			}
			addr = addr.WithZone(ifi.Name)
		}
		return netip.AddrPortFrom(addr, uint16(a.Port)), nil
	}
	return netip.AddrPort{}, fmt.Errorf("getsockname: %T", sa)
}

// wait polls fd for events until the timeout; ErrTimeout when nothing came.
func (k *KernelStack) wait(fd int, events int16, what string) error {
	k.mu.Lock()
	deadline := time.Now().Add(k.Timeout)
	k.mu.Unlock()
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("conformance: %s: %w", what, ErrTimeout)
		}
		p := []unix.PollFd{{Fd: int32(fd), Events: events}}
		n, err := unix.Poll(p, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return os.NewSyscallError("poll", err)
		}
		if n > 0 {
			return nil
		}
	}
}

func (k *KernelStack) Connect(s, l tcpao.Socket) (tcpao.Socket, error) {
	return k.ConnectTo(s, l, netip.Addr{})
}

// ConnectTo connects s to l at dst (invalid: at l's own address).
func (k *KernelStack) ConnectTo(s, l tcpao.Socket, to netip.Addr) (tcpao.Socket, error) {
	ks, err := k.sock(s)
	if err != nil {
		return nil, err
	}
	kl, err := k.sock(l)
	if err != nil {
		return nil, err
	}
	dst, err := localAddr(kl.fd)
	if err != nil {
		return nil, err
	}
	if to.IsValid() {
		dst = netip.AddrPortFrom(to, dst.Port())
	}
	sa, err := sockaddr(dst)
	if err != nil {
		return nil, err
	}
	err = unix.Connect(ks.fd, sa)
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		return nil, fmt.Errorf("conformance: connect %s: %w", dst, os.NewSyscallError("connect", err))
	}
	if err := k.wait(ks.fd, unix.POLLOUT, "connect "+dst.String()); err != nil {
		return nil, err
	}
	if soErr, err := unix.GetsockoptInt(ks.fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil {
		return nil, os.NewSyscallError("getsockopt(SO_ERROR)", err)
	} else if soErr != 0 {
		return nil, fmt.Errorf("conformance: connect %s: %w", dst, os.NewSyscallError("connect", unix.Errno(soErr)))
	}
	if err := k.wait(kl.fd, unix.POLLIN, "accept on "+dst.String()); err != nil {
		return nil, err
	}
	fd, _, err := unix.Accept4(kl.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("accept4", err)
	}
	return k.track(fd), nil
}

func (k *KernelStack) send(from, to *kernelSock, msg []byte) error {
	if _, err := unix.Write(from.fd, msg); err != nil {
		return os.NewSyscallError("write", err)
	}
	got := 0
	buf := make([]byte, len(msg))
	for got < len(msg) {
		if err := k.wait(to.fd, unix.POLLIN, "read"); err != nil {
			return err
		}
		n, err := unix.Read(to.fd, buf[got:])
		if errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			return os.NewSyscallError("read", err)
		}
		if n == 0 {
			return fmt.Errorf("conformance: read: connection closed")
		}
		got += n
	}
	// Acknowledge at once (the model has no delayed ACKs): the ACK is
	// signed with the reader's Current_key of this moment.
	if err := unix.SetsockoptInt(to.fd, unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1); err != nil {
		return os.NewSyscallError("setsockopt(TCP_QUICKACK)", err)
	}
	return nil
}

// acked waits until the peers acknowledged everything s sent; ErrTimeout
// when they did not (the ACK was dropped).
func (k *KernelStack) acked(s *kernelSock) error {
	k.mu.Lock()
	deadline := time.Now().Add(k.Timeout)
	k.mu.Unlock()
	for {
		n, err := unix.IoctlGetInt(s.fd, unix.SIOCOUTQ)
		if err != nil {
			return os.NewSyscallError("ioctl(SIOCOUTQ)", err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("conformance: %d bytes unacknowledged: %w", n, ErrTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

func (k *KernelStack) Exchange(a, b tcpao.Socket, n int) error {
	ka, err := k.sock(a)
	if err != nil {
		return err
	}
	kb, err := k.sock(b)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if err := k.send(ka, kb, []byte(fmt.Sprintf("ping %d", i))); err != nil {
			return fmt.Errorf("conformance: exchange round %d: %w", i, err)
		}
		if err := k.send(kb, ka, []byte(fmt.Sprintf("pong %d", i))); err != nil {
			return fmt.Errorf("conformance: exchange round %d: %w", i, err)
		}
		if err := k.acked(kb); err != nil {
			return fmt.Errorf("conformance: exchange round %d: %w", i, err)
		}
	}
	return nil
}

func (k *KernelStack) OptMemMax() (int, error) { return tcpao.OptMemMax() }

// SetTimeout changes the per-operation timeout of later calls.
func (k *KernelStack) SetTimeout(d time.Duration) {
	k.mu.Lock()
	k.Timeout = d
	k.mu.Unlock()
}

// CloseSocket aborts one socket of the stack's making.
func (k *KernelStack) CloseSocket(s tcpao.Socket) error {
	ks, err := k.sock(s)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, fd := range k.fds {
		if fd == ks.fd {
			k.fds = append(k.fds[:i:i], k.fds[i+1:]...)
			// Abort (RST at once, no FIN or retransmissions later).
			err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
			return errors.Join(os.NewSyscallError("setsockopt(SO_LINGER)", err), os.NewSyscallError("close", unix.Close(fd)))
		}
	}
	return fmt.Errorf("conformance: socket %d already closed", ks.fd)
}

func (k *KernelStack) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	for _, fd := range k.fds {
		errs = append(errs, unix.Close(fd))
	}
	k.fds = nil
	return errors.Join(errs...)
}

// AddMD5 and DelMD5 pass through to the descriptor's TCP_MD5SIG_EXT.
func (s *kernelSock) AddMD5(k tcpao.MD5Key) error { return tcpao.AddMD5(s.Socket, k) }

func (s *kernelSock) DelMD5(r tcpao.MD5Ref) error { return tcpao.DelMD5(s.Socket, r) }
