package connectguard

import (
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
	// (Listener.PID). Run uses it once at start to restart connects that a
	// previous supervisor received but never answered. 0 skips that.
	PID int
	// Ports are the destination ports KeysFunc is asked about (default
	// speakers.Port, BGP's). Connects to any other port are continued at once.
	Ports []uint16
	// Socket wraps a duplicated socket fd for the install (default
	// tcpao.FromFD). Tests inject a recorder.
	Socket func(fd int) tcpao.Socket
	// Workers bounds the managed connects handled at once (default 4).
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

// Outcome says how a connect() was answered.
type Outcome int

// Outcomes of one notification.
const (
	// Continued: not a managed AO peer (other family, port, or KeysFunc
	// said no); continued untouched.
	Continued Outcome = iota
	// Keyed: keys installed, then continued.
	Keyed
	// AlreadyKeyed: the socket had TCP-AO already (a repeated connect);
	// continued without touching it.
	AlreadyKeyed
	// Denied: the install failed; the connect failed with EKEYREJECTED.
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
	// only managed ports are).
	TID, PID int
	// Dst is the destination; invalid for non-IP families.
	Dst     netip.AddrPort
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
