package rotator

import (
	"fmt"
	"testing"
	"time"
)

// rollReads rolls both ends of a session from one key to the next with
// the lab's timers (poll 250 ms, grace 2 s) while each end sends a
// segment every keepalive, after a minute of steady keepalives, and
// returns how many times x's machine read its socket's keys during the
// roll.
func rollReads(t *testing.T, keepalive time.Duration) int {
	t.Helper()
	k1 := mkKey(peerA, 1, 1, "segpace-k1")
	k2 := mkKey(peerA, 2, 2, "segpace-k2")
	l := newLink(t, k1, want(k1), want(k1), nil)
	cfg := Config{SwitchTimeout: time.Minute, Grace: 2 * time.Second, Poll: 250 * time.Millisecond, Steady: 10 * time.Second,
		Backoff: time.Minute, MaxBackoff: 10 * time.Minute}
	l.mx.cfg, l.my.cfg = cfg, cfg
	nextKA := l.now
	tick := func() {
		t.Helper()
		if !l.now.Before(nextKA) {
			if !l.x.sendTo(l.y) || !l.y.sendTo(l.x) {
				t.Fatalf("%s: segment dropped: x=%s y=%s", l.now, dump(l.x), dump(l.y))
			}
			nextKA = nextKA.Add(keepalive)
		}
		l.now = l.now.Add(50 * time.Millisecond)
		if !l.now.Before(l.nextX) {
			l.nextX = l.mx.step(l.now)
		}
		if !l.now.Before(l.nextY) {
			l.nextY = l.my.step(l.now)
		}
	}
	for end := l.now.Add(time.Minute); l.now.Before(end); {
		tick()
	}
	_, r0, _ := l.x.counts()
	l.mx.setDesired(want(k2), l.now)
	l.my.setDesired(farDesired(want(k2)), l.now)
	l.nextX, l.nextY = l.now, l.now
	for end := l.now.Add(5 * time.Minute); l.mx.st.Rolls == 0 || l.my.st.Rolls == 0; tick() {
		if !l.now.Before(end) {
			t.Fatalf("keepalive %s: no roll: x=%+v y=%+v", keepalive, l.mx.st, l.my.st)
		}
	}
	_, r1, _ := l.x.counts()
	return r1 - r0
}

// TestRollReadsPerKeepalive holds a roll's reads of its socket to about the
// same count whatever the peer's keepalive interval: its waits for the
// peer's segments poll by the segments' spacing (segpace.go), not every
// Poll (at 8 s keepalives, four times the reads of 1 s ones).
func TestRollReadsPerKeepalive(t *testing.T) {
	base := rollReads(t, time.Second)
	for _, ka := range []time.Duration{4 * time.Second, 8 * time.Second, 30 * time.Second} {
		t.Run(fmt.Sprint(ka), func(t *testing.T) {
			n := rollReads(t, ka)
			t.Logf("reads in a roll: %d at %s keepalives, %d at 1s", n, ka, base)
			if n > base*3/2 {
				t.Errorf("a roll at %s keepalives read the socket %d times, at 1s %d: want at most 1.5 times", ka, n, base)
			}
		})
	}
}
