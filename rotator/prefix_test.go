package rotator

import (
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// prefixLink is a session whose local end (x) was accepted by a listener
// that holds the peer's keys for a prefix binding (192.0.2.0/24): x's keys
// carry the prefix, as the kernel copies them on accept. The peer (y)
// lags: it holds only the old key until the test gives it the new one.
func prefixLink(t *testing.T, peer string) (l *link, a, b tcpao.Key, dx func(...DesiredKey) Desired) {
	t.Helper()
	inherited := mkKey("192.0.2.0/24", 1, 1, "alpha")
	a, b = mkKey(peer, 1, 1, "alpha"), mkKey(peer, 2, 2, "bravo")
	dx = func(keys ...DesiredKey) Desired {
		d := Desired{Socket: "peer 192.0.2.1", Kind: Established, Keys: keys}
		for _, k := range keys {
			if !k.AcceptOnly {
				d.WantCurrent, d.WantRNext = ID(k.SendID), ID(k.RecvID)
			}
		}
		return d
	}
	l = &link{t: t, now: t0}
	l.x, l.y = pair(inherited) // the far end at 192.0.2.1, in the binding's prefix
	rnd := rand.New(rand.NewPCG(1, 2))
	log := slog.New(slog.DiscardHandler)
	l.mx = newMachine(pid("x"), l.x, dx(dk(a)), testCfg(), nil, rnd, log, t0)
	l.my = newMachine(pid("y"), l.y, farDesired(want(mkKey("192.0.2.9/32", 1, 1, "alpha"))), testCfg(), nil, rnd, log, t0)
	l.nextX, l.nextY = t0, t0.Add(500*time.Millisecond)
	return l, a, b, dx
}

// TestPrefixBindingLaggingPeer: a session under a prefix binding is steady
// after take-over (no write, nothing blocked), whether the desired keys name
// the peer's host prefix or the binding's prefix; when a new key arrives
// that the peer does not have, the new key is installed and announced but
// never becomes Current_key: the roll aborts with its reason and retries,
// as under a host binding, and completes once the peer has the key. Every
// segment both ways verifies throughout (link.tick fails the test
// otherwise). Before the planner treated the inherited key as the desired
// one, the host-prefix case replaced it by a forced delete naming the new
// key as Current_key, and the machine completed the roll on that switch.
func TestPrefixBindingLaggingPeer(t *testing.T) {
	for _, c := range []struct{ name, peer string }{
		{"desired for the host", "192.0.2.1/32"},
		{"desired for the binding's prefix", "192.0.2.0/24"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, a, b, dx := prefixLink(t, c.peer)
			for range 40 {
				l.tick()
			}
			if st, ops := *l.mx.st, l.x.writes(); st.State != StateSteady || st.LastError != "" || ops != 0 {
				t.Fatalf("after take-over: state %s, last error %q, %d writes; want steady, no error, no write", st.State, st.LastError, ops)
			}
			if sp := PlanSocket(*l.mx.desired, observe(t, l.x)); !sp.Empty() || len(sp.Blocked)+len(sp.Deferred) > 0 {
				t.Fatalf("plan after take-over not empty: %v", opLines(sp))
			}

			// The new key; the old one may still be received only.
			l.mx.setDesired(dx(DesiredKey{Key: a, AcceptOnly: true}, dk(b)), l.now)
			newCurrent := 0
			for range 4 * 60 * 4 { // four minutes: two timeouts and a backoff
				l.tick()
				if cur, _ := l.x.current(); cur == ID(2) {
					newCurrent++
				}
			}
			st := *l.mx.st
			if newCurrent != 0 {
				t.Fatalf("the new key was Current_key in %d samples before the peer had it", newCurrent)
			}
			if st.Rolls != 0 || st.Attempts < 2 || !strings.Contains(st.LastAbort, "did not send with key recv=2") {
				t.Fatalf("rolls=%d attempts=%d abort=%q; want no roll, retried aborts saying why", st.Rolls, st.Attempts, st.LastAbort)
			}

			// The peer gets the key: the roll completes.
			l.my.setDesired(farDesired(want(mkKey("192.0.2.9/32", 2, 2, "bravo"))), l.now)
			for i := 0; l.mx.st.Rolls == 0; i++ {
				if i > 4*60*30 {
					t.Fatalf("roll did not complete once the peer had the key: %+v\nx=%s", l.mx.st, dump(l.x))
				}
				l.tick()
			}
			if cur, _ := l.x.current(); cur != ID(2) {
				t.Fatalf("after the roll: x=%s, want current 2", dump(l.x))
			}
		})
	}
}

