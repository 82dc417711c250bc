package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestExecutorOptionsExclusive: a Daemon serves either a Speaker (with
// its Discoverer) or an Executor, never both, never neither.
func TestExecutorOptionsExclusive(t *testing.T) {
	src := &fakeSource{}
	cache := keystore.NewCache(src, keystore.CacheOptions{})
	defer cache.Close()
	pol := parsePolicy(t, fmt.Sprintf(basePolicy, "keep"))
	if _, err := daemon.New(daemon.Options{Policy: pol, Keys: cache}); err == nil {
		t.Error("New took neither a Speaker nor an Executor")
	}
	if _, err := daemon.New(daemon.Options{Policy: pol, Keys: cache, Executor: daemon.NewFakeExecutor(), Discoverer: newFakeDiscoverer()}); err == nil {
		t.Error("New took an Executor with a Discoverer")
	}
}

// execEnv is a Daemon serving a fake executor, its peer 192.0.2.2.
type execEnv struct {
	t   *testing.T
	src *fakeSource
	fx  interface {
		Written(peer.Key) []tcpao.KeyInfo
		SetSession(peer.Key, *rotator.Observed)
		LastSubmit() []daemon.ExecPlan
		Submits() int
		Reads(peer.Key) int
		SubmittedSince(n int) []daemon.ExecPlan
		HoldRevokes() (release func())
		HoldObserve() (release func())
		ObserveHeld() int
	}
	d    *daemon.Daemon
	peer peer.Key
}

// newExecEnv runs a Daemon on a fake executor under policy (basePolicy
// with keep when ""), with keys in the source, until the test ends. It
// runs in a synctest bubble.
func newExecEnv(t *testing.T, policy string, keys ...testKey) *execEnv {
	t.Helper()
	if policy == "" {
		policy = fmt.Sprintf(basePolicy, "keep")
	}
	src := &fakeSource{}
	t.Cleanup(src.close)
	cache := keystore.NewCache(src, keystore.CacheOptions{})
	t.Cleanup(cache.Close)
	fx := daemon.NewFakeExecutor()
	d, err := daemon.New(daemon.Options{Policy: parsePolicy(t, policy), Keys: cache, Source: src, Executor: fx,
		Resync: time.Hour, Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	e := &execEnv{t: t, src: src, fx: fx, d: d, peer: peer.KeyOf(peerAddr, "")}
	src.setKeys(execMKTs(keys)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return e
}

func execMKTs(ks []testKey) []keystore.MKT {
	var ms []keystore.MKT
	for _, k := range ks {
		ms = append(ms, k.mkt())
	}
	return ms
}

// execSess is a session with keys 20/21 and 30/31 that verified goodA
// and goodB segments, Current_key cur and RNext_key 30.
func execSess(goodA, goodB uint64, cur uint8) *rotator.Observed {
	k := func(send uint8, good uint64) tcpao.KeyInfo {
		return tcpao.KeyInfo{KeyRef: tcpao.KeyRef{SendID: send, RecvID: send + 1}, PktGood: good, IsCurrent: send == cur, IsRNext: send == 30}
	}
	return &rotator.Observed{HaveAO: true, Keys: []tcpao.KeyInfo{k(20, goodA), k(30, goodB)}}
}

// list renders the peer's written list: "20 30p" (send IDs, p preferred).
func (e *execEnv) list() string { return e.listOf(e.peer) }

func (e *execEnv) listOf(id peer.Key) string {
	var s []string
	for _, k := range e.fx.Written(id) {
		f := fmt.Sprint(k.SendID)
		if k.IsRNext {
			f += "p"
		}
		s = append(s, f)
	}
	return strings.Join(s, " ")
}

func (e *execEnv) waitList(want string) {
	e.t.Helper()
	if !testkit.Until(10*time.Second, func() bool { return e.list() == want }) {
		e.t.Fatalf("written list %q, want %q", e.list(), want)
	}
}

func (e *execEnv) setKeys(ks ...testKey) {
	e.t.Helper()
	e.src.setKeys(execMKTs(ks)...)
	if err := e.d.RefreshKeys(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// TestExecutorPassNeverStrands (TestDriverApplyAndRestore's and
// TestPlanPeer's scenarios through the daemon's pass): the policy's keys
// are written, the newest preferred; a key no longer desired stays while
// no session is up and while the peer sends with it, and leaves once the
// peer was seen sending with the preferred key since a settled read.
func TestExecutorPassNeverStrands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ka, kb := execKeys()
		e := newExecEnv(t, "", ka)
		e.waitList("20p")
		e.setKeys(ka, kb)
		e.waitList("20 30p")
		e.setKeys(kb)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := e.list(); got != "20 30p" {
			t.Fatalf("no session up: list %q, want key 20 kept for the next reconnect", got)
		}
		// The peer still sends with key 20 (BIRD's Current_key follows it).
		sess := execSess
		fx := e.fx
		good := uint64(50)
		fx.SetSession(e.peer, sess(good, 0, 20))
		for range 5 {
			good += 3
			fx.SetSession(e.peer, sess(good, 0, 20))
			time.Sleep(time.Second)
			synctest.Wait()
			if got := e.list(); got != "20 30p" {
				t.Fatalf("the peer sends with key 20: list %q, want it kept", got)
			}
		}
		// It switched: key 30 rises, key 20 stopped.
		goodB := uint64(0)
		if !testkit.Until(10*time.Second, func() bool {
			goodB++
			fx.SetSession(e.peer, sess(good, goodB, 30))
			return e.list() == "30p"
		}) {
			t.Fatalf("the peer switched to key 30: list %q, want key 20 retired", e.list())
		}
	})
}

// execKeys are the tests' keys: ka sent with until kb, the
// newest, took over.
func execKeys() (ka, kb testKey) {
	now := time.Now()
	return testKey{name: "ka", send: 20, recv: 21, secret: "exec-test-secret-ka-Qz4", sendStart: now.Add(-time.Hour)},
		testKey{name: "kb", send: 30, recv: 31, secret: "exec-test-secret-kb-Pw7", sendStart: now.Add(-time.Minute)}
}

// TestExecutorSettledPeerNotReadEveryPass (issue 52 item 2): a peer
// whose list is the desired one and keeps no key is not read by the
// passes between two sweeps (a route server's thousand files and
// sessions read every second cost aokeyd most of a CPU); the sweep reads
// it; a policy time boundary (a key's send start) is planned when it
// comes, with nothing else changed; and status reads the peer itself.
func TestExecutorSettledPeerNotReadEveryPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ka, kb := execKeys()
		kb.sendStart = time.Now().Add(30 * time.Second)
		e := newExecEnv(t, "", ka, kb)
		e.waitList("20p 30")
		e.fx.SetSession(e.peer, execSess(50, 0, 20))
		time.Sleep(2 * time.Second) // the written list read back: settled
		synctest.Wait()
		n0 := e.fx.Reads(e.peer)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := e.fx.Reads(e.peer) - n0; n != 0 {
			t.Errorf("a settled peer was read %d times in 5 s of passes, want none before the sweep", n)
		}
		time.Sleep(6 * time.Second) // past the sweep, 10 s after the first pass
		synctest.Wait()
		if n := e.fx.Reads(e.peer) - n0; n == 0 {
			t.Error("the sweep did not read the settled peer")
		}
		// Status reads the peer: the session just set shows at once.
		e.fx.SetSession(e.peer, execSess(60, 0, 20))
		rep, err := e.d.Status(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Peers) != 1 || len(rep.Peers[0].Keys) != 2 {
			t.Fatalf("status %+v, want the peer with its session's two keys", rep.Peers)
		}
		// kb's send start, 30 s in: planned when it comes.
		time.Sleep(time.Until(ka.sendStart.Add(time.Hour + 30*time.Second + 1500*time.Millisecond)))
		synctest.Wait()
		if got := e.list(); got != "20 30p" {
			t.Errorf("list %q 1.5 s after kb's send start, want 20 30p", got)
		}
	})
}

