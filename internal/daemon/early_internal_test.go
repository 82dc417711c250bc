package daemon

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/early"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// earlyPeerKeys is a peer's keys at t0 in chain core: k1 sent with since
// an hour ago (the schedule's), k2 from half an hour on, k3 from an hour
// on.
func earlyPeerKeys(t0 time.Time) policy.PeerKeys {
	key := func(name string, id uint8, start time.Duration, secret string) policy.ScheduledKey {
		m := keystore.MKT{Name: name, Chain: "core", SendID: id, RecvID: id + 1, Algorithm: tcpao.HMACSHA256, MACLen: 12,
			Secret: tcpao.NewSecret([]byte(secret))}
		return policy.ScheduledKey{MKT: m, SendLifetime: keystore.Lifetime{Start: t0.Add(start)}, Sendable: start <= 0}
	}
	return policy.PeerKeys{Chain: "core", SourceChain: "core", Preferred: 0, Keys: []policy.ScheduledKey{
		key("k1", 20, -time.Hour, "early-unit-k1"), key("k2", 30, 30*time.Minute, "early-unit-k2"), key("k3", 40, time.Hour, "early-unit-k3"),
	}}
}

// earlyAsk is the request for pk's key i asked at.
func earlyAsk(pk policy.PeerKeys, i int, at time.Time) earlyRoll {
	return earlyRoll{key: early.KeyOf(pk, i), asked: at}
}

// askOne asks r for id alone; same: the request in force names r's
// target, and stays.
func askOne(t *testing.T, e *earlyRolls, id rotator.PeerID, r earlyRoll) (same bool) {
	t.Helper()
	kept, err := e.ask(map[rotator.PeerID]earlyRoll{id: r})
	if err != nil {
		t.Fatalf("ask: %v", err)
	}
	_, same = kept[id]
	return same
}

// A request names its target: the preference follows that key while it is
// one of the peer's keys and the schedule has not reached it, and a
// request that no longer applies ends (and says why, unless the schedule
// caught up with it).
func TestEarlyRollPreference(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	id := peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "")
	base := earlyPeerKeys(t0)
	for _, tc := range []struct {
		name   string
		change func(pk *policy.PeerKeys)
		pref   int    // the index prefer gives
		why    string // stale's reason, "" when the request stays
		noted  bool   // status is told of the end
	}{
		{"the target, though a newer key came", func(*policy.PeerKeys) {}, 1, "", false},
		{"the target left the source", func(pk *policy.PeerKeys) { pk.Keys = append(pk.Keys[:1], pk.Keys[2]) }, 0, "no longer one of the peer's keys", true},
		{"the target was revoked", func(pk *policy.PeerKeys) {
			pk.Keys = append(pk.Keys[:1], pk.Keys[2])
			pk.Revoked = []string{"k2"}
		}, 0, "revoked", true},
		{"the target's material changed", func(pk *policy.PeerKeys) { pk.Keys[1].MKT.Secret = tcpao.NewSecret([]byte("early-unit-k2-new")) },
			0, "material changed", true},
		{"the peer's chain changed", func(pk *policy.PeerKeys) { pk.SourceChain = "edge" }, 0, "key chain is edge", true},
		{"the schedule reached it", func(pk *policy.PeerKeys) {
			pk.Keys[1].Sendable, pk.Preferred = true, 1
		}, 1, "the schedule sends with it", false},
		{"the schedule passed it", func(pk *policy.PeerKeys) {
			pk.Keys[1].Sendable, pk.Keys[2].Sendable, pk.Preferred = true, true, 2
		}, 2, "starts no earlier", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e earlyRolls
			askOne(t, &e, id, earlyAsk(base, 1, t0))
			gen := e.generation()
			pk := earlyPeerKeys(t0)
			tc.change(&pk)
			if got := e.prefer(id, pk); got != tc.pref {
				t.Errorf("prefer = %d, want %d", got, tc.pref)
			}
			r, why := e.stale(id, pk, t0)
			_, inForce, end, ended := e.view(id, t0)
			switch {
			case tc.why == "" && (why != "" || !inForce || e.generation() != gen):
				t.Errorf("stale: %q (in force %t), want the request to stay", why, inForce)
			case tc.why != "" && (!strings.Contains(why, tc.why) || inForce || r.key.Name != "k2" || e.generation() == gen):
				t.Errorf("stale: %q for %s (in force %t), want the request for k2 ended: %q", why, r.key.Name, inForce, tc.why)
			case ended != tc.noted || ended && end.why != why:
				t.Errorf("status is told %+v (%t), want %t", end, ended, tc.noted)
			}
		})
	}
}

