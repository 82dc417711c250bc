package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/revocation"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Keys of the test chain. now-relative send starts make the preferred key
// (the send-valid one with the latest start) k1, with k0 and k2 as older
// sendable keys and k3 accept-only (its send start is an hour ahead).
func testKeys() (k0, k1, k2, k3 testKey) {
	now := time.Now()
	k0 = testKey{name: "k0", send: 10, recv: 11, secret: "daemon-test-secret-k0-Xq7", sendStart: now.Add(-3 * time.Hour)}
	k1 = testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2", sendStart: now.Add(-1 * time.Hour)}
	k2 = testKey{name: "k2", send: 30, recv: 31, secret: "daemon-test-secret-k2-Lm9", sendStart: now.Add(-2 * time.Hour)}
	k3 = testKey{name: "k3", send: 40, recv: 41, secret: "daemon-test-secret-k3-Zr4", sendStart: now.Add(time.Hour)}
	return k0, k1, k2, k3
}

// peerStatus returns the daemon's status of the test neighbor.
func (e *env) peerStatus() control.PeerStatus {
	e.t.Helper()
	rep, err := e.d.Status(context.Background(), peerAddr.String())
	if err != nil {
		e.t.Fatalf("Status: %v", err)
	}
	if len(rep.Peers) != 1 {
		e.t.Fatalf("Status: %d peers, want 1", len(rep.Peers))
	}
	return rep.Peers[0]
}

// up connects the remote router with the mirrors of keys, reports the
// session and waits until the daemon runs its rotation (state steady) with
// the session carrying want.
func (e *env) up(want []string, keys ...testKey) {
	e.t.Helper()
	e.connect(keys...)
	e.established()
	e.waitFor("session managed and steady", func() bool {
		return e.peerStatus().Rotation.State == "steady" && slices.Equal(keyIDs(e.t, e.acc), want)
	})
}

func TestEstablishedSessionGetsDesiredKeysAndStrayKeyRemoved(t *testing.T) {
	synctest.Test(t, testEstablishedSessionGetsDesiredKeysAndStrayKeyRemoved)
}

func testEstablishedSessionGetsDesiredKeysAndStrayKeyRemoved(t *testing.T) {
	k0, k1, _, _ := testKeys()
	e := newEnv(t, envOptions{keys: []testKey{k0, k1}})
	e.waitKeys("listener", e.lis, ids(k0, k1))

	// The policy stops wanting k0; the listener loses it on the next pass.
	e.refreshWith(k1)
	e.waitKeys("listener", e.lis, ids(k1))

	// The del_async race: a connection accepted before the listener's
	// delete took effect still copies k0.
	stray := k0.mkt().Key(peerHost, 0)
	if err := e.lis.AddKey(stray, tcpao.AddOptions{}); err != nil {
		t.Fatal(err)
	}
	stray.Secret.Zero()
	e.connect(k1)
	if got := keyIDs(t, e.acc); !slices.Equal(got, ids(k0, k1)) {
		t.Fatalf("accepted socket before the daemon saw it: keys %v, want %v (the stray copy)", got, ids(k0, k1))
	}
	e.established()
	e.waitKeys("accepted socket", e.acc, ids(k1))
	// The stray on the listener is drift (the test put it there): the next
	// full pass removes it. A session event alone runs none.
	e.d.Kick()
	e.waitKeys("listener", e.lis, ids(k1))
	e.waitFor("the session's rotation to settle", func() bool { return e.peerStatus().Rotation.State == "steady" })
	if err := e.net.Exchange(e.client, e.acc, 3); err != nil {
		t.Fatalf("exchange after the correction: %v", err)
	}

	ps := e.peerStatus()
	want := info(t, e.acc)
	if ps.SessionState != "established" || !ps.Passive {
		t.Errorf("status: session %q passive %t, want established and passive", ps.SessionState, ps.Passive)
	}
	if len(ps.Keys) != 1 {
		t.Fatalf("status keys: %+v, want k1 only", ps.Keys)
	}
	k := ps.Keys[0]
	if k.Chain != chainName || k.Name != k1.name || k.SendID != k1.send || k.RecvID != k1.recv || !k.Current || !k.RNext || k.State != control.KeyInstalled {
		t.Errorf("status key: %+v, want %s/%s send=%d recv=%d current, rnext, installed", k, chainName, k1.name, k1.send, k1.recv)
	}
	if k.Alg != string(tcpao.HMACSHA256) || k.MACLen != 12 || k.SendLifetime.Start.IsZero() {
		t.Errorf("status key: alg %q maclen %d send start %v, want the MKT's", k.Alg, k.MACLen, k.SendLifetime.Start)
	}
	if want.PktGood == 0 || ps.Counters.PktGood != want.PktGood || ps.Counters.PktBad != want.PktBad {
		t.Errorf("status counters %+v, socket pkt_good=%d pkt_bad=%d (want equal, pkt_good > 0)", ps.Counters, want.PktGood, want.PktBad)
	}
	var kinds []string
	for _, s := range ps.Sockets {
		kinds = append(kinds, s.Kind)
	}
	if !slices.Contains(kinds, control.KindListen) || !slices.Contains(kinds, control.KindEstablished) {
		t.Errorf("status sockets %+v, want the listener and the session", ps.Sockets)
	}
}

