package connectguard

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// KeysFunc answers, for one connect() of process pid (the thread-group id,
// never a thread id) to dst, the TCP-AO key set to install on the socket
// before the connect proceeds. current is the SendID of the key to make
// Current_key, rnext the RecvID to announce as RNext_key. ok=false means dst
// is not a managed AO peer: the connect is continued untouched.
//
// The supervisor owns the returned keys: it zeroes their secrets after the
// install, so a KeysFunc returns copies (keystore.MKT.Key does). It is called
// from several goroutines at once and must not block for long: the connect
// waits for it.
type KeysFunc func(pid int, dst netip.AddrPort) (keys []tcpao.Key, current, rnext uint8, ok bool)

// ListenSocket is one socket held in listen(2) on a managed port, as the
// supervisor hands it to ListenFunc. The socket is bound (Local) and does
// not listen yet: until ListenFunc returns, the kernel takes no SYN on it.
type ListenSocket struct {
	// PID is the listening process (the thread-group id), FD the socket's
	// descriptor number in it.
	PID, FD int
	// Dup is the supervisor's duplicate of that socket (pidfd_getfd): the
	// same socket, so keys set on Dup are on the program's socket. It is
	// valid until ListenFunc returns, then closed.
	Dup int
	// Local is the address the socket is bound to (getsockname; an IPv6
	// socket's as it is, v4-mapped or not). BoundDev is the ifindex of the
	// device it is bound to (SO_BINDTODEVICE: a speaker's per-VRF
	// listener), 0 when unbound.
	Local    netip.AddrPort
	BoundDev int
	// Inode and Cookie name the socket as sock_diag lists it once it
	// listens.
	Inode, Cookie uint64
}

// ListenFunc keys one socket before its listen(2) proceeds, with the keys
// every listener of the program carries. nil lets the listen proceed; an
// error fails it with EKEYREJECTED (fail closed: a listener that would take
// an unsigned SYN from a peer that signs never listens). It may wait, for
// keys not read yet say: ctx ends when the listen no longer waits (the
// thread was interrupted, and the restarted call is a new notification, or
// killed) or when the supervisor stops, which then refuses the listen.
// It is called from a goroutine of its own for each listen.
type ListenFunc func(ctx context.Context, l ListenSocket) error

// ChildEnv marks the re-executed launcher child (see RunChildIfRequested).
const ChildEnv = "AOKEYD_CONNECTGUARD_CHILD"

// Sentinel errors.
var (
	// ErrUnsupported is returned off Linux and on Linux architectures
	// without a filter (only amd64 and arm64 have one).
	ErrUnsupported = errors.New("connectguard: connect interception is not supported on this platform")
	// ErrTargetGone is returned by Supervisor.Run when no process uses the
	// filter any more (the supervised program and all its children exited).
	ErrTargetGone = errors.New("connectguard: the supervised program has exited")
	// ErrProtocol is returned by Fetch for a holder answer it cannot parse.
	ErrProtocol = errors.New("connectguard: bad answer from the listener holder")
)

// LaunchOptions configure Launch.
type LaunchOptions struct {
	// SocketPath is the unix socket on which the launcher serves the
	// listener fd to supervisors (required). Created with mode 0600;
	// a stale socket file is replaced.
	SocketPath string
	// Self is the executable re-run as the filter-installing child
	// (default /proc/self/exe). The child must call RunChildIfRequested
	// first thing in main.
	Self string
	// Logger receives the launcher's own messages (default: discard).
	Logger *slog.Logger
	// ReadyTimeout bounds the wait for the child's listener fd (default 10s).
	ReadyTimeout time.Duration
	// Exit ends the process with the program's status (default os.Exit);
	// tests replace it.
	Exit func(code int)
}

// SupervisorOptions configure a Supervisor.
type SupervisorOptions struct {
	// PID is the supervised program's process id as the holder reported it
	// (Listener.PID). Run uses it once at start to restart connects and
	// listens that a previous supervisor received but never answered. 0
	// skips that.
	PID int
	// Ports are the managed ports (default speakers.Port, BGP's): the
	// destination ports KeysFunc is asked about, and the local ports
	// Listen is. A connect to any other port is continued at once, a
	// listen as soon as its socket's port is read.
	Ports []uint16
	// Listen keys a socket bound to a managed port before its listen(2)
	// proceeds. nil: every listen is continued at once, untouched.
	Listen ListenFunc
	// Socket wraps a duplicated socket fd for the install (default
	// tcpao.FromFD). Tests inject a recorder.
	Socket func(fd int) tcpao.Socket
	// Workers bounds the managed connects handled at once (default 4).
	// Listens are not counted: each one may wait long (ListenFunc), and a
	// thread waits in at most one, so the program's threads bound them.
	Workers int
	// Logger receives one line per managed connect and every error
	// (default: discard). Never key bytes.
	Logger *slog.Logger
	// Observe, when set, is called after each notification is answered
	// (for metrics and tests).
	Observe func(Event)
	// Now is the clock for Event.Took (default time.Now).
	Now func() time.Time
	// MD5, when set, is asked first: a TCP-MD5 password for the connect
	// (a peer that still runs TCP-MD5), which the supervisor installs
	// (TCP_MD5SIG_EXT) instead of TCP-AO keys. The key is a copy the
	// supervisor zeroes.
	MD5 func(pid int, dst netip.AddrPort) (tcpao.MD5Key, bool)
}

// Listener is what the holder serves: the seccomp listener fd and the pid of
// the supervised program.
type Listener struct {
	FD  int
	PID int
}

// Outcome says how a connect() or listen() was answered.
type Outcome int

// Outcomes of one notification.
const (
	// Continued: not a managed AO peer (other family, port, or KeysFunc
	// said no), or a listen not on a managed port (or no Listen);
	// continued untouched.
	Continued Outcome = iota
	// Keyed: keys installed (a listen: Listen returned nil), then
	// continued.
	Keyed
	// AlreadyKeyed: the socket had TCP-AO already (a repeated connect),
	// or listens already (a repeated listen, which only changes its
	// backlog: it was keyed at its first); continued without touching it.
	AlreadyKeyed
	// Denied: the install failed (a listen: Listen failed, the supervisor
	// stopped while it waited, or the socket is Multipath TCP, which takes
	// no TCP-AO key); the call failed with EKEYREJECTED.
	Denied
	// Gone: the notifying thread went away (killed, or the syscall was
	// interrupted and restarted); nothing answered.
	Gone
)

func (o Outcome) String() string {
	switch o {
	case Continued:
		return "continued"
	case Keyed:
		return "keyed"
	case AlreadyKeyed:
		return "already-keyed"
	case Denied:
		return "denied"
	case Gone:
		return "gone"
	}
	return "unknown"
}

// Event describes one answered notification.
type Event struct {
	// TID is the notifying thread, PID its process (0 when not looked up:
	// only managed ports, and every listen, are).
	TID, PID int
	// Listen: the call was listen(2), not connect(2).
	Listen bool
	// Dst is a connect's destination; invalid for non-IP families and
	// for a listen.
	Dst netip.AddrPort
	// Local is a listen's bound address; invalid for non-IP families and
	// for a connect.
	Local   netip.AddrPort
	Outcome Outcome
	// Keys is how many keys were installed.
	Keys int
	Err  error
	// Took is the time from RECV to SEND.
	Took time.Duration
}

func discard(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
