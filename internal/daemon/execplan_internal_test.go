package daemon

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The executor peers' planning (execplan.go) on the scenarios of
// internal/birdnative's planPeer tests (TestPlanPeer,
// TestFirstReadRetiresNothing, TestRetireNeedsTheNewKeySeen) and its
// Driver's revoke tests, through a fakeExecutor: each pass observes the
// written list and the scripted session, plans and submits.

var execPeer = peer.KeyOf(netip.MustParseAddr("192.0.2.2"), "")

// execKey is desired key send (RecvID send+100).
func execKey(send uint8, sendable bool) policy.ScheduledKey {
	return policy.ScheduledKey{MKT: keystore.MKT{Name: "k" + string('0'+rune(send)), SendID: send, RecvID: send + 100, Algorithm: tcpao.HMACSHA256,
		Secret: tcpao.NewSecret([]byte("sixteen byte key" + string('0'+rune(send))))}, Sendable: sendable, IncludeTCPOptions: true}
}

// execWants is the peer's desired keys by send ID, the preferred one's
// index, and the revoked send IDs.
func execWants(pref int, revoked []uint8, sendable map[uint8]bool, sends ...uint8) execWant {
	w := execWant{Preferred: pref}
	for _, s := range sends {
		ok, set := sendable[s]
		w.Keys = append(w.Keys, execKey(s, ok || !set))
	}
	for _, r := range revoked {
		w.Revoked = append(w.Revoked, execRef(execID{r, r + 100}))
	}
	return w
}

// execList renders a written list as "1 2p" (send IDs, p preferred).
func execList(ks []tcpao.KeyInfo) string {
	var s []string
	for _, k := range ks {
		f := string('0' + rune(k.SendID))
		if k.IsRNext {
			f += "p"
		}
		s = append(s, f)
	}
	return strings.Join(s, " ")
}

// execWrite has the fake hold the written list: "1 2p" style, by send ID.
func execWrite(f *fakeExecutor, list string) {
	var ks []tcpao.KeyInfo
	for _, w := range strings.Fields(list) {
		send := uint8(w[0] - '0')
		k := execKey(send, true)
		p := strings.HasSuffix(w, "p")
		ks = append(ks, tcpao.KeyInfo{KeyRef: execRef(execID{send, send + 100}), Algorithm: k.MKT.Algorithm, Fingerprint: k.MKT.Secret.Fingerprint(),
			IsCurrent: p, IsRNext: p})
	}
	f.mu.Lock()
	f.written[execPeer] = ks
	f.mu.Unlock()
}

// execSession is a session whose keys 1 and 2 verified good1 and good2
// segments, Current_key cur and RNext_key 2.
func execSession(good1, good2 uint64, cur uint8) *rotator.Observed {
	k := func(send uint8, good uint64) tcpao.KeyInfo {
		return tcpao.KeyInfo{KeyRef: tcpao.KeyRef{SendID: send, RecvID: send + 100}, PktGood: good, IsCurrent: send == cur, IsRNext: send == 2}
	}
	return &rotator.Observed{HaveAO: true, Keys: []tcpao.KeyInfo{k(1, good1), k(2, good2)}}
}

// execPass is one pass over the peer at now.
func execPass(t *testing.T, p *execPlanner, f *fakeExecutor, w execWant, now time.Time) string {
	t.Helper()
	ob := f.Observe(context.Background(), []peer.Key{execPeer})[execPeer]
	if pl, ok := p.plan(execPeer, w, ob, now, 1, true); ok {
		f.Submit([]ExecPlan{pl})
	}
	return execList(f.Written(execPeer))
}

