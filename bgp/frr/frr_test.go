package frr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	peerkey "github.com/aokeyd/aokeyd/bgp/peer"
)

// fakeVtysh answers vtysh commands from a table; the listing answer can be
// swapped while a test runs.
type fakeVtysh struct {
	mu      sync.Mutex
	answers map[string][]byte // by command prefix
	fail    error
	calls   []string
	// running is the last running configuration handed out.
	running []byte
}

func (f *fakeVtysh) set(prefix string, out []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[prefix] = out
}

func (f *fakeVtysh) setFail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = err
}

func (f *fakeVtysh) Vtysh(_ context.Context, cmd string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, cmd)
	if f.fail != nil {
		return nil, f.fail
	}
	best := ""
	for p := range f.answers {
		if strings.HasPrefix(cmd, p) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return nil, fmt.Errorf("unexpected command %q", cmd)
	}
	out := append([]byte(nil), f.answers[best]...)
	if best == runningConfig {
		f.running = out
	}
	return out, nil
}

func newFake(t *testing.T) *fakeVtysh {
	return &fakeVtysh{answers: map[string][]byte{
		"show bgp vrf all neighbors json":         fixture(t, "vrf-all-neighbors.json"),
		"show bgp vrf all neighbors 10.255.9.2 ":  fixture(t, "vrf-all-neighbor.json"),
		"show bgp vrf all neighbors 10.255.9.9 ":  fixture(t, "vrf-all-no-neighbor.json"),
		"show bgp vrf default neighbors 10.255.9": fixture(t, "vrf-default-neighbor.json"),
		runningConfig:                      fixture(t, "running-config.txt"),
		"clear bgp vrf default 10.255.9.2": nil,
	}}
}

func TestPeersAndPeer(t *testing.T) {
	f := newFake(t)
	var calls []string
	s := New(Options{Runner: f, OnCall: func(k string) { calls = append(calls, k) }})
	ps, err := s.Peers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 {
		t.Fatalf("Peers = %+v, want 2", ps)
	}
	for _, p := range ps {
		if p.Neighbor == nbrB && (!p.Passive || p.MD5 || !p.Established() || p.Uptime.Unix() != 1796094350) {
			t.Errorf("B = %+v, want passive, no MD5, established at its epoch", p)
		}
		if p.Neighbor == nbrMD5 && (!p.MD5 || p.Passive || p.Admin != bgp.AdminDown) {
			t.Errorf("MD5 neighbor = %+v, want MD5, active, admin down", p)
		}
	}
	if !strings.Contains(string(fixture(t, "running-config.txt")), "password") || len(f.running) == 0 ||
		slices.ContainsFunc(f.running, func(b byte) bool { return b != 0 }) {
		t.Errorf("the running configuration (it holds passwords) was not zeroed after use: %q", f.running)
	}
	// The same session, read again a second later: FRR's epoch moved by
	// one (see doc.go); Uptime must not.
	f.set("show bgp vrf default neighbors 10.255.9.2 ", []byte(strings.Replace(string(fixture(t, "vrf-default-neighbor.json")), "1796094350", "1796094351", 1)))
	p, err := s.Peer(context.Background(), peerkey.KeyOf(nbrB, ""))
	if err != nil {
		t.Fatal(err)
	}
	if p.Uptime.Unix() != 1796094350 || !p.Passive {
		t.Fatalf("Peer = %+v, want the first uptime (1796094350) kept and passive from the listing", p)
	}
	f.set("show bgp vrf red neighbors 10.255.9.2 ", fixture(t, "vrf-all-no-neighbor.json"))
	if _, err = s.Peer(context.Background(), peerkey.KeyOf(nbrB, "red")); !errors.Is(err, bgp.ErrNoPeer) {
		t.Fatalf("Peer of the neighbor in a VRF it is not in: %v, want ErrNoPeer", err)
	}
	if _, err := s.Peer(context.Background(), peerkey.KeyOf(nbrB.Next().Next().Next().Next().Next().Next().Next(), "")); !errors.Is(err, bgp.ErrNoPeer) {
		t.Fatalf("Peer of an unknown neighbor: %v, want ErrNoPeer", err)
	}
	want := []string{CallNeighbors, CallRunningConfig, CallNeighbor, CallNeighbor, CallNeighbor}
	if strings.Join(calls, ",") != strings.Join(want, ",") {
		t.Errorf("calls %v, want %v (Peer asks about one neighbor, without the running config)", calls, want)
	}
}

