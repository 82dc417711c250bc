package daemon_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// An edit in place (new material under an installed key's IDs) takes
// effect at once where holding it back protects no session: the
// installed key authenticated nothing, or its peer is down and the
// peer's new connections fail against it. Where the installed key
// authenticated something it is held back (TestNeverStrand's edit).

// materialOf is the fingerprint of the material s holds under k's IDs
// and whether it excludes TCP options; ok false when s holds no such key.
func materialOf(t *testing.T, s tcpao.Socket, k testKey) (fp tcpao.Fingerprint, exclude, ok bool) {
	t.Helper()
	ks, err := s.Keys(tcpao.KeyFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ki := range ks {
		if ki.SendID == k.send && ki.RecvID == k.recv {
			return ki.Fingerprint, ki.ExcludeOptions, true
		}
	}
	return tcpao.Fingerprint{}, false, false
}

// editRule is the rule status names for the edit of k on socket
// (control.EditSession or EditListener), "" when it names none; the
// status must name k from the key source and agree with the rule on
// whether the edit was applied.
func (e *env) editRule(k testKey, socket string) control.EditRule {
	e.t.Helper()
	for _, es := range e.peerStatus().Edits {
		if es.SendID == k.send && es.RecvID == k.recv && es.Socket == socket {
			if es.Chain != chainName || es.Key != k.name || es.Applied != es.Rule.Applied() {
				e.t.Errorf("status edit %+v: want core/%s, applied as its rule says", es, k.name)
			}
			return es.Rule
		}
	}
	return ""
}

// listenerPlan is the daemon's plan (aoctl plan) for its listener.
func (e *env) listenerPlan() []string {
	e.t.Helper()
	rep, err := e.d.Plan(context.Background())
	if err != nil {
		e.t.Fatalf("Plan: %v", err)
	}
	return slices.DeleteFunc(rep.Plan, func(l string) bool { return !strings.HasPrefix(l, "listen ") })
}

// holdsKey reports whether s holds k's material under its IDs.
func holdsKey(t *testing.T, s tcpao.Socket, k testKey) bool {
	t.Helper()
	sec := tcpao.NewSecret([]byte(k.secret))
	defer sec.Zero()
	fp, exclude, ok := materialOf(t, s, k)
	return ok && fp == sec.Fingerprint() && exclude == k.exclude
}

// TestEditOfKeyThatAuthenticatedNothing: the first contact fails (the
// key source excludes TCP options where the far end includes them; its
// SYNs fail verification, no session was ever up), and the operator
// corrects the key source under the same IDs: the listener takes the
// correction at once and the far end connects.
func TestEditOfKeyThatAuthenticatedNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2"}
		wrong := k1
		wrong.exclude = true
		e := newEnv(t, envOptions{keys: []testKey{wrong}})
		e.waitKeys("listener", e.lis, ids(k1))
		for range 3 {
			if err := e.reconnect([]testKey{k1}); err == nil {
				t.Fatal("the far end connected against a key whose tcp_options differ")
			}
		}
		e.refreshWith(k1)
		e.settle()
		if !holdsKey(t, e.lis, k1) {
			t.Errorf("the listener kept the material that authenticated nothing")
		}
		if got := e.editRule(k1, control.EditListener); got != control.EditAppliedUnused {
			t.Errorf("status says %q of the listener's edit, want %q (%s)", got, control.EditAppliedUnused, control.EditAppliedUnused.Text())
		}
		if err := e.reconnect([]testKey{k1}); err != nil {
			t.Errorf("the far end cannot connect after the correction: %v", err)
		}
	})
}

// TestEditOfUnusedSessionKey: a session runs on k2; k1, installed beside
// it on the session and the listener, never authenticated anything
// (pkt_good 0, neither Current_key nor RNext_key, carried by no session).
// An edit of k1 takes effect on the listener at once and on the session
// once the peer is seen to choose Current_key, which stays k2: the
// session carries on throughout.
func TestEditOfUnusedSessionKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2", sendStart: now.Add(-3 * time.Hour)}
		k2 := testKey{name: "k2", send: 30, recv: 31, secret: "daemon-test-secret-k2-Lm9", sendStart: now.Add(-time.Hour)}
		e := newEnv(t, envOptions{keys: []testKey{k1, k2}})
		e.waitKeys("listener", e.lis, ids(k1, k2))
		e.up(ids(k1, k2), k1, k2) // the peer sends with k2
		if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
			t.Fatal(err)
		}
		edited := k1
		edited.secret = "daemon-test-secret-k1-edited-Qw3"
		e.keys = append(e.keys, edited)
		e.refreshWith(edited, k2)
		e.waitFor("k1's new material on the listener and the session", func() bool {
			if err := e.net.Exchange(e.client, e.acc, 1); err != nil {
				t.Fatalf("the session broke: %v", err)
			}
			return holdsKey(t, e.lis, edited) && holdsKey(t, e.acc, edited)
		})
		if cur := info(t, e.acc).CurrentKey; cur != k2.send {
			t.Errorf("the session sends with %d, want k2 (%d)", cur, k2.send)
		}
		for _, sock := range []string{control.EditSession, control.EditListener} {
			if got := e.editRule(edited, sock); got != control.EditAppliedUnused {
				t.Errorf("status says %q of the %s's edit, want %q", got, sock, control.EditAppliedUnused)
			}
		}
		if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
			t.Errorf("the session broke after the edit: %v", err)
		}
	})
}

