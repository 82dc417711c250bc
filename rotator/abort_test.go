package rotator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/tcpao"
)

// hook is where a step fails in the abort table: the guard's Before, the
// socket option itself, or the guard's After.
type hook int

const (
	failBefore hook = iota + 1
	failKernel
	failAfter
)

// errNotUp and notUpDrop stand for a SessionGuard's typed errors (bgp's
// ErrNotEstablished and *DropError): the abort must carry them with %w.
var errNotUp = errors.New("test: session not established")

type dropErr struct{ step Step }

func (e *dropErr) Error() string { return fmt.Sprintf("test: session dropped during %s", e.step) }

// stepGuard fails the steps named in fail at their hook and records the step
// that runs, so that stepSock can fail that step's socket option.
type stepGuard struct {
	fail map[Step]hook
	cur  Step
}

func (g *stepGuard) Before(_ context.Context, _ PeerID, s Step) error {
	g.cur = s
	if g.fail[s] == failBefore {
		return fmt.Errorf("neighbor is idle: %w", errNotUp)
	}
	return nil
}

func (g *stepGuard) After(_ context.Context, _ PeerID, s Step) error {
	if g.fail[s] == failAfter {
		return &dropErr{step: s}
	}
	return nil
}

// stepSock fails every key write with ENOMEM while the guard runs a step
// that fails at failKernel. With moveCur, an added key becomes Current_key
// (as the kernel must not do; the machine puts it back).
type stepSock struct {
	*testSock
	g       *stepGuard
	moveCur bool
}

func (s *stepSock) failing() bool { return s.g.fail[s.g.cur] == failKernel }

func (s *stepSock) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	if s.failing() {
		return syscall.ENOMEM
	}
	if err := s.testSock.AddKey(k, o); err != nil || !s.moveCur {
		return err
	}
	return s.Sock.SetInfo(tcpao.InfoChange{Current: &k.SendID})
}

func (s *stepSock) DelKey(d tcpao.DelKey) error {
	if s.failing() {
		return syscall.ENOMEM
	}
	return s.testSock.DelKey(d)
}

func (s *stepSock) SetInfo(c tcpao.InfoChange) error {
	// The announce made in the install's borrow runs between the
	// install's Before and After.
	inInstall := s.g.cur == StepInstall && c.RNext != nil && c.Current == nil && s.g.fail[StepAnnounce] == failKernel
	if s.failing() || inInstall {
		return syscall.ENOMEM
	}
	return s.testSock.SetInfo(c)
}

