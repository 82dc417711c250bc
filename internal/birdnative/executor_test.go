package birdnative

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// newTestExecutor is an Executor over a temporary keys directory and a
// fake BIRD control socket, with no BIRD process.
func newTestExecutor(t *testing.T) (*Executor, *fakeBird) {
	t.Helper()
	dir := t.TempDir()
	fb := &fakeBird{}
	sock := filepath.Join(dir, "bird.ctl")
	fb.serve(t, sock)
	keys := filepath.Join(dir, "keys")
	if err := os.Mkdir(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	return NewExecutor(ExecOptions{Dir: keys, Control: sock, Bird: "true",
		PID: func() (int, error) { return 0, fmt.Errorf("no BIRD process in this test: %w", sockets.ErrNoProcess) }}), fb
}

// execPlan is the plan the daemon's pass hands over for in: PlanSocket on
// the written file as a socket (no session: nothing but revoked keys
// leaves).
func execPlan(id peer.Key, in input, gen uint64) daemon.ExecPlan {
	fs := fileAsSocket(in)
	p := daemon.ExecPlan{Peer: id, Plan: rotator.PlanSocket(fs.d, fs.o), Keys: in.Desired, Preferred: in.Preferred, Gen: gen}
	for _, r := range in.Revoked {
		p.Revoked = append(p.Revoked, refOf(r))
	}
	return p
}

// runOnce submits plans to e and waits for Run's outcome.
func runOnce(t *testing.T, e *Executor, plans ...daemon.ExecPlan) daemon.ExecOutcome {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outcomes := make(chan daemon.ExecOutcome, 1)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, func(o daemon.ExecOutcome) { outcomes <- o }) }()
	e.Submit(plans)
	select {
	case o := <-outcomes:
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("no outcome from Run")
	}
	return daemon.ExecOutcome{}
}

// TestExecutorSubmitRunObserve: a submitted plan is written and BIRD
// reconfigured once by Run; Observe reads the file back as a socket whose
// Current_key and RNext_key are its preferred key; a configure BIRD
// refuses puts the file back and says why in the outcome.
func TestExecutorSubmitRunObserve(t *testing.T) {
	e, fb := newTestExecutor(t)
	id := peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "")
	file := filepath.Join(e.o.Dir, "192.0.2.2.conf")
	first := input{Desired: []policy.ScheduledKey{sk(1, true), sk(2, false)}, Preferred: 0}
	for _, tc := range []struct {
		name     string
		in       func() input
		refuse   bool
		want     string // the file's flags after Run
		failed   bool   // ConfigureErr
		observed string // Observe's written keys: send IDs, c Current_key and RNext_key
	}{
		{"the first file", func() input { return first }, false, "1p 2d", false, "1c 2"},
		{"a refused configure puts the file back", func() input {
			in := first
			in.Desired, in.Preferred = []policy.ScheduledKey{sk(1, true), sk(2, true)}, 1
			return in
		}, true, "1p 2d", true, "1c 2"},
		{"the same change once BIRD takes it", func() input {
			in := first
			in.Desired, in.Preferred = []policy.ScheduledKey{sk(1, true), sk(2, true)}, 1
			return in
		}, false, "1 2p", false, "1 2c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb.mu.Lock()
			fb.refuse = tc.refuse
			fb.mu.Unlock()
			e.retryAt = time.Time{} // the backoff's wait, skipped
			in := tc.in()
			in.Written = writtenKeys(t, file)
			o := runOnce(t, e, execPlan(id, in, 7))
			if o.Gen != 7 || len(o.Failed) != 0 || (o.ConfigureErr != nil) != tc.failed {
				t.Fatalf("outcome %+v", o)
			}
			if tc.failed && !strings.Contains(o.ConfigureErr.Error(), "birdc configure failed") {
				t.Errorf("ConfigureErr %v", o.ConfigureErr)
			}
			if got := flags(plan{Keys: writtenKeys(t, file)}); got != tc.want {
				t.Errorf("file %q, want %q", got, tc.want)
			}
			ob := e.Observe(context.Background(), []peer.Key{id})[id]
			if ob.Session != nil || ob.Unread != nil || len(ob.Warnings) != 0 || ob.Where != "bird "+file {
				t.Errorf("observed %+v", ob)
			}
			var got []string
			for _, k := range ob.Written.Keys {
				f := fmt.Sprint(k.SendID)
				if k.IsCurrent && k.IsRNext {
					f += "c"
				}
				got = append(got, f)
			}
			if strings.Join(got, " ") != tc.observed || ob.Written.Keys[0].Fingerprint == (tcpao.Fingerprint{}) {
				t.Errorf("observed written %q, want %q", got, tc.observed)
			}
		})
	}
	if fb.count() != 3 {
		t.Errorf("%d configures, want 3", fb.count())
	}
}

// TestExecutorObserveUnread: a BIRD process that cannot be told (two of
// them) is an Unread, not "no session": no key the peer may use leaves.
func TestExecutorObserveUnread(t *testing.T) {
	e, _ := newTestExecutor(t)
	e.o.PID = func() (int, error) {
		return 0, errors.New("more than one bird process (12, 34): set speaker.bird.pid_file")
	}
	id := peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "")
	ob := e.Observe(context.Background(), []peer.Key{id})[id]
	if ob.Unread == nil || !strings.Contains(ob.Unread.Error(), "speaker.bird.pid_file") || ob.Written.HaveAO {
		t.Fatalf("observed %+v", ob)
	}
	if _, err := e.Clean(context.Background(), []peer.Key{id}, refOf(ids{1, 101})); err == nil {
		t.Fatal("Clean without BIRD's process: no error")
	}
}

// writtenKeys reads the file at path back (nil: none).
func writtenKeys(t *testing.T, path string) []bird.Key {
	t.Helper()
	b, err := readFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := parseFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// TestExecutorRevokeSkipsBackoff: after a configure BIRD refused, a pass's
// plan within the backoff is dropped (the next pass submits again), but a
// revoke's is applied at once, as the Driver's revoke clears its backoff.
func TestExecutorRevokeSkipsBackoff(t *testing.T) {
	e, fb := newTestExecutor(t)
	id := peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "")
	file := filepath.Join(e.o.Dir, "192.0.2.2.conf")
	fb.mu.Lock()
	fb.refuse = true
	fb.mu.Unlock()
	// Run zeroes each plan's secrets once applied: each plan its own.
	in := func() input { return input{Desired: []policy.ScheduledKey{sk(1, true)}, Preferred: 0} }
	if o := runOnce(t, e, execPlan(id, in(), 1)); o.ConfigureErr == nil {
		t.Fatalf("outcome %+v, want the configure refused", o)
	}
	fb.mu.Lock()
	fb.refuse = false
	fb.mu.Unlock()
	n := fb.count()
	if o := runOnce(t, e, execPlan(id, in(), 2)); o.ConfigureErr != nil || fb.count() != n {
		t.Fatalf("within the backoff: outcome %+v, %d configures, want none", o, fb.count()-n)
	}
	pl := execPlan(id, in(), 3)
	pl.Revoke = true
	if o := runOnce(t, e, pl); o.ConfigureErr != nil || fb.count() != n+1 {
		t.Fatalf("a revoke's plan: outcome %+v, %d configures, want one", o, fb.count()-n)
	}
	if got := flags(plan{Keys: writtenKeys(t, file)}); got != "1p" {
		t.Errorf("file %q, want %q", got, "1p")
	}
}