func TestResetPeer(t *testing.T) {
	f := newFake(t)
	s := New(Options{Runner: f})
	if err := s.ResetPeer(context.Background(), peerkey.KeyOf(nbrB, ""), "revoked"); err != nil {
		t.Fatal(err)
	}
	if got := f.calls[len(f.calls)-1]; got != "clear bgp vrf default 10.255.9.2" {
		t.Fatalf("last command %q", got)
	}
	f.set("clear bgp vrf default 10.255.9.2", []byte("% BGP: Unknown neighbor - \"10.255.9.2\"\n"))
	if err := s.ResetPeer(context.Background(), peerkey.KeyOf(nbrB, ""), "revoked"); err == nil || !strings.Contains(err.Error(), "Unknown neighbor") {
		t.Fatalf("a refused clear: %v, want FRR's message", err)
	}
	f.setFail(errors.New("vtysh: connection refused"))
	if err := s.ResetPeer(context.Background(), peerkey.KeyOf(nbrB, ""), "revoked"); err == nil {
		t.Fatal("ResetPeer with vtysh failing succeeded")
	}
}

// TestWatchPolls: a sync first, an event for each changed session within
// one poll interval, EventLost while vtysh fails and a sync after.
func TestWatchPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t)
		s := New(Options{Runner: f, PollInterval: time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		ch, err := s.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		next := func() bgp.Event {
			t.Helper()
			select {
			case ev := <-ch:
				return ev
			case <-time.After(time.Minute):
				t.Fatal("no event")
			}
			return bgp.Event{}
		}
		if ev := next(); ev.Kind != bgp.EventSync || len(ev.Peers) != 2 {
			t.Fatalf("first event %+v, want a sync of 2", ev)
		}
		start := time.Now()
		f.set("show bgp vrf all neighbors json", fixture(t, "after-clear.json"))
		ev := next()
		if ev.Kind != bgp.EventState || ev.Peer.Neighbor != nbrB || ev.Peer.State != bgp.StateIdle || ev.Peer.Flops != 1 {
			t.Fatalf("event %+v, want B idle with a flop", ev)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("change seen after %v, want within the poll interval", d)
		}
		f.set("show bgp vrf all neighbors json", fixture(t, "reestablished.json"))
		if ev := next(); ev.Kind != bgp.EventState || !ev.Peer.Established() || ev.Peer.RemotePort != 42315 {
			t.Fatalf("event %+v, want B re-established on its new connection", ev)
		}
		// Unchanged listings send nothing.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if len(ch) != 0 {
			t.Fatalf("%d events without a change", len(ch))
		}
		f.setFail(errors.New("vtysh: bgpd is not running"))
		if ev := next(); ev.Kind != bgp.EventLost {
			t.Fatalf("event %+v, want EventLost", ev)
		}
		f.setFail(nil)
		if ev := next(); ev.Kind != bgp.EventSync {
			t.Fatalf("event %+v, want a sync after the failure", ev)
		}
		cancel()
		for range ch {
		}
	})
}

// What aoctl status shows as FRR's show bgp neighbors does: the
// neighbor's description, and when and why its session last went down,
// kept once the session is up again (FRR then says "never").
func TestLastDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t)
		s := New(Options{Runner: f})
		down := strings.Replace(string(fixture(t, "after-clear.json")), `"remoteAs":65002`, `"remoteAs":65002,"nbrDesc":"core-2 lon1"`, 1)
		f.set("show bgp vrf all neighbors json", []byte(down))
		at := time.Now()
		ps, err := s.Peers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]struct {
			desc, why string
			at        time.Time
		}{
			"10.255.9.2": {"core-2 lon1", "User reset", at.Truncate(time.Second)},
			"10.255.9.3": {"", "Admin. shutdown", at.Add(-27 * time.Second).Truncate(time.Second)},
		}
		check := func(ps []bgp.PeerInfo) {
			t.Helper()
			for _, p := range ps {
				w, ok := want[p.Neighbor.String()]
				if !ok {
					continue
				}
				at, why := p.LastDown()
				if p.Description() != w.desc || why != w.why || !at.Equal(w.at) {
					t.Errorf("%s: description %q, last down %s (%q); want %q, %s (%q)", p.Neighbor, p.Description(),
						at, why, w.desc, w.at, w.why)
				}
			}
		}
		check(ps)
		// Up again a minute later: FRR says lastReset "never"; the last
		// down stays what it was.
		time.Sleep(time.Minute)
		f.set("show bgp vrf all neighbors json", fixture(t, "reestablished.json"))
		if ps, err = s.Peers(context.Background()); err != nil {
			t.Fatal(err)
		}
		w := want["10.255.9.2"]
		w.desc = ""
		want["10.255.9.2"] = w
		w = want["10.255.9.3"]
		w.at = at.Add(time.Minute - 33*time.Second).Truncate(time.Second) // its own reading: 33s ago
		want["10.255.9.3"] = w
		check(ps)
	})
}
