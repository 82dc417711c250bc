package birdnative

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// newTestExecutor is an Executor over a temporary keys directory and a
// fake BIRD control socket, with no BIRD process.
func newTestExecutor(t testing.TB) (*Executor, *fakeBird) {
	t.Helper()
	dir := t.TempDir()
	fb := &fakeBird{}
	sock := filepath.Join(dir, "bird.ctl")
	fb.serve(t, sock)
	e, err := Open(ExecOptions{Dir: filepath.Join(dir, "keys"), Control: sock, Bird: "true",
		PID: func() (int, error) { return 0, fmt.Errorf("no BIRD process in this test: %w", sockets.ErrNoProcess) }})
	if err != nil {
		t.Fatal(err)
	}
	return e, fb
}

func sk(send uint8, sendable bool) policy.ScheduledKey {
	return policy.ScheduledKey{MKT: keystore.MKT{Name: "k" + string('0'+rune(send)), SendID: send, RecvID: send + 100, Algorithm: tcpao.HMACSHA256,
		Secret: tcpao.NewSecret([]byte("sixteen byte key" + string('0'+rune(send))))}, Sendable: sendable, IncludeTCPOptions: true}
}

// flags renders a file's keys as "1p 2d" (send ID, p preferred, d
// deprecated).
func flags(ks []bird.Key) string {
	var s []string
	for _, k := range ks {
		f := string('0' + rune(k.SendID))
		if k.Preferred {
			f += "p"
		}
		if k.Deprecated {
			f += "d"
		}
		s = append(s, f)
	}
	return strings.Join(s, " ")
}

// input is a plan's input in these tests: the desired keys, the preferred
// one (-1: none may be sent with), the written file, the revoked IDs.
type input struct {
	Desired   []policy.ScheduledKey
	Preferred int
	Written   []bird.Key
	Revoked   []ids
}

// execPlan is a plan as the daemon's pass hands one over for in, with no
// session: PlanSocket on the written file as a listener that every
// written key carries (nothing but revoked keys leaves).
func execPlan(id peer.Key, in input, gen uint64) daemon.ExecPlan {
	d := rotator.Desired{Socket: "bird file", Kind: rotator.Listening}
	for i, k := range in.Desired {
		d.Keys = append(d.Keys, rotator.DesiredKey{Key: tcpao.Key{KeyRef: refOf(ids{k.MKT.SendID, k.MKT.RecvID}), Algorithm: k.MKT.Algorithm, Secret: k.MKT.Secret},
			AcceptOnly: !k.Sendable && i != in.Preferred})
	}
	if in.Preferred >= 0 {
		m := in.Desired[in.Preferred].MKT
		d.WantCurrent, d.WantRNext = rotator.ID(m.SendID), rotator.ID(m.RecvID)
	}
	o := rotator.Observed{HaveAO: true}
	p := daemon.ExecPlan{Peer: id, Keys: in.Desired, Preferred: in.Preferred, Gen: gen}
	for _, w := range in.Written {
		ki := tcpao.KeyInfo{KeyRef: refOf(idsOf(w)), Algorithm: w.Algorithm, Fingerprint: w.Secret.Fingerprint(), IsRNext: w.Preferred}
		o.Keys, o.Carried = append(o.Keys, ki), append(o.Carried, ki.KeyRef)
		desired := slices.ContainsFunc(in.Desired, func(k policy.ScheduledKey) bool { return k.MKT.SendID == w.SendID && k.MKT.RecvID == w.RecvID })
		if slices.Contains(in.Revoked, idsOf(w)) && !desired {
			d.Revoked = append(d.Revoked, rotator.RevokedKey{KeyRef: ki.KeyRef, Fingerprint: ki.Fingerprint})
			p.Revoked = append(p.Revoked, ki.KeyRef)
		}
	}
	p.Plan = rotator.PlanSocket(d, o)
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
			fb.setRefuse(tc.refuse)
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
			if got := flags(writtenKeys(t, file)); got != tc.want {
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
func writtenKeys(t testing.TB, path string) []bird.Key {
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

// TestExecutorRevokeSkipsBackoff: after a configure BIRD refused, a
// pass's plan waits out the backoff pending (no outcome, no configure,
// so no pass is kicked to submit it again), and is applied when the
// backoff ends; a revoke's plan is applied at once, with whatever is
// pending (a revoke waits for no retry).
func TestExecutorRevokeSkipsBackoff(t *testing.T) {
	e, fb := newTestExecutor(t)
	id := peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "")
	file := filepath.Join(e.o.Dir, "192.0.2.2.conf")
	ctx, cancel := context.WithCancel(context.Background())
	outcomes := make(chan daemon.ExecOutcome, 8)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, func(o daemon.ExecOutcome) { outcomes <- o }) }()
	defer func() { cancel(); <-done }()
	next := func(within time.Duration) (daemon.ExecOutcome, bool) {
		select {
		case o := <-outcomes:
			return o, true
		case <-time.After(within):
			return daemon.ExecOutcome{}, false
		}
	}
	// Run zeroes each plan's secrets once applied: each plan its own.
	in := func() input { return input{Desired: []policy.ScheduledKey{sk(1, true)}, Preferred: 0} }
	fb.setRefuse(true)
	e.Submit([]daemon.ExecPlan{execPlan(id, in(), 1)})
	if o, ok := next(10 * time.Second); !ok || o.ConfigureErr == nil {
		t.Fatalf("outcome %+v, want the configure refused", o)
	}
	fb.setRefuse(false)
	n := fb.count()
	e.Submit([]daemon.ExecPlan{execPlan(id, in(), 2)})
	if o, ok := next(300 * time.Millisecond); ok || fb.count() != n {
		t.Fatalf("within the backoff: outcome %+v, %d configures, want none", o, fb.count()-n)
	}
	pl := execPlan(id, in(), 3)
	pl.Revoke = true
	e.Submit([]daemon.ExecPlan{pl})
	if o, ok := next(10 * time.Second); !ok || o.ConfigureErr != nil || o.Gen != 3 || fb.count() != n+1 {
		t.Fatalf("a revoke's plan: outcome %+v, %d configures, want one", o, fb.count()-n)
	}
	if got := flags(writtenKeys(t, file)); got != "1p" {
		t.Errorf("file %q, want %q", got, "1p")
	}
	// Refused again: the pass's plan is applied once the backoff ends.
	fb.setRefuse(true)
	e.Submit([]daemon.ExecPlan{execPlan(id, input{Desired: []policy.ScheduledKey{sk(1, true), sk(2, true)}, Preferred: 1, Written: writtenKeys(t, file)}, 4)})
	if o, ok := next(10 * time.Second); !ok || o.ConfigureErr == nil {
		t.Fatalf("outcome %+v, want the configure refused", o)
	}
	fb.setRefuse(false)
	e.Submit([]daemon.ExecPlan{execPlan(id, input{Desired: []policy.ScheduledKey{sk(1, true), sk(2, true)}, Preferred: 1, Written: writtenKeys(t, file)}, 5)})
	if o, ok := next(10 * time.Second); !ok || o.ConfigureErr != nil || o.Gen != 5 {
		t.Fatalf("after the backoff: outcome %+v, want the plan applied", o)
	}
	if got := flags(writtenKeys(t, file)); got != "1 2p" {
		t.Errorf("file %q, want %q", got, "1 2p")
	}
}

