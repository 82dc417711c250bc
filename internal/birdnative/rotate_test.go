package birdnative

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// rotateKey is a key of TestDriverRotateNamesItsKey's file, its send start
// relative to the test's start.
type rotateKey struct {
	name  string
	id    uint8
	start time.Duration
}

// aoctl rotate with BIRD: the file prefers the key that was newest when the
// operator asked, until the schedule reaches it. A key added later is not
// preferred for being newest; the key asked for leaving the key source
// gives the schedule its key back, not the newest one.
func TestDriverRotateNamesItsKey(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := t0
	d, _, kf := newTestDriverWith(t, func(o *Options) { o.Now = func() time.Time { return now } }, "k1")
	ctx := context.Background()
	keys := func(ks ...rotateKey) {
		t.Helper()
		var b strings.Builder
		b.WriteString("chains:\n  core:\n    peers: [192.0.2.2]\n    keys:\n")
		for _, k := range ks {
			fmt.Fprintf(&b, "      - {name: %s, send_id: %d, recv_id: %d, algorithm: hmac(sha256), secret_hex: %s, send_lifetime: {start: %q}}\n",
				k.name, k.id, k.id+100, hex.EncodeToString([]byte("a secret of key "+k.name)), t0.Add(k.start).Format(time.RFC3339))
		}
		if err := os.WriteFile(kf, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		d.refresh(ctx)
	}
	preferred := func(when string) string {
		t.Helper()
		views := d.pass(ctx, nil, false)
		if len(views) != 1 {
			t.Fatalf("%s: %d views, want 1", when, len(views))
		}
		v := views[0]
		for _, k := range v.Keys {
			if k.Preferred {
				return v.Names[ids{k.SendID, k.RecvID}]
			}
		}
		t.Fatalf("%s: no preferred key in %+v", when, v.Keys)
		return ""
	}
	rotate := func(want string) {
		t.Helper()
		res, err := d.Rotate(ctx, control.RotateRequest{Peer: "192.0.2.2"})
		if err != nil || len(res.Peers) != 1 || !res.Peers[0].Started || !strings.Contains(res.Peers[0].Detail, want) {
			t.Fatalf("Rotate: %+v, %v; want a roll to %s", res, err, want)
		}
	}
	k1, k2, k3 := rotateKey{"k1", 1, -time.Hour}, rotateKey{"k2", 2, 30 * time.Minute}, rotateKey{"k3", 3, time.Hour}

	keys(k1, k2)
	if got := preferred("before aoctl rotate"); got != "core/k1" {
		t.Fatalf("before aoctl rotate: BIRD prefers %s, want core/k1", got)
	}
	rotate("core/k2")
	if got := preferred("after aoctl rotate"); got != "core/k2" {
		t.Fatalf("after aoctl rotate: BIRD prefers %s, want core/k2", got)
	}
	keys(k1, k2, k3)
	for i := range 3 {
		if got := preferred("k3 added"); got != "core/k2" {
			t.Fatalf("pass %d after k3 came: BIRD prefers %s, want core/k2: nobody asked for k3", i, got)
		}
	}
	rotate("core/k3")
	if got := preferred("asked again"); got != "core/k3" {
		t.Fatalf("asked again: BIRD prefers %s, want core/k3", got)
	}
	keys(k1, k2) // k3 leaves the key source
	if got := preferred("k3 gone"); got != "core/k1" {
		t.Fatalf("the key asked for left the source: BIRD prefers %s, want the schedule's core/k1", got)
	}

	rotate("core/k2")
	now = t0.Add(31 * time.Minute) // the schedule reaches k2
	if got := preferred("k2's send start"); got != "core/k2" {
		t.Fatalf("at k2's send start: BIRD prefers %s, want core/k2", got)
	}
	d.mu.Lock()
	left := len(d.early)
	d.mu.Unlock()
	if left != 0 {
		t.Errorf("%d requests left once the schedule reached the key, want none", left)
	}
	if res, err := d.Rotate(ctx, control.RotateRequest{Peer: "192.0.2.2"}); err != nil || len(res.Peers) != 1 || res.Peers[0].Started {
		t.Errorf("Rotate with no newer key: %+v, %v; want nothing started", res, err)
	}
}
