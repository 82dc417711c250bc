package rotator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testCfg() Config {
	return Config{SwitchTimeout: 30 * time.Second, Grace: 10 * time.Second, Poll: time.Second, Backoff: time.Minute, MaxBackoff: 10 * time.Minute}
}

// link is two in-memory sockets of one session, each driven by its own
// state machine on a manual clock; every tick carries segments both ways
// and fails the test if one does not verify.
type link struct {
	t        *testing.T
	x, y     *testSock
	mx, my   *machine
	now      time.Time
	nextX    time.Time
	nextY    time.Time
	segments int
}

func newLink(t *testing.T, k tcpao.Key, dx, dy Desired, g SessionGuard) *link {
	l := &link{t: t, now: t0}
	l.x, l.y = pair(k)
	dy = farDesired(dy) // y is the far end: its keys name x's address
	rnd := rand.New(rand.NewPCG(1, 2))
	log := slog.New(slog.DiscardHandler)
	l.mx = newMachine(pid("x"), l.x, dx, testCfg(), g, rnd, log, t0)
	l.my = newMachine(pid("y"), l.y, dy, testCfg(), g, rnd, log, t0)
	l.nextX, l.nextY = t0, t0.Add(500*time.Millisecond)
	return l
}

func (l *link) tick() {
	l.t.Helper()
	for range 3 {
		if !l.x.sendTo(l.y) || !l.y.sendTo(l.x) {
			l.t.Fatalf("%s: segment dropped: x=%s y=%s", l.now, dump(l.x), dump(l.y))
		}
		l.segments += 2
	}
	l.now = l.now.Add(250 * time.Millisecond)
	if !l.now.Before(l.nextX) {
		l.nextX = l.mx.step(l.now)
	}
	if !l.now.Before(l.nextY) {
		l.nextY = l.my.step(l.now)
	}
}

func dump(s *testSock) string {
	var b strings.Builder
	ks, _ := s.Sock.Keys(tcpao.KeyFilter{SkipFingerprint: true})
	for _, k := range ks {
		fmt.Fprintf(&b, "[%d/%d good=%d cur=%t rnext=%t]", k.SendID, k.RecvID, k.PktGood, k.IsCurrent, k.IsRNext)
	}
	in, _ := s.Sock.Info()
	fmt.Fprintf(&b, " bad=%d notfound=%d", in.PktBad, in.PktKeyNotFound)
	return b.String()
}

// farDesired is d for the far end of a pair: each key's mirror, and the
// IDs to send and announce swapped with them.
func farDesired(d Desired) Desired {
	f := d
	f.Keys = make([]DesiredKey, len(d.Keys))
	for i, k := range d.Keys {
		f.Keys[i] = k
		f.Keys[i].Key = mirror(k.Key)
	}
	f.WantCurrent, f.WantRNext = d.WantRNext, d.WantCurrent
	return f
}

func want(k tcpao.Key) Desired {
	return Desired{Keys: []DesiredKey{dk(k)}, WantCurrent: ID(k.SendID), WantRNext: ID(k.RecvID)}
}

func TestRollTwentyTimes(t *testing.T) {
	key := func(i int) tcpao.Key { return mkKey(peerA, uint8(i%200+1), uint8(i%200+1), fmt.Sprintf("roll-%d", i)) }
	l := newLink(t, key(0), want(key(0)), want(key(0)), nil)
	for i := 1; i <= 20; i++ {
		nk := key(i)
		l.mx.setDesired(want(nk), l.now)
		l.my.setDesired(farDesired(want(nk)), l.now)
		done := false
		for range 2000 {
			l.tick()
			if l.mx.st.Rolls == i && l.my.st.Rolls == i {
				done = true
				break
			}
		}
		if !done {
			t.Fatalf("roll %d did not complete: x=%+v y=%+v\nx=%s\ny=%s", i, l.mx.st, l.my.st, dump(l.x), dump(l.y))
		}
		for _, s := range []*testSock{l.x, l.y} {
			ks, _ := s.Keys(tcpao.KeyFilter{})
			if len(ks) != 1 || ks[0].SendID != nk.SendID || !ks[0].IsCurrent || !ks[0].IsRNext {
				t.Fatalf("roll %d: keys after roll %s", i, dump(s))
			}
			if in, _ := s.Info(); in.PktBad != 0 || in.PktKeyNotFound != 0 {
				t.Fatalf("roll %d: bad=%d notfound=%d", i, in.PktBad, in.PktKeyNotFound)
			}
		}
		if l.mx.st.LastAbort != "" || l.my.st.LastAbort != "" {
			t.Fatalf("roll %d aborted: %q %q", i, l.mx.st.LastAbort, l.my.st.LastAbort)
		}
	}
}