// TestExecutorKeepsWrittenMaterial: a desired key whose material in the
// key source changed under the same IDs keeps its written material in
// the file (BIRD would swap it under the session; the plan's Kept says
// so), and a key the plan keeps is rendered with its own secret, not a
// zeroed one: the file is rendered before the written keys are wiped.
func TestExecutorKeepsWrittenMaterial(t *testing.T) {
	e, _ := newTestExecutor(t)
	id := peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "")
	file := filepath.Join(e.o.Dir, "192.0.2.2.conf")
	if o := runOnce(t, e, execPlan(id, input{Desired: []policy.ScheduledKey{sk(1, true), sk(2, true)}, Preferred: 0}, 1)); o.ConfigureErr != nil || len(o.Failed) != 0 {
		t.Fatalf("outcome %+v", o)
	}
	edited := sk(1, true)
	edited.MKT.Secret = tcpao.NewSecret([]byte("an edited secret of sixteen bytes"))
	// Key 2 is no longer desired: kept (no session); key 1's new
	// material is held back; key 3 is added.
	in := input{Desired: []policy.ScheduledKey{edited, sk(3, true)}, Preferred: 1, Written: writtenKeys(t, file)}
	if o := runOnce(t, e, execPlan(id, in, 2)); o.ConfigureErr != nil || len(o.Failed) != 0 {
		t.Fatalf("outcome %+v", o)
	}
	got := writtenKeys(t, file)
	if flags(got) != "1 2d 3p" {
		t.Fatalf("file %q, want %q", flags(got), "1 2d 3p")
	}
	for i, want := range []tcpao.Secret{sk(1, true).MKT.Secret, sk(2, true).MKT.Secret, sk(3, true).MKT.Secret} {
		if !got[i].Secret.Equal(want) {
			t.Errorf("key %d: the file holds other material than the written (or added) key's", got[i].SendID)
		}
	}
}

// TestExecutorMendsNoListeningSocket (TestDriverMendsNoListeningSocket):
// BIRD disables a protocol whose listener it could not re-bind ("No
// listening socket"; a duplicate of the old listener, as aokeyd's own
// reads hold, keeps it listening); Run's poll enables it again, at most
// once in mendEvery, and leaves a protocol the operator disabled alone.
func TestExecutorMendsNoListeningSocket(t *testing.T) {
	e, fb := newTestExecutor(t)
	e.o.Poll = 10 * time.Millisecond
	id := peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "")
	e.Observe(context.Background(), []peer.Key{id}) // the pass's peers: managed
	proto := func(lastErr string) string {
		r := "2002-Name       Proto      Table      State  Since         Info\n" +
			"1002-peer_a     BGP        ---        down   06:10:01.123  \n" +
			"1006-  BGP state:          Down\n" +
			"       Neighbor address: 192.0.2.2\n"
		if lastErr != "" {
			r += "       Last error:       " + lastErr + "\n"
		}
		return r + "0000 \n"
	}
	enables := func() int {
		fb.mu.Lock()
		defer fb.mu.Unlock()
		n := 0
		for _, c := range fb.commands {
			if c == "enable peer_a" {
				n++
			}
		}
		return n
	}
	polled := func(n int) {
		t.Helper()
		start := fb.shows()
		if !eventually(10*time.Second, func() bool { return fb.shows() >= start+n }) {
			t.Fatalf("Run read BIRD's protocols %d times, want %d", fb.shows()-start, n)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, func(daemon.ExecOutcome) {}) }()
	defer func() { cancel(); <-done }()
	fb.mu.Lock()
	fb.protocols = proto("") // disabled by the operator: no error
	fb.mu.Unlock()
	polled(3)
	if n := enables(); n != 0 {
		t.Fatalf("a protocol the operator disabled was enabled (%d)", n)
	}
	fb.mu.Lock()
	fb.protocols = proto("No listening socket")
	fb.mu.Unlock()
	polled(3)
	if n := enables(); n != 1 {
		t.Fatalf("%d enables of the protocol BIRD disabled for want of its listener over three polls, want 1", n)
	}
}
