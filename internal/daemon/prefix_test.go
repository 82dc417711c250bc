package daemon_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// prefixPolicy binds every neighbor in 192.0.2.0/24 (the test neighbor
// 192.0.2.2 among them) to chain core: the listener holds the chain's keys
// for the prefix, and the accepted session inherits them so.
const prefixPolicy = `version: 1
safety:
  switch_timeout: 5m
  on_revoke_only_key: keep
key_chains:
  - name: core
peers:
  - neighbor: 192.0.2.0/24
    key_chain: core
`

// planLines is the daemon's plan (aoctl plan) for the test neighbor's
// session.
func (e *env) planLines() []string {
	e.t.Helper()
	rep, err := e.d.Plan(context.Background())
	if err != nil {
		e.t.Fatalf("Plan: %v", err)
	}
	var out []string
	for _, l := range rep.Plan {
		if strings.HasPrefix(l, "peer "+peerAddr.String()+" ") {
			out = append(out, l)
		}
	}
	return out
}

// TestPrefixBindingSteadyAfterTakeOver: a session under a prefix binding
// carries the listener's keys with the binding's prefix; the daemon takes
// them as the desired keys: steady means steady, `aoctl plan` has nothing
// to do and the take-over writes nothing. Before, the daemon wanted
// host-prefix keys there and the plan said "blocked (no-replacement)"
// forever while status said steady.
func TestPrefixBindingSteadyAfterTakeOver(t *testing.T) {
	synctest.Test(t, testPrefixBindingSteadyAfterTakeOver)
}

func testPrefixBindingSteadyAfterTakeOver(t *testing.T) {
	_, k1, _, _ := testKeys()
	e := newEnv(t, envOptions{policy: prefixPolicy, keys: []testKey{k1}})
	e.waitKeys("listener", e.lis, ids(k1))
	if ks := allKeys(t, e.lis); ks[0].Peer.String() != "192.0.2.0/24" {
		t.Fatalf("listener key for %s, want the binding's prefix 192.0.2.0/24", ks[0].Peer)
	}
	e.up(ids(k1), k1)
	_, writes := e.accC.calls()
	for range 20 { // a few of the session's steady re-reads
		time.Sleep(10 * time.Millisecond)
		e.d.Kick()
	}
	e.quiet(time.Second) // the last kick's pass and what it starts have run
	if got, want := e.planLines(), []string{"peer " + peerAddr.String() + " established ok"}; !slices.Equal(got, want) {
		t.Fatalf("plan after take-over: %q, want %q", got, want)
	}
	if _, w := e.accC.calls(); w != writes {
		t.Errorf("%d writes to the steady session after take-over, want none", w-writes)
	}
	if ps := e.peerStatus(); ps.Rotation.State != "steady" || ps.Rotation.LastAbortReason != "" || len(ps.Warnings) > 0 {
		t.Errorf("status rotation %+v warnings %q, want steady with nothing to say", ps.Rotation, ps.Warnings)
	}
	if err := e.net.Exchange(e.client, e.acc, 3); err != nil {
		t.Fatalf("exchange: %v", err)
	}
}

// TestPrefixBindingLaggingPeer: under a prefix binding a new key arrives
// that the peer does not have. The daemon installs and announces it but the
// kernel's Current_key on the session never becomes the new key while the
// peer lacks it (sampled all along, with segments flowing both ways all
// along); the roll aborts with its reason and is retried, as under a host
// binding; once the peer has the key the roll completes. Before, the
// daemon forced the inherited key off naming the new key as Current_key
// and completed the roll on that switch.
func TestPrefixBindingLaggingPeer(t *testing.T) {
	synctest.Test(t, testPrefixBindingLaggingPeer)
}

func testPrefixBindingLaggingPeer(t *testing.T) {
	_, k1, _, _ := testKeys()
	kn := testKey{name: "kn", send: 50, recv: 51, secret: "daemon-test-secret-kn-Pq8", sendStart: time.Now().Add(-time.Minute)}
	e := newEnv(t, envOptions{policy: prefixPolicy, keys: []testKey{k1, kn}, switchTimeout: 500 * time.Millisecond})
	// The session comes up before the source has kn.
	e.refreshWith(k1)
	e.waitKeys("listener", e.lis, ids(k1))
	e.up(ids(k1), k1)

	var peerHas atomic.Bool
	var samples, early atomic.Int64
	var exErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the session's Current_key and its segments, all along
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			has := peerHas.Load()
			if in, err := e.acc.Info(); err == nil {
				samples.Add(1)
				if in.HaveCurrent && in.CurrentKey == kn.send && !has {
					early.Add(1)
				}
			}
			if err := e.net.Exchange(e.client, e.acc, 1); err != nil && exErr.Load() == nil {
				exErr.Store(fmt.Sprintf("peer has the key: %t: %v", has, err))
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	e.refreshWith(k1, kn)
	e.waitKeys("session", e.acc, ids(k1, kn))
	for _, k := range allKeys(t, e.acc) {
		if k.Peer.String() != "192.0.2.0/24" {
			t.Errorf("session key %d/%d for %s, want the binding's prefix as on the listener", k.SendID, k.RecvID, k.Peer)
		}
	}
	e.waitFor("two aborted attempts", func() bool {
		return strings.Count(e.logs.String(), "roll aborted; old key kept") >= 2
	})
	if ps := e.peerStatus(); !strings.Contains(ps.Rotation.LastAbort, fmt.Sprintf("did not send with key recv=%d", kn.recv)) || ps.Rotation.LastAbortReason != "switch-timeout" {
		t.Errorf("status rotation %+v, want the abort's reason", ps.Rotation)
	}

	// The peer gets kn and prefers it (its RNext asks for kn): the roll
	// completes.
	completed := strings.Count(e.logs.String(), "roll complete")
	peerHas.Store(true)
	mirror := kn.mirror()
	if err := e.client.AddKey(mirror, tcpao.AddOptions{SetRNext: true}); err != nil {
		t.Fatal(err)
	}
	mirror.Secret.Zero()
	e.waitFor("the roll to kn", func() bool {
		in := info(t, e.acc)
		return in.HaveCurrent && in.CurrentKey == kn.send && strings.Count(e.logs.String(), "roll complete") > completed
	})
	close(stop)
	wg.Wait()
	stop = make(chan struct{})
	t.Logf("Current_key samples: %d, with the new key before the peer had it: %d", samples.Load(), early.Load())
	if early.Load() != 0 {
		t.Errorf("the new key was Current_key in %d of %d samples before the peer had it", early.Load(), samples.Load())
	}
	if err := exErr.Load(); err != nil {
		t.Errorf("a segment was dropped: %v", err)
	}
}