// TestExecutorRevoke (TestDriverRevoke, TestDriverRevokeScoped): a revoked
// key leaves the covered peers' lists at once, even while the peer sends
// with it, and the revoke reports each covered peer clean (Clean); a
// revoke scoped to one peer leaves the other peers' lists as they are.
func TestExecutorRevoke(t *testing.T) {
	for _, scoped := range []bool{false, true} {
		t.Run(map[bool]string{false: "global", true: "scoped"}[scoped], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ka, kb := execKeys()
				e := newExecEnv(t, twoPeerPolicy, ka, kb)
				other := peer.KeyOf(netip.MustParseAddr("192.0.2.3"), "")
				e.waitList("20 30p")
				if !testkit.Until(10*time.Second, func() bool { return e.listOf(other) == "20 30p" }) {
					t.Fatalf("peer %s: list %q", other, e.listOf(other))
				}
				e.fx.SetSession(e.peer, execSess(50, 0, 20)) // the peer sends with ka
				before := e.fx.Submits()
				req := control.RevokeRequest{Chain: chainName, Key: ka.name}
				if scoped {
					req.Peer = peerAddr.String()
				}
				res, err := e.d.Revoke(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if got := e.list(); got != "30p" {
					t.Errorf("list %q after the revoke, want key 20 gone", got)
				}
				// A pass may submit after the revoke; the revoke's own plan
				// for the peer is marked.
				if !slices.ContainsFunc(e.fx.SubmittedSince(before), func(pl daemon.ExecPlan) bool { return pl.Peer == e.peer && pl.Revoke }) {
					t.Errorf("the revoke's plans %+v, want the peer's marked Revoke (no backoff waited)", e.fx.SubmittedSince(before))
				}
				want := map[bool]string{false: "30p", true: "20 30p"}[scoped]
				if got := e.listOf(other); got != want {
					t.Errorf("peer %s: list %q after the revoke, want %q", other, got, want)
				}
				covered := map[bool]int{false: 2, true: 1}[scoped]
				if len(res.Sockets) != covered {
					t.Fatalf("revoke result %+v, want %d covered peers", res.Sockets, covered)
				}
				for _, s := range res.Sockets {
					if s.Action != control.ActionDeleted || s.Error != "" || s.Socket != "fake "+s.Peer+".list" {
						t.Errorf("revoke result %+v, want deleted", s)
					}
				}
				// The next passes keep it out.
				time.Sleep(3 * time.Second)
				synctest.Wait()
				if got := e.list(); got != "30p" {
					t.Errorf("list %q passes after the revoke", got)
				}
			})
		})
	}
}