func TestKeySourceFailureDeletesNothing(t *testing.T) {
	synctest.Test(t, testKeySourceFailureDeletesNothing)
}

func testKeySourceFailureDeletesNothing(t *testing.T) {
	_, k1, k2, _ := testKeys()
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}})
	e.waitKeys("listener", e.lis, ids(k1, k2))
	e.up(ids(k1, k2), k2, k1)

	e.src.fail(errors.New("vault: 503 sealed"))
	time.Sleep(time.Hour) // the bubble's clock: the source has been down an hour (every read failed)
	// A sentinel: k2 leaves the listener behind the daemon's back. The
	// pass after the failed read puts it back from the last good snapshot,
	// which proves the pass ran; an empty key set would have deleted k1.
	if err := e.lis.DelKey(tcpao.DelKey{KeyRef: k2.mkt().Key(peerHost, 0).KeyRef}); err != nil {
		t.Fatal(err)
	}
	if err := e.d.RefreshKeys(context.Background()); err == nil || !strings.Contains(err.Error(), "503 sealed") {
		t.Fatalf("RefreshKeys: %v, want the source's error", err)
	}
	e.waitKeys("listener", e.lis, ids(k1, k2))
	if got := keyIDs(t, e.acc); !slices.Equal(got, ids(k1, k2)) {
		t.Errorf("session keys %v after the source failed, want %v", got, ids(k1, k2))
	}
	if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
		t.Errorf("exchange with the source down: %v", err)
	}

	rep, err := e.d.Status(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	ks := rep.KeySource
	if !strings.Contains(ks.LastError, "503 sealed") || !ks.Stale || time.Duration(ks.Age) < time.Hour {
		t.Errorf("key source status %+v, want the error, stale and an age of at least 1h", ks)
	}
	if len(rep.Warnings) == 0 {
		t.Errorf("status has no warning about the stale key source")
	}
	if len(rep.Peers) != 1 || len(rep.Peers[0].Keys) != 2 {
		t.Errorf("status peers %+v, want the session with its two keys", rep.Peers)
	}
}

func TestNoSnapshotTouchesNoSocket(t *testing.T) { synctest.Test(t, testNoSnapshotTouchesNoSocket) }

