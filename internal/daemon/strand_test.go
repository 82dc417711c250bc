package daemon_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestNeverStrand: what the desired state says never takes a key a
// session uses, or that its peer last authenticated with, off the session
// or the listener: not a lifetime's end (with the session up, or down; a
// lagging peer mid-roll), not an edit in place. Each case ends with the
// peer's reconnect through the listener, and a warning and the
// aokeyd_keys_kept series naming the kept key.
func TestNeverStrand(t *testing.T) {
	for _, c := range []struct {
		name   string
		run    func(t *testing.T, e *env, k1, k2 testKey) []testKey // returns the keys the peer reconnects with
		reason string
	}{
		{"only key's lifetime ends", func(t *testing.T, e *env, k1, _ testKey) []testKey {
			time.Sleep(time.Until(k1.end) + time.Second)
			e.settle()
			return []testKey{k1}
		}, "carried"},
		{"only key's lifetime ends while the session is down", func(t *testing.T, e *env, k1, _ testKey) []testKey {
			down := e.sessionInfo()
			down.State = bgp.StateIdle
			e.sp.Set(down)
			e.waitFor("the session down in status", func() bool { return e.peerStatus().Rotation.State == "down" })
			time.Sleep(time.Until(k1.end) + time.Second)
			e.settle()
			return []testKey{k1}
		}, "carried"},
		{"lagging peer: the old key's lifetime ends mid-roll", func(t *testing.T, e *env, k1, k2 testKey) []testKey {
			e.refreshWith(k1, k2) // the peer never gets k2
			e.waitFor("the roll to k2 announced", func() bool { return e.peerStatus().Rotation.State == "announced" })
			time.Sleep(time.Until(k1.end) + time.Second)
			e.settle()
			if cur := info(t, e.acc).CurrentKey; cur != k1.send {
				t.Errorf("the session sends with %d, want k1 (%d): the peer never got k2", cur, k1.send)
			}
			return []testKey{k1}
		}, "carried"},
		{"secret edited in place", func(t *testing.T, e *env, k1, _ testKey) []testKey {
			before := fingerprints(t, e.lis, e.acc)
			edited := k1
			edited.secret = "daemon-test-secret-k1-edited-Qw3"
			edited.end = time.Time{}
			e.refreshWith(edited)
			e.settle()
			if after := fingerprints(t, e.lis, e.acc); !slices.Equal(before, after) {
				t.Errorf("an edit in place changed the sockets' keys: %v, then %v", before, after)
			}
			for _, sock := range []string{control.EditSession, control.EditListener} {
				if got := e.editRule(edited, sock); got != control.EditHeldInUse {
					t.Errorf("status says %q of the %s's edit, want %q", got, sock, control.EditHeldInUse)
				}
			}
			return []testKey{k1} // the peer still has the old secret
		}, "edited-in-place"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				now := time.Now()
				k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2", sendStart: now.Add(-time.Hour), end: now.Add(time.Minute)}
				k2 := testKey{name: "k2", send: 30, recv: 31, secret: "daemon-test-secret-k2-Lm9", sendStart: now.Add(-time.Minute)}
				if c.reason == "edited-in-place" {
					k1.end = time.Time{}
				}
				reg := prometheus.NewPedanticRegistry()
				m, err := metrics.New(reg, metrics.Options{})
				if err != nil {
					t.Fatal(err)
				}
				e := newEnv(t, envOptions{keys: []testKey{k1}, metrics: m, switchTimeout: time.Hour})
				e.waitKeys("listener", e.lis, ids(k1))
				e.up(ids(k1), k1)
				if err := e.net.Exchange(e.client, e.acc, 2); err != nil { // the peer sends with k1
					t.Fatal(err)
				}
				again := c.run(t, e, k1, k2)

				if got := keyIDs(t, e.lis); !slices.Contains(got, k1.ids()) {
					t.Errorf("listener keys %v: k1 (%s), which the peer last authenticated with, is gone", got, k1.ids())
				}
				if !hasWarning(e.warningsOf(), []string{"core/k1", "listener"}) {
					t.Errorf("no warning names the kept key core/k1: %q", e.warningsOf())
				}
				if n, err := testutil.GatherAndCount(m.Gatherer(), metrics.NameKeysKept); err != nil || n == 0 {
					t.Errorf("%s: %d series (%v), want k1's", metrics.NameKeysKept, n, err)
				}
				if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(""), metrics.NameKeysKept); err == nil ||
					!strings.Contains(err.Error(), `reason="`+c.reason+`"`) {
					t.Errorf("%s lacks reason %q: %v", metrics.NameKeysKept, c.reason, err)
				}
				if err := e.reconnect(again); err != nil {
					t.Errorf("the peer's reconnect failed: %v", err)
				}
			})
		})
	}
}