// TestExecutorRotateAndStatus (TestDriverRotateNamesItsKey): aoctl rotate
// names the newest key, which the list prefers ahead of its send start,
// recorded as the machines' early rolls are; status shows the executor's
// peer with its session's keys, its active opens keyed; aoctl plan and
// adopt are refused.
func TestExecutorRotateAndStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ka, kb := execKeys()
		kb.sendStart = time.Now().Add(30 * time.Minute)
		e := newExecEnv(t, "", ka, kb)
		e.waitList("20p 30")
		res, err := e.d.Rotate(context.Background(), control.RotateRequest{Peer: peerAddr.String()})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Peers) != 1 || !res.Peers[0].Started || !strings.Contains(res.Peers[0].Detail, kb.name) {
			t.Fatalf("rotate %+v, want the roll to %s started", res.Peers, kb.name)
		}
		e.waitList("20 30p")
		e.fx.SetSession(e.peer, execSess(50, 3, 30))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		rep, err := e.d.Status(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Speaker != "fake" || len(rep.Peers) != 1 || rep.Peers[0].Peer != peerAddr.String() || len(rep.Peers[0].Keys) != 2 {
			t.Fatalf("status %+v, want peer %s with its session's two keys", rep, peerAddr)
		}
		// The speaker keys its own connects (TestDriverStatusActiveOpensKeyed).
		rep.Complete()
		if w := rep.Peers[0].Warnings; slices.Contains(w, control.WarnNotPassive) || !rep.Peers[0].ActiveOpensKeyed {
			t.Errorf("peer warnings %q, active opens keyed %v: the speaker keys its own active opens", w, rep.Peers[0].ActiveOpensKeyed)
		}
		if _, err := e.d.Status(context.Background(), "192.0.2.99"); err == nil {
			t.Error("status of a peer the policy does not name: no error")
		}
		// aoctl plan: each peer's list as the next pass leaves it; a dry
		// run that submits nothing (TestDriverPlan).
		before := e.fx.Submits()
		plan, err := e.d.Plan(context.Background())
		if want := "fake 192.0.2.2 192.0.2.2.list: unchanged [20/21, 30/31 preferred]"; err != nil || !slices.Contains(plan.Plan, want) {
			t.Errorf("aoctl plan with an executor: %q (%v), want the line %q", plan.Plan, err, want)
		}
		if after := e.fx.Submits(); after != before {
			t.Errorf("aoctl plan submitted %d plans", after-before)
		}
		if _, err := e.d.Adopt(context.Background(), control.AdoptRequest{}); !errors.Is(err, control.ErrInvalid) {
			t.Errorf("aoctl adopt with an executor: %v, want refused (%v)", err, control.ErrInvalid)
		}
	})
}