func testNoSnapshotTouchesNoSocket(t *testing.T) {
	_, k1, _, _ := testKeys()
	e := newEnv(t, envOptions{keys: []testKey{k1}, sourceDown: errors.New("vault unreachable")})
	e.waitFor("the first pass", func() bool { return strings.Contains(e.logs.String(), "no good key snapshot yet") })
	e.connect() // no keys anywhere: a plain TCP session
	e.established()
	e.waitFor("the session event", func() bool {
		return strings.Contains(e.logs.String(), "no key snapshot yet: not touching the new session")
	})
	// A minute more of failing reads, passes and whatever they start.
	e.quiet(time.Minute)
	for name, c := range map[string]*countingSocket{"listener": e.lisC, "session": e.accC} {
		if r, w := c.calls(); r != 0 || w != 0 {
			t.Errorf("%s: %d reads and %d writes without a key snapshot, want none", name, r, w)
		}
	}
	if got := keyIDs(t, e.lis); len(got) != 0 {
		t.Errorf("listener keys %v, want none", got)
	}

	// The source comes back: now the daemon does install keys (the
	// counting wrapper sees the daemon's calls).
	e.refreshWith(k1)
	e.waitKeys("listener", e.lis, ids(k1))
	if _, w := e.lisC.calls(); w == 0 {
		t.Errorf("listener: no writes counted after the source recovered")
	}
}

func TestStopLeavesEveryKeyInPlace(t *testing.T) { synctest.Test(t, testStopLeavesEveryKeyInPlace) }

func testStopLeavesEveryKeyInPlace(t *testing.T) {
	_, k1, k2, _ := testKeys()
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}})
	e.waitKeys("listener", e.lis, ids(k1, k2))
	e.up(ids(k1, k2), k2, k1)

	before := map[string][]tcpao.KeyInfo{"listener": allKeys(t, e.lis), "session": allKeys(t, e.acc)}
	infoBefore := info(t, e.acc)
	e.stop()
	after := map[string][]tcpao.KeyInfo{"listener": allKeys(t, e.lis), "session": allKeys(t, e.acc)}
	for name := range before {
		if !sameKeys(before[name], after[name]) {
			t.Errorf("%s keys changed by stopping: before %v, after %v", name, before[name], after[name])
		}
	}
	if len(before["listener"]) != 2 || len(before["session"]) != 2 {
		t.Fatalf("setup: keys %v, want two on each socket", before)
	}
	ia := info(t, e.acc)
	if ia.CurrentKey != infoBefore.CurrentKey || ia.RNextKey != infoBefore.RNextKey {
		t.Errorf("current/rnext %d/%d after stop, was %d/%d", ia.CurrentKey, ia.RNextKey, infoBefore.CurrentKey, infoBefore.RNextKey)
	}
	if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
		t.Errorf("exchange after stop: %v", err)
	}
}

func allKeys(t *testing.T, s tcpao.Socket) []tcpao.KeyInfo {
	t.Helper()
	ks, err := s.Keys(tcpao.KeyFilter{})
	if err != nil {
		t.Fatalf("Keys: %v", err)
	}
	return ks
}

