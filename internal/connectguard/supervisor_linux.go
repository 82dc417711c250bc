//go:build linux

package connectguard

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/internal/speakers"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Supervisor answers the connect() and listen() notifications of one
// seccomp listener.
type Supervisor struct {
	fd    int
	keys  KeysFunc
	opts  SupervisorOptions
	arch  arch
	log   *slog.Logger
	slots chan struct{}
	once  sync.Once
}

// NewSupervisor takes ownership of listenerFD (Run closes it) and answers
// its notifications with keys.
func NewSupervisor(listenerFD int, keys KeysFunc, opts SupervisorOptions) *Supervisor {
	if len(opts.Ports) == 0 {
		opts.Ports = []uint16{speakers.Port}
	}
	if opts.Socket == nil {
		opts.Socket = tcpao.FromFD
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	a, _ := nativeArch() // zero on other arches: every notification is continued
	return &Supervisor{
		fd: listenerFD, keys: keys, opts: opts, arch: a,
		log:   discard(opts.Logger),
		slots: make(chan struct{}, opts.Workers),
	}
}

// Run answers notifications until ctx is done (returns nil) or no process
// uses the filter any more (ErrTargetGone). It first restarts connects and
// listens left blocked by a previous supervisor (see Kick). Run closes the
// listener fd when it returns, after every managed connect and every listen
// in flight was answered (a listen still waiting for Listen when ctx ends is
// refused: see handleListen).
func (s *Supervisor) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		s.once.Do(func() { unix.Close(s.fd) })
	}()
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("connectguard: eventfd: %w", err)
	}
	defer unix.Close(wake)
	stop := context.AfterFunc(ctx, func() {
		_, _ = unix.Write(wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	})
	defer stop()

	if s.opts.PID > 0 {
		if n, err := Kick(s.opts.PID, s.arch.connect, s.arch.listen); err != nil {
			s.log.Warn("restarting connects and listens left blocked by a previous supervisor", "pid", s.opts.PID, "err", err)
		} else if n > 0 {
			s.log.Info("restarted connects and listens left blocked by a previous supervisor", "pid", s.opts.PID, "threads", n)
		}
	}

	fds := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("connectguard: poll listener: %w", err)
		}
		if fds[1].Revents != 0 || ctx.Err() != nil {
			return nil
		}
		if fds[0].Revents&unix.POLLIN == 0 {
			if fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0 {
				return ErrTargetGone
			}
			continue
		}
		var n seccompNotif
		if err := recv(s.fd, &n); err != nil {
			if errors.Is(err, unix.ENOENT) { // the thread was killed or interrupted before RECV
				continue
			}
			return fmt.Errorf("connectguard: SECCOMP_IOCTL_NOTIF_RECV: %w", err)
		}
		start := s.opts.Now()
		if s.isListen(&n) {
			// Not bounded by the slots: a listen may wait long for
			// Listen, and must not hold up the connects meanwhile.
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.handleListen(ctx, &n, start)
			}()
			continue
		}
		dst, managed := s.classify(&n)
		if !managed {
			s.answer(&n, Event{TID: int(n.PID), Dst: dst}, start, 0)
			continue
		}
		s.slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-s.slots; wg.Done() }()
			s.handle(&n, dst, start)
		}()
	}
}

// classify reads the destination and says whether it is on a managed port.
func (s *Supervisor) classify(n *seccompNotif) (netip.AddrPort, bool) {
	if uint32(n.Data.Nr) != s.arch.connect || n.Data.Arch != s.arch.audit || s.arch.audit == 0 {
		return netip.AddrPort{}, false
	}
	dst, err := readSockaddr(int(n.PID), n.Data.Args[1], n.Data.Args[2])
	if err != nil {
		return netip.AddrPort{}, false
	}
	return dst, slices.Contains(s.opts.Ports, dst.Port())
}

// answer sends CONTINUE (errno 0) or the error and reports the event.
func (s *Supervisor) answer(n *seccompNotif, ev Event, start time.Time, errno unix.Errno) {
	if err := respond(s.fd, n.ID, errno); err != nil {
		ev.Outcome = Gone
		if !errors.Is(err, unix.ENOENT) {
			ev.Err = errors.Join(ev.Err, fmt.Errorf("SECCOMP_IOCTL_NOTIF_SEND: %w", err))
		}
	}
	ev.Took = s.opts.Now().Sub(start)
	if s.opts.Observe != nil {
		s.opts.Observe(ev)
	}
}

// handle is one connect to a managed port.
func (s *Supervisor) handle(n *seccompNotif, dst netip.AddrPort, start time.Time) {
	ev := Event{TID: int(n.PID), Dst: dst}
	// The sockaddr was read from the thread's memory: only trust it (and
	// the thread id) if the thread is still blocked in this connect.
	if !idValid(s.fd, n.ID) {
		ev.Outcome = Gone
		s.report(ev, start)
		return
	}
	pid, err := tgid(int(n.PID))
	if err != nil {
		ev.Outcome, ev.Err = Gone, err
		s.report(ev, start)
		return
	}
	ev.PID = pid
	if s.opts.MD5 != nil {
		if k, ok := s.opts.MD5(pid, dst); ok {
			ev.Outcome, ev.Err = s.installMD5(n, pid, k)
			k.Secret.Zero()
			if ev.Outcome == Keyed {
				ev.Keys = 1
			}
			s.finish(n, ev, pid, dst, start)
			return
		}
	}
	keys, current, rnext, ok := s.keys(pid, dst)
	defer func() {
		for _, k := range keys {
			k.Secret.Zero()
		}
	}()
	if !ok {
		s.answer(n, ev, start, 0)
		return
	}
	ev.Outcome, ev.Keys, ev.Err = s.install(n, pid, keys, current, rnext)
	s.finish(n, ev, pid, dst, start)
}