// TestExecutorScopedRevokePrefersThePolicysKey
// (TestScopedRevokePrefersThePolicysKey): after a revoke scoped to the
// peer, its list prefers the key the policy prefers for it once the
// revoked one is out (the later end, of keys sharing a send start), the
// key the other end of the chain sends with when aokeyd keys its sockets.
func TestExecutorScopedRevokePrefersThePolicysKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		start := now.Add(-time.Hour)
		k1 := testKey{name: "k1", send: 20, recv: 21, secret: "exec-test-secret-k1-Tr5", sendStart: start, end: now.Add(24 * time.Hour)}
		k2 := testKey{name: "k2", send: 30, recv: 31, secret: "exec-test-secret-k2-Yb8", sendStart: start, end: now.Add(48 * time.Hour)}
		k3 := testKey{name: "k3", send: 40, recv: 41, secret: "exec-test-secret-k3-Nc2", sendStart: start}
		e := newExecEnv(t, "", k1, k2, k3)
		e.waitList("20 30 40p")
		if _, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k3.name, Peer: peerAddr.String()}); err != nil {
			t.Fatal(err)
		}
		e.waitList("20 30p")
	})
}

// TestExecutorPlansOwnTheirSecrets: the executor applies a plan after the
// pass that made it, when the pass's key snapshot may be replaced and
// zeroed: a submitted plan's secrets are its own copies.
func TestExecutorPlansOwnTheirSecrets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ka, kb := execKeys()
		e := newExecEnv(t, "", ka)
		e.waitList("20p")
		pls := e.fx.LastSubmit()
		if len(pls) != 1 || len(pls[0].Keys) != 1 {
			t.Fatalf("submitted %+v, want one plan of one key", pls)
		}
		e.setKeys(ka, kb) // a new snapshot: the pass's is zeroed
		e.waitList("20 30p")
		want := ka.mkt()
		if !pls[0].Keys[0].MKT.Secret.Equal(want.Secret) {
			t.Error("the submitted plan's secret changed once the pass's snapshot was replaced")
		}
	})
}

// TestExecutorRotateNamesItsKey (TestDriverRotateNamesItsKey): aoctl
// rotate with an executor has the list prefer the key that was newest when
// the operator asked, until the schedule reaches it. A key added later is
// not preferred for being newest; the key asked for leaving the key source
// gives the schedule its key back, not the newest one; the schedule
// reaching the key ends the request.
func TestExecutorRotateNamesItsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		key := func(name string, send uint8, start time.Duration) testKey {
			return testKey{name: name, send: send, recv: send + 1, secret: "exec-rotate-secret-" + name + "-Qp7", sendStart: t0.Add(start)}
		}
		k1, k2, k3 := key("k1", 20, -time.Hour), key("k2", 30, 30*time.Minute), key("k3", 40, time.Hour)
		e := newExecEnv(t, "", k1, k2)
		e.waitList("20p 30")
		rotate := func(want string) {
			t.Helper()
			res, err := e.d.Rotate(context.Background(), control.RotateRequest{Peer: peerAddr.String()})
			if err != nil || len(res.Peers) != 1 || !res.Peers[0].Started || !strings.Contains(res.Peers[0].Detail, want) {
				t.Fatalf("Rotate: %+v, %v; want a roll to %s", res, err, want)
			}
		}
		settle := func() { time.Sleep(3 * time.Second); synctest.Wait() }
		// The preferred key's send ID: a key no longer desired stays in
		// the list while no session is up (the never-strand rule).
		pref := func() string {
			for _, f := range strings.Fields(e.list()) {
				if s, ok := strings.CutSuffix(f, "p"); ok {
					return s
				}
			}
			return ""
		}
		waitPref := func(want string) {
			t.Helper()
			if !testkit.Until(10*time.Second, func() bool { return pref() == want }) {
				t.Fatalf("list %q, want %s preferred", e.list(), want)
			}
		}
		rotate(k2.name)
		e.waitList("20 30p")
		e.setKeys(k1, k2, k3)
		settle()
		if got := e.list(); got != "20 30p 40" {
			t.Fatalf("k3 added: list %q, want k2 still preferred (nobody asked for k3)", got)
		}
		rotate(k3.name)
		e.waitList("20 30 40p")
		e.setKeys(k1, k2) // k3 leaves the key source
		settle()
		if got := pref(); got != "20" {
			t.Fatalf("the key asked for left the source: list %q, want the schedule's k1 preferred", e.list())
		}
		rotate(k2.name)
		waitPref("30")
		time.Sleep(31*time.Minute - time.Since(t0)) // the schedule reaches k2
		settle()
		if got := pref(); got != "30" {
			t.Fatalf("at k2's send start: list %q, want k2 preferred", e.list())
		}
		if res, err := e.d.Rotate(context.Background(), control.RotateRequest{Peer: peerAddr.String()}); err != nil || len(res.Peers) != 1 || res.Peers[0].Started {
			t.Errorf("Rotate with no newer key: %+v, %v; want nothing started", res, err)
		}
		if rep, _ := e.d.Status(context.Background(), ""); slices.ContainsFunc(rep.Warnings, func(w string) bool { return strings.Contains(w, "rotate") }) {
			t.Errorf("status warns of a request once the schedule reached its key: %q", rep.Warnings)
		}
	})
}

