package rotator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestCarriedAfterDropMidRoll: the session's Current_key moved to the new
// key (the peer sends with it: its pkt_good is above zero) and the session
// goes down before the roll completes (a long grace period). The down
// peer's carried keys (CarriedByPeer) are what its last session carried,
// the new key among them: a listener must keep the key the peer last
// authenticated with. (Busy run 9's case is TestCarriedAfterDropJustAnnounced.)
func TestCarriedAfterDropMidRoll(t *testing.T) { synctest.Test(t, testCarriedAfterDropMidRoll) }

func testCarriedAfterDropMidRoll(t *testing.T) {
	cfg := Config{SwitchTimeout: time.Hour, Grace: time.Hour, Poll: time.Millisecond, Backoff: time.Hour}
	us := NewController(Options{Config: cfg})
	them := NewController(Options{Config: cfg})
	defer us.Close()
	defer them.Close()
	id := pid("p")
	k1, k2 := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	x, y := connect(t, us, them, id, k1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	drops := 0
	wg.Add(1)
	go pump(ctx, &wg, x, y, &drops, &mu)
	// k1 and k2 both desired, k2 preferred; the far end prefers k2 too.
	roll := Desired{Keys: []DesiredKey{dk(k1), dk(k2)}, WantCurrent: ID(2), WantRNext: ID(2)}
	us.SetDesired(id, roll)
	them.SetDesired(id, farDesired(roll))
	var last Status
	waitUntil(t, 20*time.Second, "the switch to k2 on our session, its segments good, the roll in its grace period", func() bool {
		st := us.Status()
		if len(st) != 1 || st[0].State != StateGrace || st[0].Current != ID(2) {
			return false
		}
		for _, k := range st[0].Counters.Keys {
			if k.SendID == 2 && k.PktGood > 0 {
				last = st[0]
				return true
			}
		}
		return false
	})
	cancel()
	wg.Wait()
	if last.Rolls != 0 {
		t.Fatalf("the roll completed (%d rolls): the session must drop before it does", last.Rolls)
	}
	us.PeerDown(id) // the far end restarts the session before the roll completes
	them.PeerDown(id)
	carried := us.CarriedByPeer()[id]
	if !slices.ContainsFunc(carried, func(c CarriedKey) bool { return sameSessionKey(normRef(c.Ref), normRef(k2.KeyRef)) }) {
		t.Fatalf("after the session dropped mid-roll, the peer's carried keys %v lack k2 (Current_key, pkt_good>0 on the session); status at the switch: current=%s counters.carried=%v",
			refsOf(carried), last.Current, last.Counters.Carried)
	}
	if got := us.Carried(); !slices.ContainsFunc(got, func(r tcpao.KeyRef) bool { return r.SendID == 2 }) {
		t.Fatalf("Carried() %v lacks k2", got)
	}
}

func refsOf(ks []CarriedKey) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.Ref.String())
	}
	return out
}

// TestCarriedAfterDropJustAnnounced: busy run 9's case. The roll installs
// k2 and announces it (RNext_key) in the install's borrow, after the
// install's read-back; the session goes down before the machine reads its
// socket again (its poll is far off). k2 was RNext_key on the session when
// it ended (the peer may have switched to it at once: the kernel moves
// Current_key to the key a peer's RNext names), so the down peer's carried
// keys hold it: a write of RNext_key or Current_key counts as carried
// from the write on, not from the next read.
func TestCarriedAfterDropJustAnnounced(t *testing.T) {
	synctest.Test(t, testCarriedAfterDropJustAnnounced)
}

func testCarriedAfterDropJustAnnounced(t *testing.T) {
	us, id, k2 := rollToK2(t, nil, nil)
	var at Status
	waitUntil(t, time.Second, "k2 announced on our session", func() bool {
		st, _ := us.StatusOf(id)
		at = st
		return st.State == StateAnnounced
	})
	us.PeerDown(id)
	carriesK2(t, us, id, k2, fmt.Sprintf("just after k2 was announced (RNext_key on the session; status at the announce: rnext=%s counters.carried=%v)",
		at.RNext, at.Counters.Carried))
}

// afterGuard holds the After of one step until released (like a speaker
// slow to answer whether the session survived the write).
type afterGuard struct {
	step    Step
	held    chan struct{} // closed when After starts holding
	release chan struct{}
	once    sync.Once
}

func (g *afterGuard) Before(context.Context, PeerID, Step) error { return nil }

func (g *afterGuard) After(_ context.Context, _ PeerID, s Step) error {
	if s == g.step {
		g.once.Do(func() { close(g.held) })
		<-g.release
	}
	return nil
}