// finish reports and answers one handled connect.
func (s *Supervisor) finish(n *seccompNotif, ev Event, pid int, dst netip.AddrPort, start time.Time) {
	if ev.Outcome == Gone {
		s.report(ev, start)
		return
	}
	var errno unix.Errno
	if ev.Outcome == Denied {
		errno = unix.EKEYREJECTED
		s.log.Error("TCP-AO keys not installed before connect: connect refused", "pid", pid, "dst", dst, "err", ev.Err)
	} else {
		s.log.Info("connect", "pid", pid, "dst", dst, "outcome", ev.Outcome.String(), "keys", ev.Keys)
	}
	s.answer(n, ev, start, errno)
}

func (s *Supervisor) report(ev Event, start time.Time) {
	ev.Took = s.opts.Now().Sub(start)
	if s.opts.Observe != nil {
		s.opts.Observe(ev)
	}
}

// installMD5 duplicates connect()'s socket out of process pid and puts the
// TCP-MD5 password on it.
func (s *Supervisor) installMD5(n *seccompNotif, pid int, k tcpao.MD5Key) (Outcome, error) {
	return s.borrow(n, pid, func(sock tcpao.Socket, sockfd int) (Outcome, error) {
		if _, err := sock.Info(); err == nil {
			return AlreadyKeyed, nil // TCP-AO on it already: a repeated connect
		}
		if err := tcpao.AddMD5(sock, k); err != nil {
			return Denied, fmt.Errorf("pid %d fd %d: %w", pid, sockfd, err)
		}
		return Keyed, nil
	})
}

// install duplicates connect()'s socket out of process pid and adds the
// keys to it, Current_key and RNext_key as asked. It also returns how
// many keys it added.
func (s *Supervisor) install(n *seccompNotif, pid int, keys []tcpao.Key, current, rnext uint8) (Outcome, int, error) {
	added := 0
	out, err := s.borrow(n, pid, func(sock tcpao.Socket, sockfd int) (Outcome, error) {
		if _, err := sock.Info(); err == nil {
			return AlreadyKeyed, nil
		} else if !errors.Is(err, unix.ENOENT) {
			return Denied, fmt.Errorf("pid %d fd %d: %w", pid, sockfd, err)
		}
		if len(keys) == 0 {
			return Denied, fmt.Errorf("pid %d fd %d: managed peer without keys", pid, sockfd)
		}
		for _, k := range keys {
			o := tcpao.AddOptions{SetCurrent: k.SendID == current, SetRNext: k.RecvID == rnext}
			if err := sock.AddKey(k, o); err != nil {
				return Denied, fmt.Errorf("pid %d fd %d: %w", pid, sockfd, err)
			}
			added++
		}
		return Keyed, nil
	})
	return out, added, err
}

// borrow runs f on a duplicate of connect()'s socket (the thread's fd
// sockfd) out of process pid and returns its outcome; Gone when the
// process or the connect is gone, Continued when there is no TCP socket
// to key (a bad fd, which the kernel reports itself; UDP).
func (s *Supervisor) borrow(n *seccompNotif, pid int, f func(sock tcpao.Socket, sockfd int) (Outcome, error)) (Outcome, error) {
	fd, out, err := s.duplicate(n, pid)
	if fd < 0 {
		return out, err
	}
	defer unix.Close(fd)
	return f(s.opts.Socket(fd), int(n.Data.Args[0]))
}

// duplicate returns a duplicate of the stream socket the notifying thread's
// call names (its first argument, a descriptor of process pid), which the
// caller closes; or -1 and the outcome without one: Gone when the process
// or the call is gone, Continued when there is no stream socket (a bad fd,
// which the kernel reports itself; UDP; not a socket).
func (s *Supervisor) duplicate(n *seccompNotif, pid int) (int, Outcome, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, Gone, fmt.Errorf("pidfd_open pid %d: %w", pid, err)
	}
	defer unix.Close(pidfd)
	// pid came from /proc/<tid>/status: if the thread is still in this
	// call, pid was not recycled and pidfd names its process.
	if !idValid(s.fd, n.ID) {
		return -1, Gone, nil
	}
	fd, err := unix.PidfdGetfd(pidfd, int(n.Data.Args[0]), 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return -1, Gone, nil
		}
		// EBADF: the call names a bad fd; let the kernel say so.
		return -1, Continued, nil
	}
	if typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_STREAM {
		unix.Close(fd)
		return -1, Continued, nil // not TCP (UDP "connect" to a BGP port, not a socket): untouched
	}
	return fd, Continued, nil
}

// tgid is the process (thread-group) id of thread tid, from
// /proc/<tid>/status: seccomp notifications carry the thread id, and
// pidfd_open wants a process.
func tgid(tid int) (int, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("tgid of thread %d: %w", tid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Tgid:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return 0, fmt.Errorf("tgid of thread %d: %q: %w", tid, v, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("tgid of thread %d: no Tgid line in /proc/%d/status", tid, tid)
}
