package birdnative

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// TestScopedRevokePrefersThePolicysKey: after a revoke scoped to one peer,
// BIRD's file prefers the key the daemon's policy prefers for that peer
// (policy.PeerKeys.Revoke): both ends of one chain, one driven by BIRD and
// one by gobgpd or FRR, must send with the same key. The keys share a send
// start, so only the tie-break (later end, then greater name) tells them
// apart; the key listed first (the lowest send ID) ends first.
func TestScopedRevokePrefersThePolicysKey(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := t0
	d, _, kf := newTestDriverWith(t, func(o *Options) { o.Now = func() time.Time { return now } }, "k1")
	start := t0.Add(-time.Hour).Format(time.RFC3339)
	var b strings.Builder
	b.WriteString("chains:\n  core:\n    peers: [192.0.2.2]\n    keys:\n")
	for i, k := range []struct{ name, end string }{
		{"k1", `, end: "` + t0.Add(24*time.Hour).Format(time.RFC3339) + `"`},
		{"k2", `, end: "` + t0.Add(48*time.Hour).Format(time.RFC3339) + `"`},
		{"k3", ""}, // no end: preferred until it is revoked
	} {
		fmt.Fprintf(&b, "      - {name: %s, send_id: %d, recv_id: %d, algorithm: hmac(sha256), secret_hex: %s, send_lifetime: {start: %q%s}}\n",
			k.name, i+1, i+101, hex.EncodeToString([]byte("a secret of key "+k.name)), start, k.end)
	}
	if err := os.WriteFile(kf, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d.refresh(ctx)

	birdPrefers := func() string {
		t.Helper()
		views := d.pass(ctx, nil, false)
		if len(views) != 1 {
			t.Fatalf("%d views, want 1", len(views))
		}
		for _, k := range views[0].Keys {
			if k.Preferred {
				return views[0].Names[ids{k.SendID, k.RecvID}]
			}
		}
		t.Fatalf("no preferred key in %+v", views[0].Keys)
		return ""
	}
	policyPrefers := func(revoke string) string {
		t.Helper()
		snap := d.o.Keys.Current()
		defer snap.Zero()
		pk, err := d.policy().Desired(snap, netip.MustParseAddr("192.0.2.2"), "", now)
		if err != nil {
			t.Fatal(err)
		}
		if revoke != "" {
			pk.Revoke(revoke)
		}
		k, ok := pk.PreferredKey()
		if !ok {
			t.Fatal("the policy prefers no key")
		}
		return pk.SourceChain + "/" + k.MKT.Name
	}

	if got, want := birdPrefers(), policyPrefers(""); got != want {
		t.Errorf("before the revoke: BIRD prefers %s, the policy %s", got, want)
	}
	// The revoke goes through the run loop, the files' one writer; it is
	// stopped again before the test's own passes.
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(rctx) }()
	_, err := d.Revoke(rctx, control.RevokeRequest{Chain: "core", Key: "k3", Peer: "192.0.2.2"})
	cancel()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if got, want := birdPrefers(), policyPrefers("k3"); got != want || want != "core/k2" {
		t.Errorf("after revoking core/k3 for 192.0.2.2: BIRD prefers %s, the policy %s (want core/k2: the later end)", got, want)
	}
}