// TestAbortReasons drives one roll from key 1 to key 2 into each way it can
// abort and checks the status's reason, the failed step and that errors.Is
// and errors.As reach the guard's or the socket's own error.
func TestAbortReasons(t *testing.T) {
	cases := []struct {
		name      string
		fail      map[Step]hook
		moveCur   bool
		peerSends bool // the peer sends with the new key once it is announced
		// pre: the new key is on the socket before the roll (its announce
		// is a step of its own); noRNext: the roll installs the new key
		// without announcing it (desired names no RNext_key). Otherwise
		// the install announces in its own borrow and guard calls.
		pre, noRNext bool
		reason       AbortReason
		step         Step
		is           error // errors.Is(LastAbortErr, is)
		asDrop       bool  // errors.As(LastAbortErr, **dropErr)
		text         string
	}{
		{name: "switch timeout", reason: AbortSwitchTimeout, text: "did not send with key recv=2"},
		{name: "install refused", fail: map[Step]hook{StepInstall: failBefore}, reason: AbortGuardRefused, step: StepInstall, is: errNotUp},
		{name: "install kernel error", fail: map[Step]hook{StepInstall: failKernel}, reason: AbortKernelError, step: StepInstall, is: syscall.ENOMEM},
		{name: "install dropped", noRNext: true, fail: map[Step]hook{StepInstall: failAfter}, reason: AbortSessionDropped, step: StepInstall, asDrop: true},
		{name: "announce refused", pre: true, fail: map[Step]hook{StepAnnounce: failBefore}, reason: AbortGuardRefused, step: StepAnnounce, is: errNotUp},
		{name: "announce kernel error", pre: true, fail: map[Step]hook{StepAnnounce: failKernel}, reason: AbortKernelError, step: StepAnnounce, is: syscall.ENOMEM},
		{name: "announce dropped", pre: true, fail: map[Step]hook{StepAnnounce: failAfter}, reason: AbortSessionDropped, step: StepAnnounce, asDrop: true},
		{name: "install's announce kernel error", fail: map[Step]hook{StepAnnounce: failKernel}, reason: AbortKernelError, step: StepAnnounce, is: syscall.ENOMEM},
		{name: "install's announce dropped", fail: map[Step]hook{StepAnnounce: failAfter}, reason: AbortSessionDropped, step: StepAnnounce, asDrop: true},
		{name: "switch refused", peerSends: true, fail: map[Step]hook{StepSwitch: failBefore}, reason: AbortGuardRefused, step: StepSwitch, is: errNotUp},
		{name: "switch kernel error", peerSends: true, fail: map[Step]hook{StepSwitch: failKernel}, reason: AbortKernelError, step: StepSwitch, is: syscall.ENOMEM},
		{name: "switch dropped", peerSends: true, fail: map[Step]hook{StepSwitch: failAfter}, reason: AbortSessionDropped, step: StepSwitch, asDrop: true},
		{name: "retire refused", peerSends: true, fail: map[Step]hook{StepRetire: failBefore}, reason: AbortGuardRefused, step: StepRetire, is: errNotUp},
		{name: "retire kernel error", peerSends: true, fail: map[Step]hook{StepRetire: failKernel}, reason: AbortKernelError, step: StepRetire, is: syscall.ENOMEM},
		{name: "retire dropped", peerSends: true, fail: map[Step]hook{StepRetire: failAfter}, reason: AbortSessionDropped, step: StepRetire, asDrop: true},
		{name: "install moved current, putting it back fails", moveCur: true, fail: map[Step]hook{StepRestore: failKernel},
			reason: AbortKernelError, step: StepRestore, is: syscall.ENOMEM, text: "putting send=1 back failed"},
		{name: "dropped, and rnext not put back", peerSends: true, fail: map[Step]hook{StepSwitch: failAfter, StepRestore: failBefore},
			reason: AbortSessionDropped, step: StepSwitch, asDrop: true, text: "restoring rnext=1 failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
			g := &stepGuard{fail: c.fail}
			fs := newEstablished(a)
			if c.pre {
				fs = newEstablished(a, b)
			}
			s := &stepSock{testSock: fs, g: g, moveCur: c.moveCur}
			m := newMachine(pid("p"), s, want(a), testCfg(), g, rand.New(rand.NewPCG(1, 2)), slog.New(slog.DiscardHandler), t0)
			d := want(b)
			if c.noRNext {
				d = Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(1)}
			}
			m.setDesired(d, t0)
			now := t0
			for range 120 {
				if m.st.Attempts > 0 || m.st.Rolls > 0 {
					break
				}
				// The peer sends with the new key once announced, and goes
				// on (the handshake made the old key one it sent with, so
				// the retire waits to see the new one after the grace).
				if c.peerSends && (m.st.State == StateAnnounced || m.st.State == StateGrace) {
					s.peerSendsWith(b, 1)
				}
				m.step(now)
				now = now.Add(time.Second)
			}
			st := *m.st
			if st.Attempts != 1 || st.State != StateBackoff {
				t.Fatalf("attempts %d state %s rolls %d: want one aborted roll", st.Attempts, st.State, st.Rolls)
			}
			if st.LastAbortReason != c.reason {
				t.Errorf("reason %v, want %v (abort %q)", st.LastAbortReason, c.reason, st.LastAbort)
			}
			var ae *AbortError
			if !errors.As(st.LastAbortErr, &ae) {
				t.Fatalf("LastAbortErr %#v is not an *AbortError", st.LastAbortErr)
			}
			if ae.Reason != c.reason || ae.Step != c.step {
				t.Errorf("AbortError reason %v step %q, want %v %q", ae.Reason, ae.Step, c.reason, c.step)
			}
			if st.LastAbort != st.LastAbortErr.Error() {
				t.Errorf("LastAbort %q is not the error's text %q", st.LastAbort, st.LastAbortErr)
			}
			if c.is != nil && !errors.Is(st.LastAbortErr, c.is) {
				t.Errorf("errors.Is(%q, %v) false", st.LastAbort, c.is)
			}
			var de *dropErr
			if errors.As(st.LastAbortErr, &de) != c.asDrop {
				t.Errorf("errors.As(%q, *dropErr) = %t, want %t", st.LastAbort, !c.asDrop, c.asDrop)
			}
			if !strings.Contains(st.LastAbort, c.text) {
				t.Errorf("abort %q does not say %q", st.LastAbort, c.text)
			}
		})
	}
}