// fingerprints lists each socket's keys with their material's fingerprint.
func fingerprints(t *testing.T, socks ...tcpao.Socket) []string {
	t.Helper()
	var out []string
	for _, s := range socks {
		ks, err := s.Keys(tcpao.KeyFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ks {
			out = append(out, fmt.Sprintf("%s %s %x", k.KeyRef, k.Algorithm, k.Fingerprint))
		}
	}
	return out
}

// TestStrictExpiry: with safety.on_key_expiry: remove the operator
// prefers a dropped session to a key past its lifetime: at k1's end it
// leaves the listener although the session uses it (so the peer's next
// reconnect with it fails), and where a successor the peer was seen to use
// is installed, the session too, by a forced delete naming it.
func TestStrictExpiry(t *testing.T) {
	for _, spare := range []bool{false, true} {
		t.Run(fmt.Sprintf("spare=%t", spare), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				now := time.Now()
				k0 := testKey{name: "k0", send: 10, recv: 11, secret: "daemon-test-secret-k0-Xq7", sendStart: now.Add(-3 * time.Hour)}
				k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2", sendStart: now.Add(-time.Hour), end: now.Add(time.Minute)}
				keys := []testKey{k1}
				if spare {
					keys = []testKey{k0, k1}
				}
				pol := strings.Replace(fmt.Sprintf(basePolicy, "keep"), "safety:\n", "safety:\n  on_key_expiry: remove\n", 1)
				e := newEnv(t, envOptions{policy: pol, keys: keys, switchTimeout: time.Hour})
				e.waitKeys("listener", e.lis, ids(keys...))
				e.up(ids(keys...), keys...)
				if spare {
					zero := k0.recv // the peer sends with k0 for a while, then k1
					if err := e.client.SetInfo(tcpao.InfoChange{Current: &zero}); err != nil {
						t.Fatal(err)
					}
					if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
						t.Fatal(err)
					}
				}
				if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Until(k1.end) + time.Second)
				e.settle()
				if got := keyIDs(t, e.lis); slices.Contains(got, k1.ids()) {
					t.Errorf("listener keys %v: k1 past its lifetime stays with on_key_expiry: remove", got)
				}
				if err := e.reconnect([]testKey{k1}); err == nil {
					t.Errorf("a reconnect with k1 past its lifetime succeeded with on_key_expiry: remove")
				}
				want := []string{k1.ids()} // the session's only key stays until it drops
				if spare {
					want = []string{k0.ids()}
				}
				// The roll to k0 runs on the peer's segments; k1 goes with
				// its retire step, as a revoked key does.
				e.waitFor(fmt.Sprintf("session keys %v", want), func() bool {
					if err := e.net.Exchange(e.client, e.acc, 1); err != nil {
						t.Fatal(err)
					}
					return slices.Equal(keyIDs(t, e.acc), want)
				})
			})
		})
	}
}

// carriedEnv is a managed session whose peer holds k1 and k2 and sends
// with k1, the listener holding both.
func carriedEnv(t *testing.T) (e *env, k1, k2 testKey) {
	t.Helper()
	now := time.Now()
	k1 = testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2", sendStart: now.Add(-time.Hour)}
	k2 = testKey{name: "k2", send: 30, recv: 31, secret: "daemon-test-secret-k2-Lm9", sendStart: now.Add(-time.Minute)}
	e = newEnv(t, envOptions{keys: []testKey{k1, k2}})
	e.waitKeys("listener", e.lis, ids(k1, k2))
	e.connect(k2, k1) // the peer holds both and sends with k1
	e.established()
	if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the session managed", func() bool { return e.peerStatus().Rotation.State != "down" })
	return e, k1, k2
}

// peerMovesTo has the far end send with k and ask for it, as a far end
// that has it does.
func (e *env) peerMovesTo(k testKey) {
	e.t.Helper()
	cur, rn := k.recv, k.send
	if err := e.client.SetInfo(tcpao.InfoChange{Current: &cur, RNext: &rn}); err != nil {
		e.t.Fatal(err)
	}
}

// TestCarriedKeyLeavesListenerAfterRoll: a key the listener keeps only
// because the session carries it goes once the roll retired it from the
// session, at the listener sync that step's change asks for, not at the
// next resync (an hour in these tests; 30s by default, which every roll
// whose old key left the key source waited for).
func TestCarriedKeyLeavesListenerAfterRoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _, k2 := carriedEnv(t)
		e.refreshWith(k2) // k1 leaves the key source mid-session
		e.peerMovesTo(k2)
		e.waitFor("the roll to k2 done and k1 gone from the session and the listener", func() bool {
			if err := e.net.Exchange(e.client, e.acc, 1); err != nil {
				t.Fatal(err)
			}
			return slices.Equal(keyIDs(t, e.acc), ids(k2)) && slices.Equal(keyIDs(t, e.lis), ids(k2))
		})
	})
}

// TestCarriedKeyLeavesListenerRollDoneDuringSync: the roll that retires
// the carried key from the session ends while the listener sync that
// keeps it is under way (its read of what the sessions carry taken
// before the roll's end, the listener read after). The roll's change
// came when the last sync had kept nothing, so it asked for no sync, and
// the sync under way kept the key as carried: the key stayed on the
// listener until the next resync (a fleet-wide roll of 1,024 peers in
// the guest: 898 such keys, 18 s). A sync that keeps a carried key after
// a session's keys changed under it asks for the next one.
func TestCarriedKeyLeavesListenerRollDoneDuringSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _, k2 := carriedEnv(t)
		// The pass k1's departure starts hangs in its read of the
		// listener, after it read what the session carries (k1).
		release := make(chan struct{})
		e.lisC.mu.Lock()
		e.lisC.stall = release
		e.lisC.mu.Unlock()
		e.refreshWith(k2)
		e.waitFor("the pass to hang on the listener", func() bool {
			e.lisC.mu.Lock()
			defer e.lisC.mu.Unlock()
			return e.lisC.stall == nil
		})
		// Meanwhile the peer moves to k2 and the session's roll ends.
		e.peerMovesTo(k2)
		e.waitFor("the roll to k2 done, k1 gone from the session", func() bool {
			if err := e.net.Exchange(e.client, e.acc, 1); err != nil {
				t.Fatal(err)
			}
			return slices.Equal(keyIDs(t, e.acc), ids(k2))
		})
		close(release)
		// Nothing else happens: no key source change, no session event,
		// the resync an hour away.
		e.waitFor("k1 gone from the listener", func() bool { return slices.Equal(keyIDs(t, e.lis), ids(k2)) })
	})
}