// sameKeys compares key sets by reference, material and current/rnext
// (not counters).
func sameKeys(a, b []tcpao.KeyInfo) bool {
	norm := func(ks []tcpao.KeyInfo) []string {
		var out []string
		for _, k := range ks {
			out = append(out, fmt.Sprintf("%s %s %d %t %x %t %t", k.KeyRef, k.Algorithm, k.MACLen, k.ExcludeOptions, k.Fingerprint, k.IsCurrent, k.IsRNext))
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(norm(a), norm(b))
}

func TestRevokeCurrentKeyWithBackup(t *testing.T) { synctest.Test(t, testRevokeCurrentKeyWithBackup) }

func testRevokeCurrentKeyWithBackup(t *testing.T) {
	_, k1, k2, _ := testKeys()
	file := filepath.Join(t.TempDir(), "state", "revocations.json")
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}, revocationsFile: file})
	e.waitKeys("listener", e.lis, ids(k1, k2))
	e.up(ids(k1, k2), k2, k1)
	if i := info(t, e.acc); i.CurrentKey != k1.send {
		t.Fatalf("setup: session current %d, want k1 (%d)", i.CurrentKey, k1.send)
	}

	res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name})
	if err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	var forced, listenerDel int
	for _, s := range res.Sockets {
		switch {
		case s.Socket == "peer "+peerAddr.String():
			forced++
			if s.Action != control.ActionForcedReplaced || s.Replacement != fmt.Sprintf("send=%d recv=%d", k2.send, k2.recv) || s.Error != "" {
				t.Errorf("session outcome %+v, want forced-replaced by k2", s)
			}
		case strings.HasPrefix(s.Socket, "listen "):
			listenerDel++
			if s.Action != control.ActionDeleted || s.Error != "" {
				t.Errorf("listener outcome %+v, want deleted", s)
			}
		default:
			t.Errorf("unexpected revoke outcome %+v", s)
		}
	}
	if forced != 1 || listenerDel != 1 {
		t.Errorf("revoke outcomes %+v, want one forced replace and one listener delete", res.Sockets)
	}
	if !res.SourceRevoked || !slices.Equal(e.src.revokeCalls(), []string{chainName + "/" + k1.name}) {
		t.Errorf("source revoke: result %t, calls %v", res.SourceRevoked, e.src.revokeCalls())
	}
	if got := keyIDs(t, e.lis); !slices.Equal(got, ids(k2)) {
		t.Errorf("listener keys %v after revoke, want %v", got, ids(k2))
	}
	if got := keyIDs(t, e.acc); !slices.Equal(got, ids(k2)) {
		t.Errorf("session keys %v after revoke, want %v", got, ids(k2))
	}
	// The session sends with the backup at once; the peer follows.
	if err := e.net.Exchange(e.acc, e.client, 3); err != nil {
		t.Fatalf("exchange after revoke: %v", err)
	}
	if i := info(t, e.acc); i.PktBad != 0 || i.CurrentKey != k2.send || i.RNextKey != k2.recv {
		t.Errorf("session after revoke: %+v, want pkt_bad 0 and current/rnext k2", i)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var recs []revocation.Revocation
	if err := json.Unmarshal(b, &recs); err != nil {
		t.Fatalf("revocations file: %v", err)
	}
	if !slices.ContainsFunc(recs, func(r revocation.Revocation) bool { return r.Chain == chainName && r.Key == k1.name && !r.At.IsZero() }) {
		t.Errorf("revocations file %s does not record %s/%s", b, chainName, k1.name)
	}

	// A restart with the same file over the same, unrevoked source. k2
	// leaves the listener first as a sentinel: its return proves the new
	// daemon's pass ran.
	e.stop()
	if err := e.lis.DelKey(tcpao.DelKey{KeyRef: k2.mkt().Key(peerHost, 0).KeyRef}); err != nil {
		t.Fatal(err)
	}
	// The speaker's first event waits for the first pass: a session
	// reported before the daemon has a snapshot is never taken over (the
	// bug latesnapshot_test.go reproduces).
	release := e.sp.HoldSync()
	e.start(file)
	e.waitKeys("listener after restart", e.lis, ids(k2))
	release()
	e.waitFor("the restarted daemon to take the session over", func() bool { return e.peerStatus().Rotation.State == "steady" })
	if got := keyIDs(t, e.acc); !slices.Equal(got, ids(k2)) {
		t.Errorf("session keys %v after restart, want %v (k1 must not come back)", got, ids(k2))
	}

	// Control: without the file the same source does re-install k1.
	e.stop()
	e.start("")
	e.waitKeys("listener without the revocations file", e.lis, ids(k1, k2))
}