// TestExecPlanNeverStrands: TestPlanPeer's table, one pass each.
func TestExecPlanNeverStrands(t *testing.T) {
	notSendable := map[uint8]bool{1: false}
	for _, tc := range []struct {
		name    string
		written string
		want    execWant
		session *rotator.Observed
		list    string
	}{
		{"first list: the desired keys, newest preferred", "", execWants(1, nil, nil, 1, 2), nil, "1 2p"},
		{"an old key stays while no session is up", "1p", execWants(0, nil, nil, 2), nil, "1 2p"},
		{"an old key stays until the peer sends with the new one", "1p 2", execWants(0, nil, nil, 2), execSession(50, 0, 1), "1 2p"},
		{"an old key stays while the peer still sends with it", "1 2p", execWants(0, nil, nil, 2), execSession(50, 3, 2), "1 2p"},
		{"a revoked key leaves even in use", "1p 2", execWants(0, []uint8{1}, nil, 2), execSession(50, 0, 1), "2p"},
		{"the only key revoked: none is left", "1p", execWants(-1, []uint8{1}, nil), nil, ""},
		{"no key to send with: the written preferred one keeps sending", "1p", execWants(-1, nil, notSendable, 1), nil, "1p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeExecutor()
			execWrite(f, tc.written)
			f.SetSession(execPeer, tc.session)
			if got := execPass(t, newExecPlanner(), f, tc.want, time.Now()); got != tc.list {
				t.Errorf("list %q, want %q", got, tc.list)
			}
		})
	}
}

// execRetireRun is TestFirstReadRetiresNothing's and
// TestRetireNeedsTheNewKeySeen's run: the list "1 2p", key 2 desired;
// reads at 0, 1 s and 3 s find key 2 RNext_key, key 1 stopped at 50 and
// key 2 rising (the third read is the first settled one, 3 s after the
// first found key 2 RNext_key); last is the fourth read's, at 4 s. It
// returns the list after each pass.
func execRetireRun(t *testing.T, last *rotator.Observed, unread error) []string {
	t.Helper()
	f, p := newFakeExecutor(), newExecPlanner()
	execWrite(f, "1 2p")
	w := execWants(0, nil, nil, 2)
	t0 := time.Date(2026, 12, 6, 17, 0, 0, 0, time.UTC)
	var lists []string
	for i, at := range []time.Duration{0, time.Second, 3 * time.Second} {
		f.SetSession(execPeer, execSession(50, uint64(1+2*i), 2))
		lists = append(lists, execPass(t, p, f, w, t0.Add(at)))
	}
	f.SetSession(execPeer, last)
	f.SetUnread(execPeer, unread)
	lists = append(lists, execPass(t, p, f, w, t0.Add(4*time.Second)))
	return lists
}

// TestExecRetireProof: a key no longer desired that the peer sent with
// leaves the list only when a read shows the preferred key rose since a
// settled read and no old key did; never at a session's first read.
func TestExecRetireProof(t *testing.T) {
	for _, tc := range []struct {
		name   string
		last   *rotator.Observed
		unread error
		want   string
	}{
		{"the peer's switch is proved: key 2 rose since a settled read, key 1 did not", execSession(50, 9, 2), nil, "2p"},
		{"key 2 did not rise since the base: the peer may send with key 1 at its next keepalive", execSession(50, 5, 2), nil, "1 2p"},
		{"key 1 rose: the peer still sends with it", execSession(51, 9, 2), nil, "1 2p"},
		{"the speaker's session sends with key 1: kept", execSession(50, 9, 1), nil, "1 2p"},
		{"a new session's first read (its counts below the last read's): no base", execSession(10, 2, 2), nil, "1 2p"},
		{"the session could not be read: kept", execSession(50, 9, 2), errors.New("no process"), "1 2p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lists := execRetireRun(t, tc.last, tc.unread)
			for i, l := range lists[:3] {
				if l != "1 2p" {
					t.Fatalf("pass %d: list %q before the proof could hold", i+1, l)
				}
			}
			if lists[3] != tc.want {
				t.Errorf("list %q, want %q", lists[3], tc.want)
			}
		})
	}
}