// TestExecutorPassWaitsForRevoke: while a revoke is under way (its lists
// submitted, the speaker's reconfigure not yet done) the pass reads no
// peer; the first pass after it reads them all. On the old code every
// pass read every peer the revoke had submitted to (in flight until read
// back), beside the reconfigure: at a route server's 1,000 protocols 1.9
// of the revoke's 5.1 CPU-seconds in the guest.
func TestExecutorPassWaitsForRevoke(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ka, kb := execKeys()
		e := newExecEnv(t, twoPeerPolicy, ka, kb)
		e.waitList("20 30p")
		release := e.fx.HoldRevokes()
		done := make(chan error, 1)
		before := e.fx.Submits()
		go func() {
			_, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: ka.name})
			done <- err
		}()
		if !testkit.Until(10*time.Second, func() bool {
			return slices.ContainsFunc(e.fx.SubmittedSince(before), func(pl daemon.ExecPlan) bool { return pl.Revoke })
		}) {
			t.Fatal("the revoke submitted nothing")
		}
		reads := e.fx.Reads(e.peer)
		time.Sleep(5 * time.Second) // five passes' worth
		synctest.Wait()
		if got := e.fx.Reads(e.peer); got != reads {
			t.Errorf("the pass read the peer %d times while the revoke was under way, want none", got-reads)
		}
		release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !testkit.Until(10*time.Second, func() bool { return e.fx.Reads(e.peer) > reads }) {
			t.Error("no pass read the peer after the revoke")
		}
		if got := e.list(); got != "30p" {
			t.Errorf("list %q after the revoke, want key 20 gone", got)
		}
	})
}

// TestExecutorRevokeCancelsAPass: a revoke that comes while a pass reads
// every peer (a route server's 1,000 files and sessions: over a second in
// the guest) does not wait for it: the pass gives way and submits
// nothing, the revoke's lists are applied, and the next pass plans every
// peer again. On the old code the revoke waited for the pass's read (here
// held until the end: the revoke never returned). Real time, not a
// synctest bubble: a revoke blocked on the pass's mutex would not let the
// bubble's clock reach the bound.
func TestExecutorRevokeCancelsAPass(t *testing.T) {
	func(t *testing.T) {
		ka, kb := execKeys()
		e := newExecEnv(t, twoPeerPolicy, ka, kb)
		if !realUntil(10*time.Second, func() bool { return e.list() == "20 30p" }) {
			t.Fatalf("written list %q", e.list())
		}
		release := e.fx.HoldObserve()
		defer release()
		e.setKeys(ka, kb) // a new snapshot: a full pass
		if !realUntil(10*time.Second, func() bool { return e.fx.ObserveHeld() == 1 }) {
			t.Fatal("no pass read the peers")
		}
		done := make(chan error, 1)
		go func() {
			_, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: ka.name})
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the revoke waited for the pass's read")
		}
		if got := e.list(); got != "30p" {
			t.Errorf("list %q after the revoke, want key 20 gone", got)
		}
		reads := e.fx.Reads(e.peer)
		e.setKeys(ka, kb) // a pass asked for: it plans again (no revoke under way)
		if !realUntil(30*time.Second, func() bool { return e.fx.Reads(e.peer) > reads }) {
			t.Error("no pass read the peer after the revoke")
		}
	}(t)
}

// realUntil polls cond every 10 ms of real time, up to limit.
func realUntil(limit time.Duration, cond func() bool) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