func TestAbortReasonString(t *testing.T) {
	// The strings are the rotations_aborted_total reason labels that
	// dashboards select on: a change here is a change for operators.
	for r, want := range map[AbortReason]string{
		AbortNone:           "",
		AbortSwitchTimeout:  "switch-timeout",
		AbortGuardRefused:   "guard-refused",
		AbortSessionDropped: "session-down",
		AbortKernelError:    "kernel-error",
	} {
		if got := r.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", r, got, want)
		}
	}
}

// bgpGuard is the daemon's adapter in small: bgp.Guard as the rotator's
// SessionGuard for one neighbor.
type bgpGuard struct {
	g    *bgp.Guard
	peer peer.Key
}

func (b bgpGuard) Before(ctx context.Context, _ PeerID, s Step) error {
	return b.g.Before(ctx, b.peer, string(s))
}

func (b bgpGuard) After(ctx context.Context, _ PeerID, s Step) error {
	return b.g.After(ctx, b.peer, string(s))
}

// sessionList is the speaker's view of one session; drop takes it down.
type sessionList struct {
	mu   sync.Mutex
	peer bgp.PeerInfo
}

func (l *sessionList) Peer(context.Context, peer.Key) (bgp.PeerInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.peer, nil
}

func (l *sessionList) drop() {
	l.mu.Lock()
	l.peer.State, l.peer.Flops = bgp.StateIdle, l.peer.Flops+1
	l.mu.Unlock()
}

// dropOnAnnounce takes the session down while the announce (SetInfo RNext)
// runs.
type dropOnAnnounce struct {
	*testSock
	l *sessionList
}

func (s dropOnAnnounce) SetInfo(c tcpao.InfoChange) error {
	err := s.testSock.SetInfo(c)
	if c.RNext != nil && c.Current == nil {
		s.l.drop()
	}
	return err
}

// With bgp's real Guard, the abort carries its typed errors: errors.Is
// ErrNotEstablished for a refused step, errors.As *DropError (and Is
// ErrSessionDropped) for a session that dropped during one.
func TestAbortCarriesBGPGuardErrors(t *testing.T) {
	nbr := netip.MustParseAddr("192.0.2.2")
	up := bgp.PeerInfo{Neighbor: nbr, State: bgp.StateEstablished, Uptime: t0.Add(-time.Hour)}
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	for _, c := range []struct {
		name   string
		down   bool // the session is down before the roll
		reason AbortReason
		is     error
		asDrop bool
	}{
		{name: "not established", down: true, reason: AbortGuardRefused, is: bgp.ErrNotEstablished},
		{name: "dropped during announce", reason: AbortSessionDropped, is: bgp.ErrSessionDropped, asDrop: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &sessionList{peer: up}
			if c.down {
				l.drop()
			}
			g := bgpGuard{g: bgp.NewGuard(l, nil), peer: peer.KeyOf(nbr, "")}
			s := dropOnAnnounce{testSock: newEstablished(a), l: l}
			m := newMachine(pid("p"), s, want(a), testCfg(), g, rand.New(rand.NewPCG(1, 2)), slog.New(slog.DiscardHandler), t0)
			m.setDesired(want(b), t0)
			m.step(t0)
			st := *m.st
			if st.LastAbortReason != c.reason {
				t.Fatalf("reason %v, want %v (state %s, abort %q)", st.LastAbortReason, c.reason, st.State, st.LastAbort)
			}
			if !errors.Is(st.LastAbortErr, c.is) {
				t.Errorf("errors.Is(%q, %v) false", st.LastAbort, c.is)
			}
			var de *bgp.DropError
			if errors.As(st.LastAbortErr, &de) != c.asDrop {
				t.Errorf("errors.As(%q, *bgp.DropError) = %t, want %t", st.LastAbort, !c.asDrop, c.asDrop)
			}
			if c.asDrop && (de.Step != string(StepAnnounce) || de.Why != "state") {
				t.Errorf("DropError step %q why %q, want announce, state", de.Step, de.Why)
			}
		})
	}
}