func TestRollPeerNeverGetsKey(t *testing.T) {
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	l := newLink(t, a, want(a), want(a), nil)
	l.mx.setDesired(want(b), l.now)
	for range 4 * 60 * 3 { // three minutes
		l.tick()
	}
	st := *l.mx.st
	if st.State != StateBackoff && st.State != StateAnnounced {
		t.Fatalf("state %s, want backoff or announced", st.State)
	}
	if st.Attempts < 2 || !strings.Contains(st.LastAbort, "did not send with key recv=2") {
		t.Fatalf("status does not say why: attempts=%d abort=%q", st.Attempts, st.LastAbort)
	}
	if st.Rolls != 0 {
		t.Fatalf("rolls=%d, want 0", st.Rolls)
	}
	ks, _ := l.x.Keys(tcpao.KeyFilter{Current: true})
	if len(ks) != 1 || ks[0].SendID != 1 {
		t.Fatalf("current moved off the old key: %s", dump(l.x))
	}
	if st.State == StateBackoff {
		if rn, _ := l.x.Keys(tcpao.KeyFilter{RNext: true}); len(rn) != 1 || rn[0].RecvID != 1 {
			t.Fatalf("rnext not put back after abort: %s", dump(l.x))
		}
	}
}

// TestAnnouncedPollsReadBare: a roll waiting for the peer's switch polls
// the socket without the keys' fingerprints (nothing is planned from the
// read; an HMAC of every key on every poll of every peer was a fifth of a
// fleet-wide roll's CPU), nor does the install's read-back, and the
// machine still sees the switch when the peer makes it. Before, every
// read asked for them.
func TestAnnouncedPollsReadBare(t *testing.T) {
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	l := newLink(t, a, want(a), want(a), nil)
	l.mx.setDesired(want(b), l.now)
	for i := 0; l.mx.st.State != StateAnnounced; i++ {
		if i > 100 {
			t.Fatalf("x never announced: %+v", l.mx.st)
		}
		l.tick()
	}
	_, reads0, fp0 := l.x.counts()
	for range 40 { // ten seconds of polls, the peer never holding b
		l.tick()
	}
	if l.mx.st.State != StateAnnounced {
		t.Fatalf("state %s, want still announced", l.mx.st.State)
	}
	if l.x.readCount()-reads0 < 5 {
		t.Fatalf("%d reads in ten seconds of polls, want one a second", l.x.readCount()-reads0)
	}
	if l.x.fpReadCount() != fp0 {
		t.Errorf("%d of %d polls while announced asked for fingerprints, want none", l.x.fpReadCount()-fp0, l.x.readCount()-reads0)
	}
	// A roll both ends make (as in TestRollTwentyTimes): from the key
	// change to the roll's end, no step of x that starts
	// announced (its polls and the switch with its read-back) or in the
	// grace period asks for fingerprints; the retire step, which plans,
	// does.
	l = newLink(t, a, want(a), want(a), nil)
	l.mx.setDesired(want(b), l.now)
	l.my.setDesired(farDesired(want(b)), l.now)
	switched := false
	for i := 0; l.mx.st.Rolls == 0 || l.my.st.Rolls == 0; i++ {
		if i > 2000 {
			t.Fatalf("the roll did not complete once y had b: x=%+v y=%+v", l.mx.st, l.my.st)
		}
		st, fp := *l.mx.st, l.x.fpReadCount()
		l.tick()
		inGrace := st.State == StateGrace && l.now.Before(st.Since.Add(testCfg().Grace))
		if (st.State == StateAnnounced || inGrace) && l.x.fpReadCount() != fp {
			t.Errorf("%s: a step that started %s asked for fingerprints %d times", l.now, st.State, l.x.fpReadCount()-fp)
		}
		if st.State != l.mx.st.State {
			t.Logf("%s: %s -> %s (%d fingerprinted reads)", l.now, st.State, l.mx.st.State, l.x.fpReadCount()-fp)
		}
		// The install: the plan's read has them, its read-back not.
		if st.State == StateSteady && l.mx.st.State == StateAnnounced && l.x.fpReadCount()-fp != 1 {
			t.Errorf("the install step made %d fingerprinted reads, want 1 (the plan's)", l.x.fpReadCount()-fp)
		}
		switched = switched || st.State == StateAnnounced && l.mx.st.State == StateGrace
	}
	if !switched {
		t.Errorf("x never went from announced to grace")
	}
	if ks, _ := l.x.Keys(tcpao.KeyFilter{}); len(ks) != 1 || ks[0].SendID != 2 || !ks[0].IsCurrent {
		t.Fatalf("x after the roll: %s", dump(l.x))
	}
}

