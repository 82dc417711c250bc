package rotator

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// TestRollEvents: a roll's events come from the machine as it goes, one
// per attempt and outcome: every attempt starts once and ends aborted
// (with its own typed reason, not the last one's) or completed, and the
// state changes come in order. The far end here holds only the old key at
// first, so the first attempt times out; a session guard refuses the
// second; the third completes once the far end has the new key. Each
// event of a roll names the key it goes to.
func TestRollEvents(t *testing.T) {
	n := tcpaotest.NewNet()
	x, y := eventLink(t, n)
	k1x, k2x := mkKey("192.0.2.2/32", 1, 1, "a"), mkKey("192.0.2.2/32", 2, 2, "b")
	k2y := mkKey("192.0.2.1/32", 2, 2, "b")
	roll := Desired{Socket: "x", Keys: []DesiredKey{dk(k1x), dk(k2x)}, WantCurrent: OptID{ID: 2, Valid: true}, WantRNext: OptID{ID: 2, Valid: true}}
	roll.Keys[0].AcceptOnly = true
	g := &refuseOnce{}
	var got []Event
	cfg := testCfg()
	m := newMachine(pid("x"), x, roll, cfg, g, rand.New(rand.NewPCG(1, 2)), slog.New(slog.DiscardHandler), t0)
	m.events = func(e Event) { got = append(got, e) }
	now, next := t0, t0
	for i := 0; i < 4*3600 && len(completed(got)) == 0; i++ {
		if err := n.Exchange(x, y, 1); err != nil {
			t.Fatalf("%s: %v", now, err)
		}
		if now.Equal(t0.Add(cfg.SwitchTimeout + 5*time.Second)) {
			g.refuse = true // the second attempt: the guard refuses its first step
		}
		if now.Equal(t0.Add(20 * time.Minute)) {
			if err := y.AddKey(k2y, tcpao.AddOptions{}); err != nil { // the far end gets the new key
				t.Fatal(err)
			}
		}
		if !now.Before(next) {
			next = m.step(now)
		}
		now = now.Add(time.Second)
	}
	var kinds []string
	for _, e := range got {
		if e.Peer != pid("x") || e.At.IsZero() {
			t.Errorf("event %+v: wrong peer or no time", e)
		}
		want := OptID{ID: 2, Valid: true}
		if e.Kind != EventState && (e.WantCurrent != want || e.WantRNext != want) {
			t.Errorf("event %s: want current %v, rnext %v; want the roll's key, 2/2", e.Kind, e.WantCurrent, e.WantRNext)
		}
		s := e.Kind.String()
		switch e.Kind {
		case EventState:
			s += ":" + string(e.From) + ">" + string(e.State)
		case EventRollAborted:
			s += ":" + e.Reason.String()
		}
		kinds = append(kinds, s)
	}
	want := []string{
		"roll-started", "state:steady>announced", "roll-aborted:switch-timeout", "state:announced>backoff",
		"roll-started", "roll-aborted:guard-refused", "roll-started", "state:backoff>announced",
	}
	if len(kinds) < len(want) || !slices.Equal(kinds[:len(want)], want) {
		t.Fatalf("events:\n%q\nwant them to begin with\n%q", kinds, want)
	}
	// Then attempts against the far end without the new key, until it
	// has it: each starts once and aborts once, and the last completes.
	starts, ends := 0, 0
	for _, e := range got {
		switch e.Kind {
		case EventRollStarted:
			starts++
		case EventRollAborted, EventRollCompleted:
			ends++
		}
		if starts != ends && starts != ends+1 {
			t.Fatalf("events %q: an attempt started twice or ended twice", kinds)
		}
	}
	last := got[len(got)-1]
	if c := completed(got); len(c) != 1 || c[0].Attempts != 0 || starts != ends {
		t.Fatalf("events %q: want exactly one completion, last %+v", kinds, last)
	}
}

// completed returns the completion events.
func completed(es []Event) []Event {
	var out []Event
	for _, e := range es {
		if e.Kind == EventRollCompleted {
			out = append(out, e)
		}
	}
	return out
}

// refuseOnce is a session guard that refuses one step once told to.
type refuseOnce struct{ refuse, done bool }

func (g *refuseOnce) Before(context.Context, PeerID, Step) error {
	if g.refuse && !g.done {
		g.done = true
		return errors.New("session is not established")
	}
	return nil
}

func (g *refuseOnce) After(context.Context, PeerID, Step) error { return nil }

// eventLink connects 192.0.2.1 (x, the client) to 192.0.2.2 (y) with
// key 1/1 on both ends, in the in-memory kernel.
func eventLink(t *testing.T, n *tcpaotest.Net) (x, y *tcpaotest.Sock) {
	t.Helper()
	l, err := n.Socket(netip.MustParseAddr("192.0.2.2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AddKey(mkKey("192.0.2.1/32", 1, 1, "a"), tcpao.AddOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	c, err := n.Socket(netip.MustParseAddr("192.0.2.1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddKey(mkKey("192.0.2.2/32", 1, 1, "a"), tcpao.AddOptions{}); err != nil {
		t.Fatal(err)
	}
	a, err := n.Connect(c, l)
	if err != nil {
		t.Fatal(err)
	}
	return c, a
}
