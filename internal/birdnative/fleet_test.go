package birdnative

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/fleet"
	"github.com/aokeyd/aokeyd/keystore/vaulttest"
)

// TestFleet: with speaker type bird the fleet publisher reads the
// daemon's status (the document lists BIRD's neighbors) and applies a
// fleet revocation through it: the neighbor's file loses the key at the
// publisher's next round, and the key source is not written (the fleet
// record is the fleet's).
func TestFleet(t *testing.T) {
	e := newBirdEnv(t, nil, "k1", "k2")
	d, kf, file, ctx := e.d, e.kf, e.file, context.Background()
	e.waitFile("the first pass", func(s string) bool { return strings.Contains(s, "send id 1;") })

	srv, err := vaulttest.New(vaulttest.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := api.NewClient(srv.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(srv.RootToken())
	st := fleet.Store{V: fleet.Client{C: c}, Mount: "secret", Prefix: "aokeyd/fleet"}
	p := fleet.NewPublisher(fleet.Options{Store: st, RouterID: "bird-1", Refresh: time.Second, SwitchTimeout: time.Minute,
		Status: func(ctx context.Context) (control.StatusReport, error) { return d.Status(ctx, "") }, Revoke: d.RevokeFleet})
	p.Round(ctx)
	doc := p.Last()
	if len(doc.Peers) != 1 || doc.Peers[0].ID.String() != "192.0.2.2" {
		t.Fatalf("fleet document peers %+v, want BIRD's neighbor 192.0.2.2", doc.Peers)
	}
	if _, _, err := st.AddRevocation(ctx, fleet.Revocation{Chain: "core", Key: "k1", By: "test", Reason: "leaked", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	p.Round(ctx)
	b, _ := os.ReadFile(file) // the fleet's revoke returned once the file was applied
	if strings.Contains(string(b), "send id 1;") || !strings.Contains(string(b), "send id 2;") {
		t.Fatalf("file after the fleet revocation:\n%s", b)
	}
	if k, _ := os.ReadFile(kf); strings.Contains(string(k), "revoked") {
		t.Fatal("a fleet revocation wrote the key source")
	}
}