func TestRevokeOnlyKey(t *testing.T) {
	for _, tc := range []struct {
		onRevoke   string
		action     control.SocketAction
		wantResets int
	}{
		{onRevoke: "reset", action: control.ActionReset, wantResets: 1},
		{onRevoke: "keep", action: control.ActionKept, wantResets: 0},
	} {
		t.Run(tc.onRevoke, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, k1, _, _ := testKeys()
				e := newEnv(t, envOptions{keys: []testKey{k1}, policy: fmt.Sprintf(basePolicy, tc.onRevoke)})
				// The speaker is asked to reset with no borrow of the
				// session's descriptor open: the session it closes must
				// not stay open on aokeyd's duplicate. It failed when the
				// revoke's delete and the machine's read-back shared one
				// borrow that the reset ran in. The listener's revoke runs
				// beside the session's and may hold the listener's
				// descriptor then (counting every socket's borrows failed
				// 1 run in 30 for that alone).
				var heldAtReset atomic.Int32
				e.waitKeys("listener", e.lis, ids(k1))
				e.up(ids(k1), k1)
				sess := e.accC
				e.sp.OnReset = func(peer.Key) { heldAtReset.Store(sess.held.Load()) }

				res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name})
				if err != nil {
					t.Fatalf("Revoke: %v", err)
				}
				i := slices.IndexFunc(res.Sockets, func(s control.RevokeSocket) bool { return s.Socket == "peer "+peerAddr.String() })
				if i < 0 || res.Sockets[i].Action != tc.action {
					t.Fatalf("revoke outcomes %+v, want the session's action %q", res.Sockets, tc.action)
				}
				resets := e.sp.Resets()
				if len(resets) != tc.wantResets || (tc.wantResets > 0 && resets[0] != peerKey) {
					t.Errorf("ResetPeer calls %v, want %d for %s", resets, tc.wantResets, peerAddr)
				}
				if n := heldAtReset.Load(); n != 0 {
					t.Errorf("ResetPeer ran while aokeyd held %d borrows of the session's descriptor", n)
				}
				if tc.action != control.ActionKept {
					return
				}
				if res.Sockets[i].Error == "" {
					t.Errorf("kept outcome has no explanation: %+v", res.Sockets[i])
				}
				// The daemon's next pass and the peer's rotator see the revoked
				// key too; it still stays, and the session still works.
				if err := e.d.RefreshKeys(context.Background()); err != nil {
					t.Fatal(err)
				}
				e.waitKeys("listener", e.lis, nil)
				e.waitFor("the rotator to resume", func() bool { return e.peerStatus().Rotation.State != "down" })
				if got := keyIDs(t, e.acc); !slices.Equal(got, ids(k1)) {
					t.Errorf("session keys %v, want the only key kept", got)
				}
				if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
					t.Errorf("exchange with the kept key: %v", err)
				}
				// Nor will the rotator remove it later: the plan holds it back.
				pl, err := e.d.Plan(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(pl.Plan, func(l string) bool {
					return strings.HasPrefix(l, "peer "+peerAddr.String()) && strings.Contains(l, "no-replacement")
				}) {
					t.Errorf("plan %q: want the session's only key held back (no-replacement)", pl.Plan)
				}
				ps := e.peerStatus()
				if len(ps.Keys) != 1 || ps.Keys[0].State != control.KeyRevoked {
					t.Errorf("status keys %+v, want k1 shown revoked", ps.Keys)
				}
			})
		})
	}
}

func TestRotateNow(t *testing.T) {
	for _, tc := range []struct {
		name      string
		withNewer bool
		started   bool
		detail    string
	}{
		{name: "newer key", withNewer: true, started: true, detail: "rolling to core/k3"},
		{name: "no newer key", withNewer: false, started: false, detail: "no newer key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, k1, _, k3 := testKeys()
				keys := []testKey{k1}
				if tc.withNewer {
					keys = append(keys, k3)
				}
				e := newEnv(t, envOptions{keys: keys})
				e.waitKeys("listener", e.lis, ids(keys...))
				// The remote router holds k3 too; k1 (added last) is its current.
				rev := slices.Clone(keys)
				slices.Reverse(rev)
				e.up(ids(keys...), rev...)
				if i := info(t, e.acc); i.CurrentKey != k1.send {
					t.Fatalf("setup: current %d, want k1", i.CurrentKey)
				}

				res, err := e.d.Rotate(context.Background(), control.RotateRequest{Peer: peerAddr.String()})
				if err != nil {
					t.Fatalf("Rotate: %v", err)
				}
				if len(res.Peers) != 1 || res.Peers[0].Started != tc.started || !strings.Contains(res.Peers[0].Detail, tc.detail) {
					t.Fatalf("Rotate: %+v, want started=%t with %q", res.Peers, tc.started, tc.detail)
				}
				if !tc.withNewer {
					return
				}
				// The remote router rolls to k3 as well: its RNext asks for it
				// (without that, RFC 5925 has us keep sending with the key the
				// peer's RNext names). Only the daemon can announce k3 as our
				// RNext, which moves the peer's sending to k3.
				r := k3.send
				if err := e.client.SetInfo(tcpao.InfoChange{RNext: &r}); err != nil {
					t.Fatal(err)
				}
				e.waitFor("the session to send with k3 and announce it", func() bool {
					if err := e.net.Exchange(e.acc, e.client, 1); err != nil {
						t.Fatalf("exchange during the roll: %v", err)
					}
					i, c := info(t, e.acc), info(t, e.client)
					return i.CurrentKey == k3.send && i.RNextKey == k3.recv && c.CurrentKey == k3.recv
				})
				if i := info(t, e.acc); i.PktBad != 0 {
					t.Errorf("pkt_bad %d after the roll", i.PktBad)
				}
				ps := e.peerStatus()
				for _, k := range ps.Keys {
					if k.Current != (k.Name == k3.name) {
						t.Errorf("status key %s current=%t, want only k3 current", k.Name, k.Current)
					}
				}
			})
		})
	}
}

