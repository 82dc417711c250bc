package daemon_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestReplaceAppliesAnApprovedEdit: an edit in place is held back until
// `aoctl replace` approves it; then the listener takes the new material,
// and the session takes it in place when its peer was seen with another
// key, or is reset (the planned reset) when the edited key is its only
// one. A later edit of the same key is held back again.
func TestReplaceAppliesAnApprovedEdit(t *testing.T) {
	for _, c := range []struct {
		name  string
		spare bool // the session also has k0, which its peer sent with
		want  control.SocketAction
	}{
		{"only key: planned reset", false, control.ActionReset},
		{"spare the peer used: in place", true, control.ActionReplaced},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				now := time.Now()
				k0 := testKey{name: "k0", send: 10, recv: 11, secret: "daemon-test-secret-k0-Xq7", sendStart: now.Add(-3 * time.Hour)}
				k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2", sendStart: now.Add(-time.Hour)}
				keys := []testKey{k1}
				if c.spare {
					keys = []testKey{k0, k1}
				}
				e := newEnv(t, envOptions{keys: keys})
				e.waitKeys("listener", e.lis, ids(keys...))
				e.up(ids(keys...), keys...)
				if c.spare {
					// The peer sends with k0 for a while, then with k1.
					zero := k0.recv
					if err := e.client.SetInfo(tcpao.InfoChange{Current: &zero}); err != nil {
						t.Fatal(err)
					}
					if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
						t.Fatal(err)
					}
				}
				before := fingerprints(t, e.lis, e.acc)
				edited := k1
				edited.secret = "daemon-test-secret-k1-edited-Qw3"
				e.refreshWith(append(keys[:len(keys)-1:len(keys)-1], edited)...)
				e.settle()
				if after := fingerprints(t, e.lis, e.acc); !slices.Equal(before, after) {
					t.Fatalf("the edit was applied before its approval: %v, then %v", before, after)
				}
				res, err := e.d.Replace(context.Background(), control.ReplaceRequest{Chain: chainName, Key: "k1"})
				if err != nil {
					t.Fatal(err)
				}
				i := slices.IndexFunc(res.Sockets, func(s control.RevokeSocket) bool { return s.Socket == "peer "+peerAddr.String() })
				if i < 0 || res.Sockets[i].Action != c.want || res.Sockets[i].Error != "" || res.Failed() {
					t.Fatalf("replace outcome %+v, want the session %s", res.Sockets, c.want)
				}
				resets := e.sp.Resets()
				if c.want == control.ActionReset && !slices.Contains(resets, peerKey) || c.want != control.ActionReset && len(resets) > 0 {
					t.Errorf("speaker resets %v for %s", resets, c.want)
				}
				e.settle()
				// The listener holds the new material: a peer with it
				// connects; one with the old secret no longer does.
				if err := e.reconnect(append(keys[:len(keys)-1:len(keys)-1], edited)); err != nil {
					t.Errorf("a peer with the new material cannot connect: %v", err)
				}
				if c.spare {
					if got, want := fingerprints(t, e.acc), fingerprints(t, e.lis); !slices.Equal(got, want) {
						t.Errorf("the session's keys %v, the listener's %v: the session did not take the new material", got, want)
					}
				}
				// A second edit is held back again.
				again := edited
				again.secret = "daemon-test-secret-k1-edited-Zp8"
				held := fingerprints(t, e.lis)
				e.refreshWith(append(keys[:len(keys)-1:len(keys)-1], again)...)
				e.settle()
				if after := fingerprints(t, e.lis); !slices.Equal(held, after) {
					t.Errorf("a second edit was applied without an approval")
				}
			})
		})
	}
}
