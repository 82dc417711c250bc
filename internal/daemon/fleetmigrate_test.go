package daemon_test

import (
	"context"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/fleet"
)

// Both ends aokeyd: a far end's migration of the link, read from its
// fleet document, starts this end's with the same switch time and bound;
// this end's own document then shows it, and the link's two ends agree.
// A peer that is not a TCP-MD5 peer, or a migration already running, is
// left alone.
func TestFleetFollowsFarMigration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pw = "md5-Password-one"
		e, _ := md5Env(t, pw)
		_, c := fleetVault(t)
		st := fleet.Store{V: fleet.Client{C: c}, Mount: "secret", Prefix: "aokeyd/fleet"}
		ctx := context.Background()
		at := time.Now().Add(10 * time.Minute).UTC()
		far := fleet.Document{Schema: fleet.Schema, RouterID: "r2", Addresses: []netip.Addr{peerAddr}, PublishedAt: time.Now(),
			Refresh: fleet.Duration(time.Second), Peers: []fleet.Peer{{ID: peer.KeyOf(localAddr, ""), Local: peerAddr, Session: "established",
				Auth: "migrating (prepared)", Keys: []fleet.Key{},
				Migration: &control.Migration{Peer: localAddr.String(), Step: "prepared", Prefix: "192.0.2.0/30", At: at, Deadline: at.Add(3 * time.Minute)}}}}
		if err := st.PutStatus(ctx, far); err != nil {
			t.Fatal(err)
		}
		p := fleet.NewPublisher(fleet.Options{Store: st, RouterID: "r1", Refresh: time.Second,
			Status: func(ctx context.Context) (control.StatusReport, error) { return e.d.Status(ctx, "") }, Revoke: e.d.RevokeFleet,
			Follow: func(ctx context.Context, m fleet.FarMigration) {
				e.d.FollowMigration(ctx, m.Router, m.Peer.Addr, m.Peer.VRF, m.At, m.Bound)
			},
			FollowWanted: e.d.MigrationFollowWanted})
		if !e.d.MigrationFollowWanted() {
			t.Fatal("a TCP-MD5 peer without a migration: the daemon does not want to follow")
		}
		p.Round(ctx)
		st1 := e.peerStatus()
		if st1.Migration == nil || st1.Migration.Step != "prepared" || !st1.Migration.At.Equal(at) || st1.Migration.Deadline.Sub(st1.Migration.At) != 3*time.Minute {
			t.Fatalf("after the round this end's migration is %+v, want prepared at %s with a 3m bound", st1.Migration, at)
		}
		if e.d.MigrationFollowWanted() {
			t.Fatal("with the migration running the daemon still wants to follow")
		}
		e.waitFor("TCP-AO beside TCP-MD5 at this end", func() bool { return len(listenerPrefixes(t, e.lis)) == 1 })
		p.Round(ctx)
		docs, _, err := st.Statuses(ctx)
		if err != nil {
			t.Fatal(err)
		}
		links := fleet.Join(docs, fleet.JoinOptions{Now: time.Now()})
		if len(links) != 1 || links[0].B == nil {
			t.Fatalf("links %+v", links)
		}
		for _, end := range []fleet.End{links[0].A, *links[0].B} {
			if end.Peer.Migration == nil || end.Peer.Migration.Step != "prepared" || end.Peer.Auth != "migrating (prepared)" {
				t.Errorf("%s's end of the link: auth %q migration %+v", end.Router, end.Peer.Auth, end.Peer.Migration)
			}
		}
	})
}