// TestCarriedAfterDropInAnnounce: the session goes down (PeerDown) while
// the machine is inside the step that announces k2, after the write and
// before the step returns. The down peer's carried keys are what that
// step left, not what the machine had published when PeerDown came: k2
// was RNext_key on the session when the session ended.
func TestCarriedAfterDropInAnnounce(t *testing.T) { synctest.Test(t, testCarriedAfterDropInAnnounce) }

func testCarriedAfterDropInAnnounce(t *testing.T) {
	g := &afterGuard{step: StepAnnounce, held: make(chan struct{}), release: make(chan struct{})}
	us, id, k2 := rollToK2(t, g, nil)
	<-g.held
	done := us.PeerDown(id)
	close(g.release)
	<-done
	carriesK2(t, us, id, k2, "during k2's announce")
}

// rnextHeld is a socket whose writes of RNext_key, once made, hold the
// write's return until released (a kernel call slow to return).
type rnextHeld struct {
	*testSock
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

func (h *rnextHeld) BatchKeys(f func(tcpao.Socket) error) error { return f(rnextHeldIn{h}) }

type rnextHeldIn struct{ h *rnextHeld }

func (s rnextHeldIn) AddKey(k tcpao.Key, o tcpao.AddOptions) error { return s.h.testSock.AddKey(k, o) }
func (s rnextHeldIn) DelKey(d tcpao.DelKey) error                  { return s.h.testSock.DelKey(d) }
func (s rnextHeldIn) SetInfo(c tcpao.InfoChange) error             { return s.h.SetInfo(c) }
func (s rnextHeldIn) Info() (tcpao.Info, error)                    { return s.h.testSock.Info() }
func (s rnextHeldIn) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	return s.h.testSock.Keys(f)
}

func (h *rnextHeld) SetInfo(c tcpao.InfoChange) error {
	err := h.testSock.SetInfo(c)
	if c.RNext != nil && err == nil {
		h.once.Do(func() { close(h.held) })
		<-h.release
	}
	return err
}

// TestCarriedAfterDropInKernelCall: as TestCarriedAfterDropInAnnounce with
// no session guard: PeerDown comes while the announce's write has been
// made and has not returned, so nothing the machine publishes before the
// step ends holds k2. The down peer's carried keys are what the stopped
// machine's step left when it ended.
func TestCarriedAfterDropInKernelCall(t *testing.T) {
	synctest.Test(t, testCarriedAfterDropInKernelCall)
}

func testCarriedAfterDropInKernelCall(t *testing.T) {
	var h *rnextHeld
	us, id, k2 := rollToK2(t, nil, func(x *testSock) tcpao.Socket {
		h = &rnextHeld{testSock: x, held: make(chan struct{}), release: make(chan struct{})}
		return h
	})
	<-h.held
	done := us.PeerDown(id)
	close(h.release)
	<-done
	carriesK2(t, us, id, k2, "during the announce's kernel call")
}

// rollToK2 is our end of one peer's session on k1 (wrap, when not nil,
// wraps its socket), read once, then k1 and k2 desired with k2
// preferred: the machine's next step installs and announces k2, and its
// polls are an hour apart (nothing reads the socket again by itself).
func rollToK2(t *testing.T, g SessionGuard, wrap func(*testSock) tcpao.Socket) (*Controller, PeerID, tcpao.Key) {
	t.Helper()
	cfg := Config{SwitchTimeout: 2 * time.Hour, Grace: time.Millisecond, Poll: time.Hour, Backoff: time.Hour}
	us := NewController(Options{Config: cfg, Guard: g})
	t.Cleanup(us.Close)
	id := pid("p")
	k1, k2 := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	x, _ := pair(k1)
	var sock tcpao.Socket = x
	if wrap != nil {
		sock = wrap(x)
	}
	us.SetDesired(id, want(k1))
	if _, err := us.Accepted(id, sock); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, time.Second, "the first read of the session", func() bool { return us.Read(id) })
	us.SetDesired(id, Desired{Keys: []DesiredKey{dk(k1), dk(k2)}, WantCurrent: ID(2), WantRNext: ID(2)})
	return us, id, k2
}

// carriesK2 fails t unless the down peer id's carried keys hold k2.
func carriesK2(t *testing.T, us *Controller, id PeerID, k2 tcpao.Key, when string) {
	t.Helper()
	carried := us.CarriedByPeer()[id]
	if !slices.ContainsFunc(carried, func(c CarriedKey) bool { return sameSessionKey(normRef(c.Ref), normRef(k2.KeyRef)) }) {
		t.Fatalf("after the session dropped %s, the peer's carried keys %v lack k2", when, refsOf(carried))
	}
}