// switchOnAdd is a socket whose install step also moves Current_key to the
// key it adds, as a forced delete naming the new key did (the old planner
// under a prefix binding): a switch aokeyd caused, not the peer.
type switchOnAdd struct{ *testSock }

func (s switchOnAdd) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	if err := s.testSock.AddKey(k, o); err != nil {
		return err
	}
	id := k.SendID
	return s.testSock.SetInfo(tcpao.InfoChange{Current: &id})
}

// TestOwnSwitchDoesNotCompleteRoll: Current_key moved to the new key by
// aokeyd's own write is not the peer's RNext: the machine puts Current_key
// back at once (the peer was never seen with the new key), keeps waiting for
// the peer, and aborts when it does not come. Before, the machine took its
// own switch for the peer's and completed the roll.
func TestOwnSwitchDoesNotCompleteRoll(t *testing.T) {
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	l := newLink(t, a, want(a), want(a), nil)
	l.mx.sock = switchOnAdd{l.x}
	l.mx.setDesired(Desired{Keys: []DesiredKey{{Key: a, AcceptOnly: true}, dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)}, l.now)
	for range 4 * 45 {
		l.tick() // fails on the first segment x signs with b
	}
	st := *l.mx.st
	if st.Rolls != 0 || st.Attempts != 1 || !strings.Contains(st.LastAbort, "did not send with key recv=2") {
		t.Fatalf("rolls=%d attempts=%d abort=%q; want one abort saying why and no roll", st.Rolls, st.Attempts, st.LastAbort)
	}
	if cur, _ := l.x.current(); cur != ID(1) {
		t.Fatalf("current moved off the old key: %s", dump(l.x))
	}
}

// segmentOnAdd is a session socket whose peer's segment arrives right after
// the install's add, before the install reads the socket back: the peer
// asks for the new key (RNext) ahead of the roll, so the kernel switches
// Current_key to it the moment it holds it.
type segmentOnAdd struct {
	*testSock
	peer *testSock
}

func (s segmentOnAdd) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	if err := s.testSock.AddKey(k, o); err != nil {
		return err
	}
	s.peer.sendTo(s.testSock)
	return nil
}

// TestPeerSwitchDuringInstallIsKept: a Current_key switch the peer's RNext
// made between the install's add and its read-back is the peer's, not
// aokeyd's: it is kept (no write puts the old key back, and no warning
// says aokeyd moved it) and proves that the peer holds the new key, so the
// roll enters its grace period in the install's own step. Before, the
// machine put the old key back and waited for the peer's next segment to
// switch again (ten peers of the 512-peer bench's roll, each a warning).
func TestPeerSwitchDuringInstallIsKept(t *testing.T) {
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	x, y := pair(a)
	must(t, y.AddKey(mirror(b), tcpao.AddOptions{SetRNext: true})) // the far end asks for b ahead of the roll
	var log strings.Builder
	m := newMachine(pid("x"), segmentOnAdd{x, y}, want(a), testCfg(), nil, rand.New(rand.NewPCG(1, 2)),
		slog.New(slog.NewTextHandler(&log, nil)), t0)
	m.setDesired(Desired{Keys: []DesiredKey{{Key: a, AcceptOnly: true}, dk(b)}, WantCurrent: ID(2), WantRNext: ID(2)}, t0)
	ops := x.writes()
	m.step(t0)
	if cur, _ := x.current(); cur != ID(2) {
		t.Fatalf("Current_key after the install: %s; want the peer's switch to key 2 kept", dump(x))
	}
	if m.st.State != StateGrace {
		t.Errorf("state %s after the install step, want %s: the peer's switch proves it holds the key", m.st.State, StateGrace)
	}
	if w := x.writes() - ops; w != 2 {
		t.Errorf("%d writes in the install step, want 2 (the add, the announce)", w)
	}
	if strings.Contains(log.String(), "putting it back") {
		t.Errorf("the peer's switch was logged as aokeyd's own:\n%s", log.String())
	}
}
