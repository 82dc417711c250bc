//go:build linux

package connectguard

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/internal/sockaddr"
)

// errMPTCP denies a listen of a Multipath TCP socket on a managed port.
var errMPTCP = errors.New("the socket is Multipath TCP, which takes no TCP-AO key (a Go program then listens with plain TCP; " +
	"otherwise run it with GODEBUG=multipathtcp=0)")

// listenCheck is how often a listen held in Listen is checked for still
// waiting (SECCOMP_IOCTL_NOTIF_ID_VALID).
const listenCheck = 250 * time.Millisecond

// isListen reports whether n is a listen(2) of the native ABI.
func (s *Supervisor) isListen(n *seccompNotif) bool {
	return s.arch.audit != 0 && n.Data.Arch == s.arch.audit && uint32(n.Data.Nr) == s.arch.listen
}

// handleListen is one listen(2). listen's arguments carry no address, so
// the socket itself is read: the process is looked up and its socket
// duplicated (as for a managed connect) for every listen, and a listen
// whose socket is not an IPv4 or IPv6 stream socket bound to a managed port
// is continued as soon as that is known, with no question asked and
// nothing written. One on a managed port is continued only after Listen
// returned nil: until then the socket does not listen, so the kernel takes
// no SYN on it, signed or not. Everything else fails the listen with
// EKEYREJECTED (fail closed), except a listen that is gone (the thread was
// interrupted or killed: a restarted listen is a new notification, asked
// about again; Listen keys idempotently).
func (s *Supervisor) handleListen(ctx context.Context, n *seccompNotif, start time.Time) {
	ev := Event{TID: int(n.PID), Listen: true}
	if s.opts.Listen == nil {
		s.answer(n, ev, start, 0)
		return
	}
	// No ID_VALID before the lookup: duplicate checks it after pidfd_open,
	// which proves the thread, and so the pid read here, still in the call.
	pid, err := tgid(int(n.PID))
	if err != nil {
		ev.Outcome, ev.Err = Gone, err
		s.report(ev, start)
		return
	}
	ev.PID = pid
	fd, out, err := s.duplicate(n, pid)
	if fd < 0 {
		ev.Outcome, ev.Err = out, err
		s.finishListen(n, ev, start)
		return
	}
	// Closed after the answer: Listen is done with the duplicate by then.
	defer unix.Close(fd)
	local, ok := boundAddr(fd)
	ev.Local = local
	if !ok || !slices.Contains(s.opts.Ports, local.Port()) {
		s.answer(n, ev, start, 0) // gRPC, BMP, a unix socket: not ours
		return
	}
	ls, out, err := listenSocket(fd, pid, int(n.Data.Args[0]), local)
	if out == Continued {
		out, err = s.askListen(ctx, n, ls)
	}
	ev.Outcome, ev.Err = out, err
	s.finishListen(n, ev, start)
}

// listenSocket describes the duplicate fd of descriptor sockfd of process
// pid, bound to local on a managed port, for Listen. Its outcome is
// Continued when Listen is to be asked, AlreadyKeyed for a socket that
// listens already, Denied for one that cannot be keyed or read.
func listenSocket(fd, pid, sockfd int, local netip.AddrPort) (ListenSocket, Outcome, error) {
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil {
		return ListenSocket{}, Denied, fmt.Errorf("pid %d fd %d: SO_ACCEPTCONN: %w", pid, sockfd, err)
	} else if v != 0 {
		return ListenSocket{}, AlreadyKeyed, nil // a repeated listen: keyed at its first
	}
	if p, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil {
		return ListenSocket{}, Denied, fmt.Errorf("pid %d fd %d: SO_PROTOCOL: %w", pid, sockfd, err)
	} else if p == unix.IPPROTO_MPTCP {
		return ListenSocket{}, Denied, fmt.Errorf("pid %d fd %d: %w", pid, sockfd, errMPTCP)
	}
	ls := ListenSocket{PID: pid, FD: sockfd, Dup: fd, Local: local}
	var err error
	// A device the socket is bound to that could not be read would key it
	// with another VRF's keys: refused instead.
	if ls.BoundDev, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BINDTOIFINDEX); err != nil {
		return ls, Denied, fmt.Errorf("pid %d fd %d: SO_BINDTOIFINDEX: %w", pid, sockfd, err)
	}
	if ls.Cookie, err = unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE); err != nil {
		return ls, Denied, fmt.Errorf("pid %d fd %d: SO_COOKIE: %w", pid, sockfd, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return ls, Denied, fmt.Errorf("pid %d fd %d: fstat: %w", pid, sockfd, err)
	}
	ls.Inode = st.Ino
	return ls, Continued, nil
}

// askListen calls Listen for ls and says how to answer the listen: Keyed
// when it returned nil, Gone when the listen stopped waiting meanwhile,
// Denied otherwise (the supervisor stopping included). Listen's context
// ends when either happens, so that a Listen waiting for keys stops
// waiting for a listen nobody waits on any more.
func (s *Supervisor) askListen(ctx context.Context, n *seccompNotif, ls ListenSocket) (Outcome, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var gone atomic.Bool
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(listenCheck)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if !idValid(s.fd, n.ID) {
					gone.Store(true)
					cancel()
					return
				}
			}
		}
	}()
	err := s.opts.Listen(actx, ls)
	close(done)
	switch {
	case err == nil:
		return Keyed, nil
	case gone.Load():
		return Gone, nil
	case ctx.Err() != nil:
		return Denied, fmt.Errorf("aokeyd's supervisor stopped before the listener was keyed: %w", err)
	}
	return Denied, err
}

// finishListen reports and answers one listen on a managed port.
func (s *Supervisor) finishListen(n *seccompNotif, ev Event, start time.Time) {
	switch ev.Outcome {
	case Gone:
		s.report(ev, start)
		return
	case Denied:
		s.log.Error("listener not keyed: listen refused (EKEYREJECTED)", "pid", ev.PID, "local", ev.Local, "err", ev.Err)
		s.answer(n, ev, start, unix.EKEYREJECTED)
		return
	case Keyed, AlreadyKeyed:
		s.log.Info("listen", "pid", ev.PID, "local", ev.Local, "outcome", ev.Outcome.String())
	}
	s.answer(n, ev, start, 0)
}

// boundAddr is the IPv4 or IPv6 address socket fd is bound to.
func boundAddr(fd int) (netip.AddrPort, bool) { return sockaddr.Bound(fd) }
