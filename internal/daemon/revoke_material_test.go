package daemon_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// TestRevokeMatchesMaterial: a revoke deletes the revoked key, IDs and
// material, and nothing else. An operator's own key under the revoked
// key's IDs with other material (here in place of aokeyd's on another
// peer's listener entry, or on the session) is not the revoked key: it
// stays, the revoke's outcome for that socket says so (absent, with a
// warning), and the log warns naming the peer and the IDs, never the
// material. On the tree before, the revoke's forced delete matched IDs
// only and deleted the operator's key.
func TestRevokeMatchesMaterial(t *testing.T) {
	for _, tc := range []struct {
		name    string
		session bool // the operator's key is on the session, else on 192.0.2.3's listener entry
	}{
		{name: "another peer's listener entry"},
		{name: "the session", session: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, k1, k2, _ := testKeys()
				e := newEnv(t, envOptions{keys: []testKey{k1, k2}, policy: twoPeerPolicy})
				e.waitPeerKeys("start", peerHost, ids(k1, k2))
				e.waitPeerKeys("start", otherHost, ids(k1, k2))
				e.up(ids(k1, k2), k2, k1)
				// The operator's key takes the place of aokeyd's k1.
				s, peer, sock := e.lis, otherHost, "listen 192.0.2.1:179"
				if tc.session {
					s, peer, sock = e.acc, peerHost, "peer "+peerKey.String()
				}
				own := foreignKey(k1.send, k1.recv)
				own.Peer = peer
				if err := s.DelKey(tcpao.DelKey{KeyRef: own.KeyRef, Async: !tc.session,
					SetCurrent: tc.session, Current: k2.send, SetRNext: tc.session, RNext: k2.recv}); err != nil {
					t.Fatal(err)
				}
				fp := own.Secret.Fingerprint()
				addKey(t, s, own)
				e.d.Kick()
				e.quiet(time.Second)

				res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name})
				if err != nil {
					t.Fatalf("Revoke: %v", err)
				}
				for range 3 {
					e.d.Kick()
					e.quiet(time.Second)
				}
				if !holds(t, s, own.KeyRef, fp) {
					t.Errorf("%s keys %v: the operator's key under the revoked IDs with other material was deleted", sock, keyIDs(t, s))
				}
				// The revoked key itself is gone from the revoked peer's
				// listener entry.
				if got := keysFor(t, e.lis, peerHost); !slices.Equal(got, ids(k2)) {
					t.Errorf("listener keys of %s %v, want %v", peerHost, got, ids(k2))
				}
				i := slices.IndexFunc(res.Sockets, func(r control.RevokeSocket) bool {
					return r.Socket == sock && (r.Peer == peer.String() || r.Peer == peer.Addr().String())
				})
				if i < 0 {
					t.Fatalf("outcomes %+v lack %s for %s", res.Sockets, sock, peer)
				}
				if r := res.Sockets[i]; r.Action != control.ActionAbsent || !strings.Contains(r.Warning, "other material") || r.Error != "" {
					t.Errorf("outcome %+v, want absent with a warning of the other material", r)
				}
				warn := fmt.Sprintf(`"send_id":%d,"recv_id":%d`, k1.send, k1.recv)
				if l := e.logs.String(); !strings.Contains(l, "other material") || !strings.Contains(l, warn) {
					t.Errorf("the log lacks the warning naming %s", warn)
				}
				for _, f := range secretForms("an operator's emergency key") {
					if strings.Contains(e.logs.String(), f) || strings.Contains(fmt.Sprint(res), f) {
						t.Errorf("the operator key's secret leaked")
					}
				}
			})
		})
	}
}

// holds reports whether s carries the key ref with material fp.
func holds(t *testing.T, s *tcpaotest.Sock, ref tcpao.KeyRef, fp tcpao.Fingerprint) bool {
	t.Helper()
	ks, err := s.Keys(tcpao.KeyFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(ks, func(k tcpao.KeyInfo) bool {
		return k.Peer == ref.Peer && k.SendID == ref.SendID && k.RecvID == ref.RecvID && k.Fingerprint == fp
	})
}

// TestRevokeLeavesEditedKey: the key source edits k1 in place (new
// material under its IDs, held back: the installed k1 stays, ReasonEdited),
// then the operator revokes k1. The revoked key is the new material, never
// installed; the installed key under its IDs is other material, so it
// stays on the session and the listener through the passes after the
// revoke (the rotator's revocation path, Desired.Revoked, matches material
// too). On the tree before, the pass after the revoke force-deleted it by
// its IDs.
func TestRevokeLeavesEditedKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, k1, k2, _ := testKeys()
		// The far end sends nothing (no keepalive probe's answer either):
		// the session never settles, so the edit is held back on it
		// (ReasonEdited) as on the listener.
		e := newEnv(t, envOptions{keys: []testKey{k1, k2}, noPeerProbe: true})
		e.waitKeys("listener", e.lis, ids(k1, k2))
		e.up(ids(k1, k2), k2, k1)
		old := k1.mkt()
		fp := old.Secret.Fingerprint()
		old.Zero()
		edited := k1
		edited.secret = "daemon-test-secret-k1-edited-Qw3"
		e.keys = append(e.keys, edited)
		e.refreshWith(edited, k2)
		e.d.Kick()
		e.quiet(time.Second)
		if _, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name}); err != nil {
			t.Fatalf("Revoke: %v", err)
		}
		for range 5 {
			e.d.Kick()
			e.quiet(time.Second)
		}
		for name, s := range map[string]*tcpaotest.Sock{"listener": e.lis, "session": e.acc} {
			if !holds(t, s, tcpao.KeyRef{Peer: peerHost, SendID: k1.send, RecvID: k1.recv}, fp) {
				t.Errorf("%s keys %v: the installed k1 (other material than the revoked edit) was deleted", name, keyIDs(t, s))
			}
		}
	})
}