func TestPeerLeavingPolicyIsForgotten(t *testing.T) {
	synctest.Test(t, testPeerLeavingPolicyIsForgotten)
}

func testPeerLeavingPolicyIsForgotten(t *testing.T) {
	_, k1, _, _ := testKeys()
	e := newEnv(t, envOptions{keys: []testKey{k1}})
	e.waitKeys("listener", e.lis, ids(k1))
	e.up(ids(k1), k1)
	if _, err := e.d.Rotate(context.Background(), control.RotateRequest{Peer: peerAddr.String()}); err != nil {
		t.Fatalf("Rotate before the policy change: %v", err)
	}

	e.d.SetPolicy(parsePolicy(t, strings.Replace(fmt.Sprintf(basePolicy, "keep"), "192.0.2.2", "192.0.2.9", 1)))
	e.waitFor("the peer to be forgotten", func() bool {
		_, err := e.d.Rotate(context.Background(), control.RotateRequest{Peer: peerAddr.String()})
		return errors.Is(err, control.ErrNotFound)
	})
	rep, err := e.d.Status(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Peers {
		if p.Peer == peerAddr.String() {
			t.Errorf("status still lists %s: %+v", peerAddr, p)
		}
	}
	if _, err := e.d.Status(context.Background(), peerAddr.String()); !errors.Is(err, control.ErrNotFound) {
		t.Errorf("Status(%s): %v, want ErrNotFound", peerAddr, err)
	}
}

func TestNoKeyBytesInOutput(t *testing.T) { synctest.Test(t, testNoKeyBytesInOutput) }

func testNoKeyBytesInOutput(t *testing.T) {
	_, k1, k2, k3 := testKeys()
	keys := []testKey{k1, k2, k3}
	e := newEnv(t, envOptions{keys: keys})
	e.waitKeys("listener", e.lis, ids(keys...))
	e.up(ids(keys...), k3, k2, k1)

	var out []any
	ctx := context.Background()
	rot, err := e.d.Rotate(ctx, control.RotateRequest{All: true})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, rot)
	plan, err := e.d.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, plan)
	rev, err := e.d.Revoke(ctx, control.RevokeRequest{Chain: chainName, Key: k1.name})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, rev)
	st, err := e.d.Status(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Peers) != 1 || len(st.Peers[0].Keys) == 0 {
		t.Fatalf("status %+v: want the peer with keys (else this test proves nothing)", st.Peers)
	}
	out = append(out, st)
	e.stop()
	logs := e.logs.String()
	if !strings.Contains(logs, "key revoked") {
		t.Fatalf("the log misses the revoke (else this test proves nothing):\n%s", logs)
	}
	for _, v := range out {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			for _, f := range secretForms(k.secret) {
				if strings.Contains(string(b), f) {
					t.Errorf("%T JSON holds the secret of %s", v, k.name)
				}
				if strings.Contains(logs, f) {
					t.Errorf("the log holds the secret of %s", k.name)
				}
			}
		}
	}
}
