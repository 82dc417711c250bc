// Regression tests for two daemon bugs found by the unit tests and fixed:
//
// TestSessionUpBeforeFirstSnapshotIsTakenOver: a session Established while
// the daemon has no key snapshot yet (aokeyd restarted with Vault down, or
// the speaker's first event handled before the first key read) must be
// taken over once the source recovers; reconcile now starts the rotation
// machine of any session that has none.
//
// TestControlCallsDuringSessionEvents: control calls racing session events
// read peer state without the lock (a data race, and a nil handle could
// reach SocketOf); peer state is now copy-on-write.

package daemon_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/tcpao"
)

func TestSessionUpBeforeFirstSnapshotIsTakenOver(t *testing.T) {
	synctest.Test(t, testSessionUpBeforeFirstSnapshotIsTakenOver)
}

func testSessionUpBeforeFirstSnapshotIsTakenOver(t *testing.T) {
	k0, k1, _, _ := testKeys()
	// Keys from a previous run: k1 and a stale k0 on the listener,
	// recorded in that run's ownership record.
	owned := filepath.Join(t.TempDir(), "owned-keys.json")
	var prev []tcpao.Key
	for _, k := range []testKey{k0, k1} {
		prev = append(prev, k.mkt().Key(peerHost, 0))
	}
	if err := daemon.WriteOwnedRecord(owned, speakerPID, prev...); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{keys: []testKey{k1}, sourceDown: errors.New("vault unreachable"), ownedFile: owned})
	e.waitFor("the first pass", func() bool { return strings.Contains(e.logs.String(), "no good key snapshot yet") })
	for _, key := range prev {
		if err := e.lis.AddKey(key, tcpao.AddOptions{}); err != nil {
			t.Fatal(err)
		}
		key.Secret.Zero()
	}
	e.connect(k1)
	e.established()
	e.waitFor("the session event", func() bool {
		return strings.Contains(e.logs.String(), "no key snapshot yet: not touching the new session")
	})
	e.refreshWith(k1)
	e.waitKeys("listener", e.lis, ids(k1))
	e.waitKeys("session", e.acc, ids(k1))
}

func TestControlCallsDuringSessionEvents(t *testing.T) {
	synctest.Test(t, testControlCallsDuringSessionEvents)
}

func testControlCallsDuringSessionEvents(t *testing.T) {
	_, k1, _, k3 := testKeys()
	e := newEnv(t, envOptions{keys: []testKey{k1, k3}})
	e.waitKeys("listener", e.lis, ids(k1, k3))
	e.up(ids(k1, k3), k3, k1)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx := context.Background()
			if _, err := e.d.Rotate(ctx, control.RotateRequest{All: true}); err != nil {
				t.Errorf("Rotate: %v", err)
			}
			if _, err := e.d.Plan(ctx); err != nil {
				t.Errorf("Plan: %v", err)
			}
			if _, err := e.d.Status(ctx, ""); err != nil {
				t.Errorf("Status: %v", err)
			}
		}
	}()
	down := e.session
	down.State = bgp.StateIdle
	for range 50 {
		e.sp.Set(down)
		e.sp.Set(e.session)
	}
	close(stop)
	wg.Wait()
}