// TestEditWhilePeerDown: the session rolled onto k2 (its segments carry
// no other TCP option, so k2 verifies although the key source excludes
// options where the far end includes them), then it went down; the far
// end's new connections fail against the installed k2 (bad segments, no
// good ones since the session ended), and the operator corrects k2 in
// the key source: the listener takes the correction at once. Without
// the failing connections the installed k2 is what the peer last
// authenticated with, and it stays.
func TestEditWhilePeerDown(t *testing.T) {
	for _, c := range []struct {
		name    string
		fail    int  // connects that fail against the installed k2 before the correction
		applied bool // the listener takes the correction
		rule    control.EditRule
	}{
		{"its connections fail: applied", 3, true, control.EditAppliedPeerDown},
		{"no connection tried: held", 0, false, control.EditHeldInUse},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				now := time.Now()
				k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2", sendStart: now.Add(-time.Hour)}
				k2 := testKey{name: "k2", send: 30, recv: 31, secret: "daemon-test-secret-k2-Lm9", sendStart: now.Add(-time.Minute)}
				wrong := k2
				wrong.exclude = true
				e := newEnv(t, envOptions{keys: []testKey{k1, wrong}})
				e.waitKeys("listener", e.lis, ids(k1, k2))
				e.connect(k2, k1) // the far end holds both (k2 including options), sends with k1
				e.established()
				if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
					t.Fatal(err)
				}
				e.waitFor("the session managed", func() bool { return e.peerStatus().Rotation.State != "down" })
				e.refreshWith(wrong) // k1 leaves the key source: the session rolls to k2
				cur, rn := k2.recv, k2.send
				if err := e.client.SetInfo(tcpao.InfoChange{Current: &cur, RNext: &rn}); err != nil {
					t.Fatal(err)
				}
				e.waitFor("the roll to k2 done", func() bool {
					if err := e.net.Exchange(e.client, e.acc, 1); err != nil {
						t.Fatal(err)
					}
					return fmt.Sprint(keyIDs(t, e.acc)) == fmt.Sprint(ids(k2)) && fmt.Sprint(keyIDs(t, e.lis)) == fmt.Sprint(ids(k2))
				})
				down := e.sessionInfo()
				down.State = bgp.StateIdle
				e.sp.Set(down)
				e.waitFor("the session down in status", func() bool { return e.peerStatus().Rotation.State == "down" })
				e.settle()
				for range c.fail {
					if err := e.reconnect([]testKey{k2}); err == nil {
						t.Fatal("the far end connected against k2 with other tcp_options")
					}
				}
				// aoctl plan says what the sync does with the correction
				// (read while the listener's writes fail, so that it stays
				// to do), then the sync does it.
				e.lisC.failWrites(syscall.EIO)
				e.refreshWith(k2)
				e.settle()
				want := fmt.Sprintf("listen 192.0.2.1:179 listening edit send=%d recv=%d peer=%s (%s)", k2.send, k2.recv, peerHost, rotator.EditPeerDown)
				if !c.applied {
					want = fmt.Sprintf("listen 192.0.2.1:179 listening kept send=%d recv=%d peer=%s (%s)", k2.send, k2.recv, peerHost, rotator.ReasonEdited)
				}
				if lines := e.listenerPlan(); !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
					t.Errorf("aoctl plan:\n%s\nhas no line %q", strings.Join(lines, "\n"), want)
				}
				e.lisC.failWrites(nil)
				e.settle()
				if got := holdsKey(t, e.lis, k2); got != c.applied {
					t.Errorf("the listener holds the corrected k2: %t, want %t", got, c.applied)
				}
				if got := e.editRule(k2, control.EditListener); got != c.rule {
					t.Errorf("status says %q of the listener's edit, want %q", got, c.rule)
				}
				if c.applied {
					if err := e.reconnect([]testKey{k2}); err != nil {
						t.Errorf("the far end cannot connect after the correction: %v", err)
					}
				} else if err := e.reconnect([]testKey{wrong}); err != nil {
					t.Errorf("a peer with the material it last authenticated with cannot reconnect: %v", err)
				}
			})
		})
	}
}