// A roll to the target that completes holds the request; one that aborts
// ends it, as does the session going down before it completed; rolls to
// other keys touch neither.
func TestEarlyRollEvents(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	id := peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "")
	pk := earlyPeerKeys(t0)
	ev := func(kind rotator.EventKind, send, recv uint8) rotator.Event {
		return rotator.Event{Peer: id, Kind: kind, At: t0, WantCurrent: rotator.ID(send), WantRNext: rotator.ID(recv), Reason: rotator.AbortSwitchTimeout}
	}
	state := func(e *earlyRolls) string {
		r, inForce, _, _ := e.view(id, t0)
		switch {
		case !inForce:
			return "none"
		case r.state == earlyHeld:
			return "held"
		}
		return "rolling"
	}

	var e earlyRolls
	askOne(t, &e, id, earlyAsk(pk, 1, t0))
	e.event(ev(rotator.EventRollAborted, 20, 21)) // a roll to k1: not the request's
	e.event(ev(rotator.EventRollCompleted, 40, 41))
	if got := state(&e); got != "rolling" {
		t.Fatalf("after other rolls: %s, want rolling", got)
	}
	e.event(ev(rotator.EventRollCompleted, 30, 31))
	if got := state(&e); got != "held" {
		t.Fatalf("after the roll to k2 completed: %s, want held", got)
	}
	if _, ended := e.down(id, t0); ended || state(&e) != "held" {
		t.Fatalf("a held request ended with the session")
	}
	if same := askOne(t, &e, id, earlyAsk(pk, 1, t0.Add(time.Minute))); !same || state(&e) != "held" {
		t.Fatalf("asked again for k2: same %t, %s; want the held request kept", same, state(&e))
	}
	if _, why, ended := e.event(ev(rotator.EventRollAborted, 30, 31)); !ended || !strings.Contains(why, "aborted (switch-timeout)") {
		t.Fatalf("a roll to k2 aborted: ended %t %q", ended, why)
	}
	if _, _, end, ended := e.view(id, t0); state(&e) != "none" || !ended || end.roll.key.Name != "k2" {
		t.Fatalf("after the abort: %s, status told %+v", state(&e), end)
	}
	if _, _, _, ended := e.view(id, t0.Add(30*time.Minute)); ended {
		t.Errorf("status still told of the ended request once k2's send start came")
	}

	askOne(t, &e, id, earlyAsk(pk, 2, t0))
	if r, ended := e.down(id, t0); !ended || r.key.Name != "k3" || state(&e) != "none" {
		t.Fatalf("the session went down before the roll to k3 completed: ended %t, %s", ended, state(&e))
	}
	askOne(t, &e, id, earlyAsk(pk, 2, t0))
	e.forget(id)
	if _, inForce, _, ended := e.view(id, t0); inForce || ended {
		t.Errorf("a forgotten peer's request is still there")
	}
}

// observe, for a machine that does not run the roll as one (started
// mid-roll after a restart): a steady session on the target holds the
// request; a restored request not on it ends at the switch timeout after
// the ask, and deadline names that instant; a request asked since the
// start is left to its machine's abort. session ends a rolling request
// whose session is another.
func TestEarlyRollObserve(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	id := peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "")
	pk := earlyPeerKeys(t0)
	const timeout = 2 * time.Minute
	status := func(state rotator.State, cur, rnext uint8) func() (rotator.Status, bool) {
		return func() (rotator.Status, bool) {
			return rotator.Status{Peer: id, State: state, Current: rotator.ID(cur), RNext: rotator.ID(rnext)}, true
		}
	}
	onK1, onK2 := status(rotator.StateSteady, 20, 21), status(rotator.StateSteady, 30, 31)
	for _, tc := range []struct {
		name     string
		restored bool
		st       func() (rotator.Status, bool)
		at       time.Duration // after the ask
		want     string        // rolling, held or ended
	}{
		{"restored, on the target", true, onK2, 0, "held"},
		{"asked since the start, on the target", false, onK2, 0, "held"},
		{"restored, announced (the machine rolls)", true, status(rotator.StateAnnounced, 20, 31), timeout, "rolling"},
		{"restored, not on it, before the timeout", true, onK1, timeout - time.Second, "rolling"},
		{"restored, not on it, at the timeout", true, onK1, timeout, "ended"},
		{"asked since the start, not on it, past the timeout", false, onK1, 2 * timeout, "rolling"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e earlyRolls
			r := earlyAsk(pk, 1, t0)
			r.restored = tc.restored
			e.restore(nil, map[rotator.PeerID]earlyRoll{id: r}, false)
			wantDeadline := time.Time{}
			if tc.restored {
				wantDeadline = t0.Add(timeout)
			}
			if got := e.deadline(t0, timeout); !got.Equal(wantDeadline) {
				t.Errorf("deadline %s, want %s", got, wantDeadline)
			}
			_, why, held, ended := e.observe(id, tc.st, t0.Add(tc.at), timeout)
			got := "rolling"
			switch {
			case held:
				got = "held"
			case ended:
				got = "ended"
			}
			if got != tc.want {
				t.Errorf("observe: %s (%q), want %s", got, why, tc.want)
			}
		})
	}

	s1 := early.Session{Inode: 7, Local: netip.MustParseAddrPort("192.0.2.1:179"), Remote: netip.MustParseAddrPort("192.0.2.2:50001")}
	s2 := s1
	s2.Inode, s2.Remote = 8, netip.MustParseAddrPort("192.0.2.2:50002")
	var e earlyRolls
	r := earlyAsk(pk, 1, t0)
	r.session = s1
	askOne(t, &e, id, r)
	if _, ended := e.session(id, s1, t0); ended {
		t.Error("the session the roll runs on ended it")
	}
	if _, ended := e.session(id, early.Session{}, t0); ended {
		t.Error("a session not named ended it")
	}
	if _, ended := e.session(id, s2, t0); !ended {
		t.Error("another session did not end the rolling request")
	}
}