// TestDontFightPeer: the peer's RNext moves our current to another key that
// is still valid for sending; the machine leaves it there.
func TestDontFightPeer(t *testing.T) {
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	both := func(w uint8) Desired {
		return Desired{Keys: []DesiredKey{dk(a), dk(b)}, WantCurrent: ID(w), WantRNext: ID(w)}
	}
	l := newLink(t, a, both(1), both(2), nil)
	if err := l.x.AddKey(b, tcpao.AddOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 40 {
		l.tick()
	}
	opsAfterSettle, _, _ := l.x.counts()
	for range 400 {
		l.tick()
	}
	if cur, _ := l.x.current(); cur != ID(2) {
		t.Fatalf("x current=%s, want 2 (chosen by the peer's RNext)", cur)
	}
	if ops, _, _ := l.x.counts(); ops != opsAfterSettle || l.mx.st.State != StateSteady {
		t.Fatalf("x kept writing (%d -> %d ops, state %s): fighting the peer", opsAfterSettle, ops, l.mx.st.State)
	}
}

type failGuard struct{ step Step }

func (g failGuard) Before(context.Context, PeerID, Step) error { return nil }
func (g failGuard) After(_ context.Context, _ PeerID, s Step) error {
	if s == g.step {
		return errors.New("session dropped")
	}
	return nil
}

func TestGuardAbortsRoll(t *testing.T) {
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	l := newLink(t, a, want(a), want(a), failGuard{step: StepAnnounce})
	l.mx.setDesired(want(b), l.now)
	l.tick()
	st := *l.mx.st
	if st.State != StateBackoff || !strings.Contains(st.LastAbort, "session dropped") {
		t.Fatalf("state %s abort %q, want backoff on guard error", st.State, st.LastAbort)
	}
	if !st.NextAt.After(l.now) {
		t.Fatalf("no backoff: next %s now %s", st.NextAt, l.now)
	}
	if rn, _ := l.x.Keys(tcpao.KeyFilter{RNext: true}); len(rn) != 1 || rn[0].RecvID != 1 {
		t.Fatalf("rnext not restored: %s", dump(l.x))
	}
}

func TestBackoffGrowsWithJitter(t *testing.T) {
	m := newMachine(pid("p"), newEstablished(mkKey(peerA, 1, 1, "a")), Desired{}, testCfg(), nil, rand.New(rand.NewPCG(7, 7)), slog.New(slog.DiscardHandler), t0)
	var prev time.Duration
	for i := range 8 {
		at := m.abort(t0, &AbortError{Detail: "test"})
		d := at.Sub(t0)
		base := min(time.Minute<<i, 10*time.Minute)
		if d < base*8/10 || d > base*12/10 {
			t.Fatalf("attempt %d: backoff %s outside ±20%% of %s", i+1, d, base)
		}
		if i < 3 && d <= prev {
			t.Fatalf("attempt %d: backoff %s did not grow from %s", i+1, d, prev)
		}
		prev = d
	}
}

// TestRetireWaitReadsBare: after the grace period, a machine that waits
// for the peer's segment with the new key (before it deletes an old key
// the peer sent with) polls without fingerprints, however long the peer
// stays silent, and the roll completes once the peer sends. Before, each
// of those polls planned from a fingerprinted read.
func TestRetireWaitReadsBare(t *testing.T) {
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	l := newLink(t, a, want(a), want(a), nil)
	l.mx.cfg.NoPeerProbe = true // y's silence is silence (peerprobe_test.go: the probe's answer)
	l.mx.setDesired(want(b), l.now)
	l.my.setDesired(farDesired(want(b)), l.now)
	waiting := func() bool {
		return l.mx.st.State == StateGrace && strings.HasPrefix(l.mx.st.NextAction, "wait for the peer to send with key")
	}
	for i := 0; !waiting(); i++ {
		if i > 400 {
			t.Fatalf("x never waited for y's segment after the grace period: %+v", l.mx.st)
		}
		if l.mx.st.Rolls > 0 {
			t.Fatalf("x retired without waiting for y's segment: nothing tested")
		}
		l.tick()
	}
	// y sends nothing for ten seconds: x polls.
	_, reads0, fp0 := l.x.counts()
	for range 40 {
		l.now = l.now.Add(250 * time.Millisecond)
		if !l.now.Before(l.nextX) {
			l.nextX = l.mx.step(l.now)
		}
	}
	if !waiting() {
		t.Fatalf("x after ten silent seconds: %+v, want still waiting", l.mx.st)
	}
	if l.x.readCount()-reads0 < 8 {
		t.Fatalf("%d polls in ten seconds, want one each poll period (1 s)", l.x.readCount()-reads0)
	}
	if l.x.fpReadCount() != fp0 {
		t.Errorf("%d of %d polls while waiting asked for fingerprints, want none", l.x.fpReadCount()-fp0, l.x.readCount()-reads0)
	}
	for i := 0; l.mx.st.Rolls == 0; i++ {
		if i > 400 {
			t.Fatalf("the roll did not complete once y sent again: %+v", l.mx.st)
		}
		l.tick()
	}
	if ks, _ := l.x.Keys(tcpao.KeyFilter{}); len(ks) != 1 || ks[0].SendID != 2 || !ks[0].IsCurrent {
		t.Fatalf("x after the roll: %s", dump(l.x))
	}
}
